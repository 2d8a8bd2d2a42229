/* op_case.c — see op_case.h. */
#include "support/op_case.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"

uint64_t rng_u64(struct rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s;
}

double rng_unif(struct rng *r)
{
	return (double)(rng_u64(r) >> 11) / 9007199254740992.0;
}

double rng_gauss(struct rng *r)
{
	double u = rng_unif(r), v = rng_unif(r);
	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

void tc_free(struct tcase *c)
{
	for (int i = 0; i < c->nt; i++)
		free(c->host[i]);
	free(c->ref);
	memset(c, 0, sizeof(*c));
}

int tc_tensor(struct tcase *c, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, int pad)
{
	const struct alice_type_info *ti = alice_type_info(type);
	int i = c->nt++;
	struct alice_tensor *t = &c->t[i];
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = ne3;
	t->nb[0] = ti->type_size;
	t->nb[1] = (int64_t)alice_row_size(type, ne0) + pad * ti->type_size;
	t->nb[2] = t->nb[1] * (ne1 + pad);
	t->nb[3] = t->nb[2] * (ne2 + (pad ? 1 : 0));
	c->size[i] = (size_t)(t->nb[3] * ne3);
	c->host[i] = calloc(1, c->size[i] + 64);
	return i;
}

int64_t nelem(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static uint8_t *elem_ptr(struct tcase *c, int i, int64_t flat)
{
	const struct alice_tensor *t = &c->t[i];
	uint8_t *p = c->host[i];
	for (int d = 0; d < 4; d++) {
		p += (flat % t->ne[d]) * t->nb[d];
		flat /= t->ne[d];
	}
	return p;
}

double get_el(struct tcase *c, int i, int64_t flat)
{
	const uint8_t *p = elem_ptr(c, i, flat);
	uint32_t type = c->t[i].type;
	if (type == ALICE_TYPE_F32) {
		float v;
		memcpy(&v, p, 4);
		return v;
	}
	if (type == ALICE_TYPE_I32) {
		int32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	uint16_t h;
	memcpy(&h, p, 2);
	return type == ALICE_TYPE_F16 ? alice_fp16_to_fp32(h) : alice_bf16_to_fp32(h);
}

void set_el(struct tcase *c, int i, int64_t flat, double v)
{
	uint8_t *p = elem_ptr(c, i, flat);
	uint32_t type = c->t[i].type;
	if (type == ALICE_TYPE_F32) {
		float f = (float)v;
		memcpy(p, &f, 4);
	} else if (type == ALICE_TYPE_I32) {
		int32_t x = (int32_t)v;
		memcpy(p, &x, 4);
	} else {
		uint16_t h = type == ALICE_TYPE_F16 ? alice_fp32_to_fp16((float)v) : alice_fp32_to_bf16((float)v);
		memcpy(p, &h, 2);
	}
}

void fill_gauss(struct tcase *c, int i, struct rng *r, double sigma)
{
	for (int64_t k = 0; k < nelem(&c->t[i]); k++)
		set_el(c, i, k, sigma * rng_gauss(r));
}

struct tcase *new_case(struct tcase **arr, int *n, const char *fmt, ...)
{
	*arr = realloc(*arr, (size_t)(*n + 1) * sizeof(**arr));
	struct tcase *c = &(*arr)[(*n)++];
	memset(c, 0, sizeof(*c));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->name, sizeof(c->name), fmt, ap);
	va_end(ap);
	c->node.dst = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		c->node.src[i] = -1;
	c->core = true;
	return c;
}

double *alloc_ref(struct tcase *c)
{
	c->ref = calloc((size_t)nelem(&c->t[0]), sizeof(double));
	return c->ref;
}

