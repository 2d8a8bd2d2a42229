/* test_cuda_host.c — the CUDA backend's host-side node validation, which
 * needs no GPU: the plugin is dlopen'ed from the build directory and its
 * supports_op is asked with a NULL context (allowed: no CUDA call is made)
 * about the recurrent ops of ABI 1.1 and malformed nodes. Where the build
 * has no CUDA backend (no nvcc) the test is skipped; where it has one, this
 * runs on any machine, so a broken op table or type check shows up in CI,
 * not only on the GPU. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alice/backend.h"
#include "alice/quant.h"

static void *so;

static const struct alice_backend_vtable *open_cuda(void)
{
	const char *path = ALICE_BUILD_DIR "/lib/libalice-backend-cuda.so";
	if (access(path, F_OK) != 0)
		cr_skip_test("no CUDA backend in this build (%s)", path);
	so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!so) /* built, but the CUDA runtime libraries are not installed here */
		cr_skip_test("cannot load %s: %s", path, dlerror());
	alice_backend_entry_fn entry = (alice_backend_entry_fn)dlsym(so, ALICE_BACKEND_ENTRY_SYMBOL);
	cr_assert_not_null(entry);
	const struct alice_backend_vtable *vt = entry(NULL);
	cr_assert_not_null(vt);
	cr_assert_eq(vt->abi_major, ALICE_BACKEND_ABI_MAJOR);
	cr_assert_geq(vt->abi_minor, 1, "the cuda backend must implement ABI 1.1 (SSM_CONV, GATED_DELTA_NET)");
	return vt;
}

static struct alice_buffer *const FAKE_BUF = (struct alice_buffer *)0x1000; /* never dereferenced */

static void t_set(struct alice_tensor *t, uint32_t type, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->ne[0] = n0, t->ne[1] = n1, t->ne[2] = n2, t->ne[3] = n3;
	t->nb[0] = 4;
	t->nb[1] = 4 * n0;
	t->nb[2] = t->nb[1] * n1;
	t->nb[3] = t->nb[2] * n2;
	t->buf = FAKE_BUF;
}

/* GATED_DELTA_NET: t[0] dst, t[1] qk, t[2] v, t[3] g, t[4] beta, t[5] state, t[6] seq */
static void gdn(struct alice_tensor *t, struct alice_node *n, int64_t S, int64_t T)
{
	t_set(&t[0], ALICE_TYPE_F32, S, 4, T, 1);
	t_set(&t[1], ALICE_TYPE_F32, S, 4, T, 1);
	t_set(&t[2], ALICE_TYPE_F32, S, 4, T, 1);
	t_set(&t[3], ALICE_TYPE_F32, 4, T, 1, 1);
	t_set(&t[4], ALICE_TYPE_F32, 4, T, 1, 1);
	t_set(&t[5], ALICE_TYPE_F32, S, S, 4, 3);
	t_set(&t[6], ALICE_TYPE_I32, T, 1, 1, 1);
	memset(n, 0, sizeof(*n));
	n->op = ALICE_OP_GATED_DELTA_NET;
	n->dst = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		n->src[i] = i + 1;
	n->fp[0] = 0.125f;
}

/* SSM_CONV: t[0] dst, t[1] x, t[2] w, t[3] state, t[4] seq */
static void conv(struct alice_tensor *t, struct alice_node *n, int64_t C, int64_t T, int64_t K)
{
	t_set(&t[0], ALICE_TYPE_F32, C, T, 1, 1);
	t_set(&t[1], ALICE_TYPE_F32, C, T, 1, 1);
	t_set(&t[2], ALICE_TYPE_F32, K, C, 1, 1);
	t_set(&t[3], ALICE_TYPE_F32, K - 1, C, 1, 2);
	t_set(&t[4], ALICE_TYPE_I32, T, 1, 1, 1);
	memset(n, 0, sizeof(*n));
	n->op = ALICE_OP_SSM_CONV;
	n->dst = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		n->src[i] = i < 4 ? i + 1 : -1;
}

Test(cuda_host, recurrent_ops_validation)
{
	const struct alice_backend_vtable *vt = open_cuda();
	struct alice_tensor t[7];
	struct alice_node n;
	struct alice_graph g = {.n_tensors = 7, .n_nodes = 1, .tensors = t, .nodes = &n};

	gdn(t, &n, 128, 9);
	cr_expect(vt->supports_op(NULL, &g, &n), "GATED_DELTA_NET S128 must be supported");
	gdn(t, &n, 13, 1);
	cr_expect(vt->supports_op(NULL, &g, &n), "GATED_DELTA_NET S13 must be supported");
	gdn(t, &n, 300, 2);
	cr_expect_not(vt->supports_op(NULL, &g, &n), "S300 exceeds the register-resident kernel (<= 256)");
	gdn(t, &n, 64, 2);
	t[5].type = ALICE_TYPE_F16;
	cr_expect_not(vt->supports_op(NULL, &g, &n), "an F16 state is not supported");
	gdn(t, &n, 64, 2);
	t[6].type = ALICE_TYPE_F32;
	cr_expect_not(vt->supports_op(NULL, &g, &n), "seq must be I32");
	gdn(t, &n, 64, 2);
	n.src[5] = -1;
	cr_expect_not(vt->supports_op(NULL, &g, &n), "GATED_DELTA_NET without seq");
	gdn(t, &n, 64, 2);
	n.src[3] = 9;
	cr_expect_not(vt->supports_op(NULL, &g, &n), "a source index past the graph's tensors");

	g.n_tensors = 5;
	conv(t, &n, 37, 9, 4);
	cr_expect(vt->supports_op(NULL, &g, &n), "SSM_CONV must be supported");
	conv(t, &n, 37, 9, 7);
	cr_expect(vt->supports_op(NULL, &g, &n), "SSM_CONV with K = 7 (generic kernel)");
	conv(t, &n, 37, 9, 4);
	n.src[4] = 4; /* a fifth source */
	cr_expect_not(vt->supports_op(NULL, &g, &n), "SSM_CONV takes 4 sources");
	conv(t, &n, 37, 9, 4);
	t[2].type = ALICE_TYPE_F16;
	cr_expect_not(vt->supports_op(NULL, &g, &n), "F16 conv weights are not supported");

	conv(t, &n, 37, 9, 4);
	n.op = ALICE_OP_COUNT_V1_6;
	cr_expect_not(vt->supports_op(NULL, &g, &n), "an op past the 1.4 set");
	n.op = ALICE_OP_NORM; /* not (yet) a CUDA kernel: a BERT model gets a clear load error */
	cr_expect_not(vt->supports_op(NULL, &g, &n), "NORM is not supported by the cuda backend");
	dlclose(so);
}

/* Without a usable GPU, probe says why instead of failing later. */
Test(cuda_host, probe_reports_a_reason)
{
	const struct alice_backend_vtable *vt = open_cuda();
	char why[256] = "";
	int n = vt->probe(why, sizeof(why));
	if (n > 0)
		cr_log_info("cuda_host: %d CUDA device(s) here", n);
	else
		cr_expect(why[0] != '\0', "probe found no device but gave no reason");
	dlclose(so);
}
