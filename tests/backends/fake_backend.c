/* fake_backend.c — test-only plugins for test_loader.c, built three ways:
 *   FAKE_ABI99:   a backend built for ABI 99.3 (must be refused by version);
 *   FAKE_SMALL:   ABI 1 but a vtable that ends before graph_compute;
 *   FAKE_NOPROBE: a complete ABI-1 backend whose probe finds no device;
 *   FAKE_SLOWUPLOAD: a device whose buffers are host memory and whose every
 *                 write takes 40 ms and that computes nothing: a model loads
 *                 onto it slowly enough for model.c's upload progress log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alice/backend.h"

#if !defined(FAKE_SLOWUPLOAD)
static int probe(char *reason, size_t len)
{
	snprintf(reason, len, "no fake device here (test backend)");
	return 0;
}

static enum alice_status device_info(int device, struct alice_device_info *out)
{
	(void)device;
	(void)out;
	return ALICE_ERR_UNSUPPORTED;
}

static enum alice_status init(const struct alice_backend_options *o, struct alice_backend_ctx **out, char *e,
			      size_t n)
{
	(void)o;
	*out = NULL;
	snprintf(e, n, "no device");
	return ALICE_ERR_UNSUPPORTED;
}
#endif

static void ctx_free(struct alice_backend_ctx *c) { (void)c; }
static const char *last_error(struct alice_backend_ctx *c) { (void)c; return "no device"; }
#if !defined(FAKE_SLOWUPLOAD)
static enum alice_status b_alloc(struct alice_backend_ctx *c, uint64_t s, uint32_t u, struct alice_buffer **o)
{ (void)c; (void)s; (void)u; *o = NULL; return ALICE_ERR_UNSUPPORTED; }
static void b_free(struct alice_backend_ctx *c, struct alice_buffer *b) { (void)c; (void)b; }
static enum alice_status b_write(struct alice_backend_ctx *c, struct alice_buffer *b, uint64_t o, const void *s, uint64_t n)
{ (void)c; (void)b; (void)o; (void)s; (void)n; return ALICE_ERR_UNSUPPORTED; }
#endif
static enum alice_status b_read(struct alice_backend_ctx *c, struct alice_buffer *b, uint64_t o, void *d, uint64_t n)
{ (void)c; (void)b; (void)o; (void)d; (void)n; return ALICE_ERR_UNSUPPORTED; }
static enum alice_status b_clear(struct alice_backend_ctx *c, struct alice_buffer *b, uint64_t o, uint64_t n)
{ (void)c; (void)b; (void)o; (void)n; return ALICE_ERR_UNSUPPORTED; }
static bool supports(struct alice_backend_ctx *c, const struct alice_graph *g, const struct alice_node *n)
{ (void)c; (void)g; (void)n; return false; }
static enum alice_status compute(struct alice_backend_ctx *c, const struct alice_graph *g)
{ (void)c; (void)g; return ALICE_ERR_UNSUPPORTED; }

#if defined(FAKE_SLOWUPLOAD)
struct alice_buffer {
	unsigned char *p;
};
static int probe(char *reason, size_t len) { (void)reason; (void)len; return 1; }
static enum alice_status device_info(int device, struct alice_device_info *out)
{
	(void)device;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "slow fake device");
	return ALICE_OK;
}
static enum alice_status init(const struct alice_backend_options *o, struct alice_backend_ctx **out, char *e,
				   size_t n)
{
	static int token;
	(void)o;
	(void)e;
	(void)n;
	*out = (struct alice_backend_ctx *)&token; /* no state */
	return ALICE_OK;
}
static enum alice_status b_alloc(struct alice_backend_ctx *c, uint64_t s, uint32_t u, struct alice_buffer **o)
{
	(void)c;
	(void)u;
	struct alice_buffer *b = calloc(1, sizeof(*b));
	if (b && !(b->p = malloc(s ? s : 1))) {
		free(b);
		b = NULL;
	}
	*o = b;
	return b ? ALICE_OK : ALICE_ERR_NOMEM;
}
static void b_free(struct alice_backend_ctx *c, struct alice_buffer *b)
{
	(void)c;
	if (b)
		free(b->p);
	free(b);
}
static enum alice_status b_write(struct alice_backend_ctx *c, struct alice_buffer *b, uint64_t o, const void *s,
				    uint64_t n)
{
	(void)c;
	memcpy(b->p + o, s, n);
	usleep(40000);
	return ALICE_OK;
}
#endif

#if defined(FAKE_ABI99)
#define MAJOR 99
#define MINOR 3
#define SIZE sizeof(struct alice_backend_vtable)
#elif defined(FAKE_SMALL)
#define MAJOR ALICE_BACKEND_ABI_MAJOR
#define MINOR 0
#define SIZE offsetof(struct alice_backend_vtable, supports_op)
#else
#define MAJOR ALICE_BACKEND_ABI_MAJOR
#define MINOR ALICE_BACKEND_ABI_MINOR
#define SIZE sizeof(struct alice_backend_vtable)
#endif

static const struct alice_backend_vtable vt = {
	.abi_major = MAJOR, .abi_minor = MINOR, .size = SIZE, .name = "fake",
	.probe = probe, .device_info = device_info, .init = init, .free = ctx_free,
	.last_error = last_error, .buffer_alloc = b_alloc, .buffer_free = b_free,
	.buffer_write = b_write, .buffer_read = b_read, .buffer_clear = b_clear,
	.supports_op = supports, .graph_compute = compute,
};

ALICE_BACKEND_EXPORT const struct alice_backend_vtable *alice_backend_entry(const struct alice_backend_host *host)
{
	(void)host;
	return &vt;
}
