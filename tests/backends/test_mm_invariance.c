/* test_mm_invariance.c — a batched decode MUL_MAT (src2 + ip[0] = 1: every
 * column is its own sequence's one row) gives each column bit for bit what
 * that column gives alone (M = 1), on every backend found, for the weight
 * types with decode kernels of their own and for the column counts where
 * the backends switch kernels (CUDA: mat-vec up to 8 columns per pass, rows
 * per warp, tensor cores from 16). Shapes cover every split of a row over
 * warps (K = 2048 .. 8192, N from 40 to 2100). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static float rng_gauss(uint64_t *s)
{
	/* sum of 4 uniforms: close enough to normal for weights/activations */
	double a = 0;
	for (int i = 0; i < 4; i++)
		a += (double)(rng_next(s) >> 11) / 9007199254740992.0;
	return (float)((a - 2.0) * 1.7);
}

struct mm_run {
	const struct alice_backend_vtable *vt;
	struct alice_backend_ctx *ctx;
};

static void set_tensor(struct alice_tensor *t, uint32_t type, int64_t ne0, int64_t ne1, struct alice_buffer *buf,
		       uint64_t off)
{
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = t->ne[3] = 1;
	t->nb[0] = alice_type_info(type)->type_size;
	t->nb[1] = (int64_t)alice_row_size(type, ne0);
	t->nb[2] = t->nb[3] = t->nb[1] * ne1;
	t->buf = buf;
	t->offset = off;
}

/* dst [N, M] = w [K, N] . x [K, M] as one batched decode step */
static void mul_mat(struct mm_run *r, uint32_t type, const uint8_t *w, int64_t K, int64_t N, const float *x,
		    int64_t M, float *dst)
{
	size_t wb = alice_row_size(type, K) * (size_t)N, xb = (size_t)(K * M) * 4, db = (size_t)(N * M) * 4;
	size_t ib = (size_t)(2 * M) * 4;
	size_t o_w = 0, o_x = (wb + 255) & ~(size_t)255, o_d = o_x + ((xb + 255) & ~(size_t)255);
	size_t o_i = o_d + ((db + 255) & ~(size_t)255), total = o_i + ib;
	struct alice_buffer *buf = NULL;
	cr_assert_eq(r->vt->buffer_alloc(r->ctx, total, ALICE_BUFFER_COMPUTE, &buf), ALICE_OK, "%s",
		     r->vt->last_error(r->ctx));
	int32_t *ids = malloc(ib);
	for (int64_t m = 0; m < M; m++) {
		ids[2 * m] = 1; /* one row in its sequence */
		ids[2 * m + 1] = 0;
	}
	cr_assert_eq(r->vt->buffer_write(r->ctx, buf, o_w, w, wb), ALICE_OK);
	cr_assert_eq(r->vt->buffer_write(r->ctx, buf, o_x, x, xb), ALICE_OK);
	cr_assert_eq(r->vt->buffer_write(r->ctx, buf, o_i, ids, ib), ALICE_OK);
	struct alice_tensor t[4];
	set_tensor(&t[0], ALICE_TYPE_F32, N, M, buf, o_d);
	set_tensor(&t[1], type, K, N, buf, o_w);
	set_tensor(&t[2], ALICE_TYPE_F32, K, M, buf, o_x);
	set_tensor(&t[3], ALICE_TYPE_I32, 2, M, buf, o_i);
	struct alice_node nd;
	memset(&nd, 0, sizeof(nd));
	nd.op = ALICE_OP_MUL_MAT;
	nd.dst = 0;
	nd.src[0] = 1;
	nd.src[1] = 2;
	nd.src[2] = 3;
	for (int i = 3; i < ALICE_MAX_SRC; i++)
		nd.src[i] = -1;
	nd.ip[0] = 1;
	struct alice_graph g = {.n_tensors = 4, .n_nodes = 1, .tensors = t, .nodes = &nd};
	cr_assert(r->vt->supports_op(r->ctx, &g, &nd), "MUL_MAT %s not supported", alice_type_name(type));
	cr_assert_eq(r->vt->graph_compute(r->ctx, &g), ALICE_OK, "%s", r->vt->last_error(r->ctx));
	cr_assert_eq(r->vt->buffer_read(r->ctx, buf, o_d, dst, db), ALICE_OK);
	r->vt->buffer_free(r->ctx, buf);
	free(ids);
}

