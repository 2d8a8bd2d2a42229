/* test_ops_ssm.c — the recurrent ops of backend.h 1.1 (SSM_CONV,
 * GATED_DELTA_NET) on every backend the loader finds, against a plain
 * double-precision reference written here from backend.h's definitions, on
 * seeded random inputs: odd sizes, strided inputs, several sequences
 * interleaved in one batch (each in order), a non-zero starting state, and
 * two steps in a row (the state written in place by the first is read by
 * the second). Both dst and the updated state are compared.
 *
 * A backend that does not support these ops (supports_op false) is
 * reported and passes: they are not in the 1.0 op set, and the model then
 * fails at context creation with the op named. The CPU and CUDA backends
 * must support them. Error measure: NMSE = sum (out-ref)^2 / sum ref^2; everything is F32
 * with exp and dot products of <= 64 terms, so float rounding gives ~1e-14;
 * the bound is 1e-10. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"

#define BOUND 1e-10
#define MAXT 8

struct rng {
	uint64_t s;
};

static double rnd(struct rng *r) /* uniform in (-1, 1) */
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return (double)(r->s >> 11) / 4503599627370496.0 - 1.0;
}

/* One op's tensors: t[0] dst, t[1..] sources; F32 or I32, host copies. */
struct opcase {
	int nt;
	struct alice_tensor t[MAXT];
	uint8_t *host[MAXT];
	size_t bytes[MAXT];
	struct alice_buffer *buf[MAXT];
	struct alice_node node;
};

/* Tensor with row padding (elements) in dim 1 strides when pad1 > 0. */
static int add_t(struct opcase *c, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, int64_t pad1)
{
	int i = c->nt++;
	struct alice_tensor *t = &c->t[i];
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = ne3;
	t->nb[0] = 4;
	t->nb[1] = 4 * (ne0 + pad1);
	t->nb[2] = t->nb[1] * ne1;
	t->nb[3] = t->nb[2] * ne2;
	c->bytes[i] = (size_t)(t->nb[3] * ne3);
	c->host[i] = calloc(1, c->bytes[i]);
	cr_assert_not_null(c->host[i]);
	return i;
}

static float *fp(struct opcase *c, int i, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
	const struct alice_tensor *t = &c->t[i];
	return (float *)(c->host[i] + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

static int32_t *ip(struct opcase *c, int i, int64_t i0)
{
	return (int32_t *)(c->host[i] + i0 * 4);
}

static void fill(struct opcase *c, int i, struct rng *r, double scale)
{
	const struct alice_tensor *t = &c->t[i];
	for (int64_t a = 0; a < t->ne[3]; a++)
		for (int64_t b = 0; b < t->ne[2]; b++)
			for (int64_t d = 0; d < t->ne[1]; d++)
				for (int64_t e = 0; e < t->ne[0]; e++)
					*fp(c, i, e, d, b, a) = (float)(scale * rnd(r));
}

static void free_case(const struct alice_backend_vtable *vt, struct alice_backend_ctx *ctx, struct opcase *c)
{
	for (int i = 0; i < c->nt; i++) {
		if (c->buf[i])
			vt->buffer_free(ctx, c->buf[i]);
		free(c->host[i]);
	}
	memset(c, 0, sizeof(*c));
}

static void upload(const struct alice_backend_vtable *vt, struct alice_backend_ctx *ctx, struct opcase *c)
{
	for (int i = 0; i < c->nt; i++) {
		if (!c->buf[i])
			cr_assert_eq(vt->buffer_alloc(ctx, c->bytes[i], ALICE_BUFFER_COMPUTE, &c->buf[i]), ALICE_OK, "%s",
				     vt->last_error(ctx));
		c->t[i].buf = c->buf[i];
		c->t[i].offset = 0;
		cr_assert_eq(vt->buffer_write(ctx, c->buf[i], 0, c->host[i], c->bytes[i]), ALICE_OK, "%s",
			     vt->last_error(ctx));
	}
}

static struct alice_graph graph_of(struct opcase *c)
{
	struct alice_graph g = {.n_tensors = (uint32_t)c->nt, .n_nodes = 1, .tensors = c->t, .nodes = &c->node};
	return g;
}

/* Read tensor i back from the backend into out (same layout as host). */
static void readback(const struct alice_backend_vtable *vt, struct alice_backend_ctx *ctx, struct opcase *c, int i,
		     uint8_t *out)
{
	cr_assert_eq(vt->buffer_read(ctx, c->buf[i], 0, out, c->bytes[i]), ALICE_OK, "%s", vt->last_error(ctx));
}

struct nmse {
	double num, den;
};

static void acc(struct nmse *e, double got, double ref)
{
	e->num += (got - ref) * (got - ref);
	e->den += ref * ref;
}

static double nmse_of(const struct nmse *e)
{
	return e->den > 0 ? e->num / e->den : e->num;
}

/* ---- SSM_CONV ---- */

/* Reference: one step over every token of c (x, w, state, seq), in place on
 * the double state copy st [n_seq][C][K-1]; out [T][C]. */
static void conv_ref(struct opcase *c, double *st, double *out)
{
	int64_t C = c->t[1].ne[0], T = c->t[1].ne[1], K = c->t[2].ne[0];
	for (int64_t t = 0; t < T; t++) {
		int32_t s = *ip(c, 4, t);
		for (int64_t ch = 0; ch < C; ch++) {
			double *row = st + ((int64_t)s * C + ch) * (K - 1);
			double x = *fp(c, 1, ch, t, 0, 0), sum = 0;
			for (int64_t k = 0; k < K - 1; k++)
				sum += *fp(c, 2, k, ch, 0, 0) * row[k];
			sum += *fp(c, 2, K - 1, ch, 0, 0) * x;
			out[t * C + ch] = sum;
			for (int64_t k = 0; k + 1 < K - 1; k++)
				row[k] = row[k + 1];
			row[K - 2] = x;
		}
	}
}

static void conv_case(struct opcase *c, struct rng *r, int64_t C, int64_t T, int64_t K, int64_t n_seq,
		      const int32_t *seq)
{
	memset(c, 0, sizeof(*c));
	add_t(c, ALICE_TYPE_F32, C, T, 1, 1, 0);          /* dst */
	add_t(c, ALICE_TYPE_F32, C, T, 1, 1, 3);          /* x, rows padded (strided dim 1) */
	add_t(c, ALICE_TYPE_F32, K, C, 1, 1, 0);          /* w */
	add_t(c, ALICE_TYPE_F32, K - 1, C, 1, n_seq, 0);  /* state */
	add_t(c, ALICE_TYPE_I32, T, 1, 1, 1, 0);          /* seq */
	fill(c, 1, r, 1.0);
	fill(c, 2, r, 0.5);
	fill(c, 3, r, 1.0);
	for (int64_t t = 0; t < T; t++)
		*ip(c, 4, t) = seq[t];
	c->node.op = ALICE_OP_SSM_CONV;
	c->node.dst = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		c->node.src[i] = i < 4 ? i + 1 : -1;
}

/* Runs the case twice (new x the second time); returns false if the
 * backend does not support it. */
static bool run_conv(const struct alice_backend_vtable *vt, struct alice_backend_ctx *ctx, struct rng *r,
		     struct opcase *c, double *worst)
{
	int64_t C = c->t[1].ne[0], T = c->t[1].ne[1], K = c->t[2].ne[0], n_seq = c->t[3].ne[3];
	struct alice_graph g = graph_of(c);
	upload(vt, ctx, c);
	if (!vt->supports_op(ctx, &g, &c->node))
		return false;
	double *st = malloc((size_t)(n_seq * C * (K - 1)) * sizeof(double));
	double *out = malloc((size_t)(T * C) * sizeof(double));
	uint8_t *got = malloc(c->bytes[0] > c->bytes[3] ? c->bytes[0] : c->bytes[3]);
	cr_assert(st && out && got);
	for (int64_t s = 0; s < n_seq; s++)
		for (int64_t ch = 0; ch < C; ch++)
			for (int64_t k = 0; k < K - 1; k++)
				st[(s * C + ch) * (K - 1) + k] = *fp(c, 3, k, ch, 0, s);
	*worst = 0;
	for (int step = 0; step < 2; step++) {
		if (step == 1) { /* new inputs; the state stays on the backend */
			fill(c, 1, r, 1.0);
			cr_assert_eq(vt->buffer_write(ctx, c->buf[1], 0, c->host[1], c->bytes[1]), ALICE_OK);
		}
		cr_assert_eq(vt->graph_compute(ctx, &g), ALICE_OK, "%s", vt->last_error(ctx));
		conv_ref(c, st, out);
		struct nmse e = {0}, es = {0};
		readback(vt, ctx, c, 0, got);
		for (int64_t i = 0; i < T * C; i++)
			acc(&e, ((float *)got)[i], out[i]);
		readback(vt, ctx, c, 3, got);
		for (int64_t i = 0; i < n_seq * C * (K - 1); i++)
			acc(&es, ((float *)got)[i], st[i]);
		*worst = fmax(*worst, fmax(nmse_of(&e), nmse_of(&es)));
	}
	free(st);
	free(out);
	free(got);
	return true;
}

/* ---- GATED_DELTA_NET ---- */

static void gdn_case(struct opcase *c, struct rng *r, int64_t S, int64_t Hk, int64_t Hv, int64_t T, int64_t n_seq,
		     const int32_t *seq)
{
	memset(c, 0, sizeof(*c));
	add_t(c, ALICE_TYPE_F32, S, Hv, T, 1, 0);       /* dst */
	add_t(c, ALICE_TYPE_F32, S, 2 * Hk, T, 1, 0);   /* qk */
	add_t(c, ALICE_TYPE_F32, S, Hv, T, 1, 5);       /* v, strided heads */
	add_t(c, ALICE_TYPE_F32, Hv, T, 1, 1, 0);       /* g */
	add_t(c, ALICE_TYPE_F32, Hv, T, 1, 1, 2);       /* beta, strided tokens */
	add_t(c, ALICE_TYPE_F32, S, S, Hv, n_seq, 0);   /* state */
	add_t(c, ALICE_TYPE_I32, T, 1, 1, 1, 0);        /* seq */
	/* q and k unit rows (as after the L2 norm), g <= 0, beta in (0, 1) */
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < 2 * Hk; h++) {
			double n2 = 0;
			for (int64_t i = 0; i < S; i++) {
				float v = (float)rnd(r);
				*fp(c, 1, i, h, t, 0) = v;
				n2 += (double)v * v;
			}
			for (int64_t i = 0; i < S; i++)
				*fp(c, 1, i, h, t, 0) = (float)(*fp(c, 1, i, h, t, 0) / sqrt(n2));
		}
	fill(c, 2, r, 1.0);
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < Hv; h++) {
			*fp(c, 3, h, t, 0, 0) = (float)(-0.5 * (1.0 + rnd(r)));
			*fp(c, 4, h, t, 0, 0) = (float)(0.5 + 0.45 * rnd(r));
		}
	fill(c, 5, r, 0.3);
	for (int64_t t = 0; t < T; t++)
		*ip(c, 6, t) = seq[t];
	c->node.op = ALICE_OP_GATED_DELTA_NET;
	c->node.dst = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		c->node.src[i] = i + 1;
	c->node.fp[0] = 1.0f / sqrtf((float)S);
}