struct inv_param {
	char backend[ALICE_BACKEND_NAME_MAX];
};

ParameterizedTestParameters(mm_invariance, columns_equal_alone)
{
	static struct inv_param params[16];
	static size_t np;
	np = 0;
	struct alice_backend_listing *list = NULL;
	size_t n = 0;
	if (alice_backend_list(NULL, &list, &n, NULL) == ALICE_OK)
		for (size_t i = 0; i < n && np < 16; i++)
			if (!list[i].shadowed)
				snprintf(params[np++].backend, sizeof(params[0].backend), "%s", list[i].name);
	alice_backend_list_free(list);
	return cr_make_param_array(struct inv_param, params, np);
}

ParameterizedTest(struct inv_param *p, mm_invariance, columns_equal_alone, .timeout = 900)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_backend_open(p->backend, NULL, &be, &err);
	if (st == ALICE_ERR_UNSUPPORTED && strstr(err.msg, "cannot run here"))
		cr_skip_test("%s: skipped: %s", p->backend, err.msg);
	cr_assert_eq(st, ALICE_OK, "open %s: %s", p->backend, err.msg);
	struct mm_run r = {be->vt, NULL};
	cr_assert_eq(alice_backend_init(be, NULL, &r.ctx, &err), ALICE_OK, "%s", err.msg);

	static const uint32_t types[] = {ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K, ALICE_TYPE_Q8_0, ALICE_TYPE_F16,
					 ALICE_TYPE_Q4_0, ALICE_TYPE_Q5_K};
	static const struct { int64_t K, N; } shapes[] = {{2048, 2100}, {4096, 96}, {8192, 40}, {2304, 64}};
	static const int64_t cols[] = {9, 16, 40, 72};
	uint64_t seed = 0x243f6a8885a308d3ull;
	int bad = 0, checked = 0;
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
		for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
			const uint32_t type = types[ti];
			const int64_t K = shapes[si].K, N = shapes[si].N, M = 72;
			size_t rs = alice_row_size(type, K);
			uint8_t *w = malloc(rs * (size_t)N);
			float *row = malloc(sizeof(float) * (size_t)K), *x = malloc(sizeof(float) * (size_t)(K * M));
			for (int64_t n = 0; n < N; n++) {
				for (int64_t k = 0; k < K; k++)
					row[k] = rng_gauss(&seed);
				if (type == ALICE_TYPE_F16)
					for (int64_t k = 0; k < K; k++) {
						uint16_t h = alice_fp32_to_fp16(row[k]);
						memcpy(w + n * (int64_t)rs + 2 * k, &h, 2);
					}
				else
					cr_assert(alice_quantize(type, row, w + n * (int64_t)rs, K));
			}
			for (int64_t i = 0; i < K * M; i++)
				x[i] = rng_gauss(&seed);
			float *alone = malloc(sizeof(float) * (size_t)(N * M)), *batch = malloc(sizeof(float) * (size_t)(N * M));
			for (int64_t m = 0; m < M; m++)
				mul_mat(&r, type, w, K, N, x + m * K, 1, alone + m * N);
			for (size_t ci = 0; ci < sizeof(cols) / sizeof(cols[0]); ci++) {
				const int64_t mc = cols[ci];
				mul_mat(&r, type, w, K, N, x, mc, batch);
				int64_t diff = 0;
				for (int64_t i = 0; i < N * mc; i++)
					diff += memcmp(&alone[i], &batch[i], 4) != 0;
				checked++;
				if (diff) {
					bad++;
					cr_log_error("[%s] %s K=%lld N=%lld: %lld of %lld outputs of a %lld-column step "
						     "differ from their column alone",
						     p->backend, alice_type_name(type), (long long)K, (long long)N,
						     (long long)diff, (long long)(N * mc), (long long)mc);
				}
			}
			free(w);
			free(row);
			free(x);
			free(alone);
			free(batch);
		}
	r.vt->free(r.ctx);
	alice_backend_close(be);
	cr_assert_eq(bad, 0, "[%s] %d of %d batched MUL_MATs differ from their columns alone", p->backend, bad,
		     checked);
}