/* Reference step; M [n_seq][Hv][S(j)][S(i)] in double, out [T][Hv][S]. */
static void gdn_ref(struct opcase *c, double *M, double *out)
{
	int64_t S = c->t[2].ne[0], Hv = c->t[2].ne[1], T = c->t[2].ne[2], Hk = c->t[1].ne[1] / 2;
	double scale = c->node.fp[0];
	for (int64_t t = 0; t < T; t++) {
		int32_t s = *ip(c, 6, t);
		for (int64_t h = 0; h < Hv; h++) {
			double *m = M + ((int64_t)s * Hv + h) * S * S;
			int64_t hk = h % Hk;
			double decay = exp((double)*fp(c, 3, h, t, 0, 0)), beta = *fp(c, 4, h, t, 0, 0);
			for (int64_t j = 0; j < S; j++) {
				double *row = m + j * S, dk = 0, dq = 0;
				for (int64_t i = 0; i < S; i++) {
					row[i] *= decay;
					dk += row[i] * *fp(c, 1, i, Hk + hk, t, 0);
				}
				double d = (*fp(c, 2, j, h, t, 0) - dk) * beta;
				for (int64_t i = 0; i < S; i++) {
					row[i] += d * *fp(c, 1, i, Hk + hk, t, 0);
					dq += row[i] * *fp(c, 1, i, hk, t, 0);
				}
				out[(t * Hv + h) * S + j] = dq * scale;
			}
		}
	}
}

static bool run_gdn(const struct alice_backend_vtable *vt, struct alice_backend_ctx *ctx, struct rng *r,
		    struct opcase *c, double *worst)
{
	int64_t S = c->t[2].ne[0], Hv = c->t[2].ne[1], T = c->t[2].ne[2], n_seq = c->t[5].ne[3];
	struct alice_graph g = graph_of(c);
	upload(vt, ctx, c);
	if (!vt->supports_op(ctx, &g, &c->node))
		return false;
	size_t nst = (size_t)(n_seq * Hv * S * S);
	double *M = malloc(nst * sizeof(double)), *out = malloc((size_t)(T * Hv * S) * sizeof(double));
	uint8_t *got = malloc(c->bytes[5] > c->bytes[0] ? c->bytes[5] : c->bytes[0]);
	cr_assert(M && out && got);
	for (size_t i = 0; i < nst; i++)
		M[i] = ((float *)c->host[5])[i];
	*worst = 0;
	for (int step = 0; step < 2; step++) {
		if (step == 1) {
			fill(c, 2, r, 1.0);
			cr_assert_eq(vt->buffer_write(ctx, c->buf[2], 0, c->host[2], c->bytes[2]), ALICE_OK);
		}
		cr_assert_eq(vt->graph_compute(ctx, &g), ALICE_OK, "%s", vt->last_error(ctx));
		gdn_ref(c, M, out);
		struct nmse e = {0}, es = {0};
		readback(vt, ctx, c, 0, got);
		for (int64_t i = 0; i < T * Hv * S; i++)
			acc(&e, ((float *)got)[i], out[i]);
		readback(vt, ctx, c, 5, got);
		for (size_t i = 0; i < nst; i++)
			acc(&es, ((float *)got)[i], M[i]);
		*worst = fmax(*worst, fmax(nmse_of(&e), nmse_of(&es)));
	}
	free(M);
	free(out);
	free(got);
	return true;
}

/* ---- the tests ---- */

struct be_param {
	char name[ALICE_BACKEND_NAME_MAX];
};

static size_t list_backends(struct be_param *params, size_t max)
{
	size_t np = 0;
	struct alice_backend_listing *list = NULL;
	size_t n = 0;
	if (alice_backend_list(NULL, &list, &n, NULL) == ALICE_OK)
		for (size_t i = 0; i < n && np < max; i++)
			if (!list[i].shadowed)
				snprintf(params[np++].name, sizeof(params[0].name), "%s", list[i].name);
	alice_backend_list_free(list);
	return np;
}

ParameterizedTestParameters(ops_ssm, backend)
{
	static struct be_param params[32];
	size_t np = list_backends(params, 32);
	return cr_make_param_array(struct be_param, params, np);
}

ParameterizedTestParameters(ops_ssm, rejects_bad_nodes)
{
	static struct be_param params[32];
	size_t np = list_backends(params, 32);
	return cr_make_param_array(struct be_param, params, np);
}

static void open_be(const char *name, struct alice_backend **be, struct alice_backend_ctx **ctx)
{
	struct alice_error err = {{0}};
	enum alice_status st = alice_backend_open(name, NULL, be, &err);
	if (st == ALICE_ERR_UNSUPPORTED && strstr(err.msg, "cannot run here"))
		cr_skip_test("%s: skipped: %s", name, err.msg);
	cr_assert_eq(st, ALICE_OK, "open %s: %s", name, err.msg);
	cr_assert_eq(alice_backend_init(*be, NULL, ctx, &err), ALICE_OK, "%s", err.msg);
}

ParameterizedTest(struct be_param *p, ops_ssm, backend, .timeout = 300)
{
	struct alice_backend *be = NULL;
	struct alice_backend_ctx *ctx = NULL;
	open_be(p->name, &be, &ctx);
	const struct alice_backend_vtable *vt = be->vt;
	bool must = strcmp(p->name, "cpu") == 0 || strcmp(p->name, "cuda") == 0;
	struct rng r = {0x2545f4914f6cdd1dull};
	int n_unsup = 0, n_run = 0;

	static const int32_t seq9[9] = {2, 2, 0, 2, 1, 1, 0, 2, 0};
	static const int32_t seq1[5] = {0, 0, 0, 0, 0};
	struct {
		const char *name;
		int64_t C, T, K, n_seq;
		const int32_t *seq;
	} convs[] = {
		{"C37 T9 K4, 3 sequences interleaved", 37, 9, 4, 3, seq9},
		{"C512 T5 K4, 1 sequence", 512, 5, 4, 1, seq1},
		{"C8 T9 K2, 3 sequences", 8, 9, 2, 3, seq9},
		{"C40 T9 K5, 3 sequences", 40, 9, 5, 3, seq9},
	};
	for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++) {
		struct opcase c;
		double worst;
		conv_case(&c, &r, convs[i].C, convs[i].T, convs[i].K, convs[i].n_seq, convs[i].seq);
		bool ran = run_conv(vt, ctx, &r, &c, &worst);
		free_case(vt, ctx, &c);
		if (!ran) {
			n_unsup++;
			fprintf(stderr, "[%s] SSM_CONV %s: unsupported\n", p->name, convs[i].name);
			continue;
		}
		n_run++;
		fprintf(stderr, "[%s] SSM_CONV %s: NMSE %.3g\n", p->name, convs[i].name, worst);
		cr_expect(worst <= BOUND, "[%s] SSM_CONV %s: NMSE %g > %g", p->name, convs[i].name, worst, BOUND);
	}

	struct {
		const char *name;
		int64_t S, Hk, Hv, T, n_seq;
		const int32_t *seq;
	} gdns[] = {
		{"S16 Hk2 Hv4 T9, 3 sequences interleaved", 16, 2, 4, 9, 3, seq9},
		{"S64 Hk1 Hv1 T5, 1 sequence", 64, 1, 1, 5, 1, seq1},
		{"S13 Hk1 Hv3 T9, 3 sequences", 13, 1, 3, 9, 3, seq9},
		{"S32 Hk2 Hv2 T5", 32, 2, 2, 5, 1, seq1},
		{"S128 Hk2 Hv4 T9, 3 sequences", 128, 2, 4, 9, 3, seq9},
	};
	for (size_t i = 0; i < sizeof(gdns) / sizeof(gdns[0]); i++) {
		struct opcase c;
		double worst;
		gdn_case(&c, &r, gdns[i].S, gdns[i].Hk, gdns[i].Hv, gdns[i].T, gdns[i].n_seq, gdns[i].seq);
		bool ran = run_gdn(vt, ctx, &r, &c, &worst);
		free_case(vt, ctx, &c);
		if (!ran) {
			n_unsup++;
			fprintf(stderr, "[%s] GATED_DELTA_NET %s: unsupported\n", p->name, gdns[i].name);
			continue;
		}
		n_run++;
		fprintf(stderr, "[%s] GATED_DELTA_NET %s: NMSE %.3g\n", p->name, gdns[i].name, worst);
		cr_expect(worst <= BOUND, "[%s] GATED_DELTA_NET %s: NMSE %g > %g", p->name, gdns[i].name, worst, BOUND);
	}
	if (must)
		cr_expect_eq(n_unsup, 0, "[%s] must support the recurrent ops", p->name);
	vt->free(ctx);
	alice_backend_close(be);
	(void)n_run;
}

/* Hostile nodes: a sequence id past the state, a wrong state shape, too few
 * sources: an error with a message, no crash, the context still usable. */
ParameterizedTest(struct be_param *p, ops_ssm, rejects_bad_nodes, .timeout = 120)
{
	struct alice_backend *be = NULL;
	struct alice_backend_ctx *ctx = NULL;
	open_be(p->name, &be, &ctx);
	const struct alice_backend_vtable *vt = be->vt;
	struct rng r = {77};
	static const int32_t seq[5] = {0, 1, 0, 1, 1};
	struct opcase c;
	double worst;
	gdn_case(&c, &r, 8, 1, 2, 5, 2, seq);
	if (!run_gdn(vt, ctx, &r, &c, &worst)) {
		free_case(vt, ctx, &c);
		vt->free(ctx);
		alice_backend_close(be);
		cr_skip_test("[%s] GATED_DELTA_NET unsupported", p->name);
	}
	struct alice_graph g = graph_of(&c);
	*ip(&c, 6, 3) = 2; /* n_seq is 2 */
	cr_assert_eq(vt->buffer_write(ctx, c.buf[6], 0, c.host[6], c.bytes[6]), ALICE_OK);
	cr_expect_neq(vt->graph_compute(ctx, &g), ALICE_OK, "[%s] sequence id 2 of 2 accepted", p->name);
	fprintf(stderr, "[%s] bad seq: %s\n", p->name, vt->last_error(ctx));
	*ip(&c, 6, 3) = -1;
	cr_assert_eq(vt->buffer_write(ctx, c.buf[6], 0, c.host[6], c.bytes[6]), ALICE_OK);
	cr_expect_neq(vt->graph_compute(ctx, &g), ALICE_OK, "[%s] sequence id -1 accepted", p->name);
	*ip(&c, 6, 3) = 1;
	cr_assert_eq(vt->buffer_write(ctx, c.buf[6], 0, c.host[6], c.bytes[6]), ALICE_OK);
	c.t[5].ne[1] = 7; /* state [8, 7, ...] */
	cr_expect_neq(vt->graph_compute(ctx, &g), ALICE_OK, "[%s] wrong state shape accepted", p->name);
	fprintf(stderr, "[%s] bad state: %s\n", p->name, vt->last_error(ctx));
	c.t[5].ne[1] = 8;
	c.node.src[5] = -1; /* no seq */
	cr_expect(!vt->supports_op(ctx, &g, &c.node) || vt->graph_compute(ctx, &g) != ALICE_OK,
		  "[%s] node without seq accepted", p->name);
	c.node.src[5] = 6;
	cr_expect_eq(vt->graph_compute(ctx, &g), ALICE_OK, "[%s] context unusable after errors: %s", p->name,
		     vt->last_error(ctx));
	free_case(vt, ctx, &c);

	static const int32_t seq3[3] = {0, 0, 5};
	conv_case(&c, &r, 4, 3, 4, 1, seq3);
	upload(vt, ctx, &c);
	g = graph_of(&c);
	cr_expect_neq(vt->graph_compute(ctx, &g), ALICE_OK, "[%s] SSM_CONV sequence id 5 of 1 accepted", p->name);
	free_case(vt, ctx, &c);
	vt->free(ctx);
	alice_backend_close(be);
}
