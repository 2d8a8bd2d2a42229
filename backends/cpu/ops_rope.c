/* ops_rope.c — rotary position embedding: normal (adjacent pairs), neox
 * (pairs i, i + n_dims/2) and IMROPE (interleaved sections t/h/w/e, neox
 * pairing). Angles follow llama.cpp's CPU recurrence (theta *= base^(-2/n)
 * in float per pair) so positions round the same way, and each rotated pair
 * rounds as its (FMA-contracted) build does: y0 = fma(x0, c, -(x1 s)),
 * y1 = fma(x0, s, x1 c); dims past n_dims are copied. Tokens are split
 * across threads; each builds its cos/sin cache. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

struct rope_job {
	const struct alice_tensor *x, *pos, *ff, *d;
	struct alice_backend_ctx *ctx;
	int n_dims, mode, sect[4];
	float base, fscale;
};

static inline float ld_f(const uint8_t *p)
{
	float v;
	memcpy(&v, p, 4);
	return v;
}

static inline int32_t ld_i(const struct alice_tensor *t, int64_t i)
{
	int32_t v;
	memcpy(&v, tensor_data(t) + i * t->nb[0], 4);
	return v;
}

static void rope_cache(const struct rope_job *j, int64_t tok, float *cs)
{
	int64_t nt = j->x->ne[2];
	float theta_scale = powf(j->base, -2.0f / (float)j->n_dims);
	int sect_dims = j->sect[0] + j->sect[1] + j->sect[2] + j->sect[3];
	float th[4];
	if (j->mode == ALICE_ROPE_IMROPE) {
		for (int s = 0; s < 4; s++)
			th[s] = (float)ld_i(j->pos, tok + s * nt);
	} else {
		th[0] = (float)ld_i(j->pos, tok);
	}
	for (int i = 0; i < j->n_dims / 2; i++) {
		float ff = j->ff ? ld_f(tensor_data(j->ff) + i * j->ff->nb[0]) : 1.0f;
		float theta = th[0];
		if (j->mode == ALICE_ROPE_IMROPE) {
			int sector = i % sect_dims;
			if (sector % 3 == 1 && sector < 3 * j->sect[1])
				theta = th[1];
			else if (sector % 3 == 2 && sector < 3 * j->sect[2])
				theta = th[2];
			else if (sector % 3 == 0 && sector < 3 * j->sect[0])
				theta = th[0];
			else
				theta = th[3];
		}
		float t = j->fscale * (theta / ff);
		cs[2 * i] = cosf(t);
		cs[2 * i + 1] = sinf(t);
		for (int s = 0; s < 4; s++)
			th[s] *= theta_scale;
	}
}

static inline __attribute__((always_inline)) void rope_rows(void *arg, int ith, int nth)
{
	struct rope_job *j = arg;
	const struct alice_tensor *x = j->x, *d = j->d;
	float *cs = (float *)j->ctx->tdata[ith];
	int half = j->n_dims / 2;
	bool neox = j->mode != ALICE_ROPE_NORMAL;
	int64_t n_rows = x->ne[2] * x->ne[3];
	for (int64_t r = ith; r < n_rows; r += nth) {
		int64_t tok = r % x->ne[2], i3 = r / x->ne[2];
		rope_cache(j, tok, cs);
		for (int64_t h = 0; h < x->ne[1]; h++) {
			const uint8_t *xr = tensor_data(x) + h * x->nb[1] + tok * x->nb[2] + i3 * x->nb[3];
			uint8_t *dr = tensor_data(d) + h * d->nb[1] + tok * d->nb[2] + i3 * d->nb[3];
			for (int i = 0; i < half; i++) {
				int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
				float x0 = ld_f(xr + a * x->nb[0]), x1 = ld_f(xr + b * x->nb[0]);
				float c = cs[2 * i], s = cs[2 * i + 1];
				float y0 = fmaf(x0, c, -(x1 * s)), y1 = fmaf(x0, s, x1 * c);
				memcpy(dr + a * d->nb[0], &y0, 4);
				memcpy(dr + b * d->nb[0], &y1, 4);
			}
			for (int64_t i = j->n_dims; i < x->ne[0]; i++) {
				float v = ld_f(xr + i * x->nb[0]);
				memcpy(dr + i * d->nb[0], &v, 4);
			}
		}
	}
}

/* built twice: fmaf must be an instruction, not a libm call */
static void rope_run_generic(void *arg, int ith, int nth)
{
	rope_rows(arg, ith, nth);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void rope_run_fma(void *arg, int ith, int nth)
{
	rope_rows(arg, ith, nth);
}
#endif

static cpu_task_fn rope_pick(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return rope_run_fma;
#endif
	return rope_run_generic;
}

enum alice_status cpu_op_rope(const struct alice_op_args *a)
{
	const struct alice_node *n = a->node;
	const struct alice_tensor *x = a->src[0], *pos = a->src[1], *ff = a->src[2], *d = a->dst;
	struct rope_job j = {.x = x, .pos = pos, .ff = ff, .d = d, .ctx = a->ctx, .n_dims = n->ip[0],
			     .mode = n->ip[1], .base = n->fp[0], .fscale = n->fp[1]};
	if (!tensor_same_shape(x, d))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	if (j.n_dims <= 0 || j.n_dims % 2 || j.n_dims > x->ne[0])
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "n_dims %d must be even and in 2..%lld", j.n_dims,
				(long long)x->ne[0]);
	int64_t npos = (j.mode == ALICE_ROPE_IMROPE ? 4 : 1) * x->ne[2];
	if (pos->ne[0] != npos || pos->ne[1] * pos->ne[2] * pos->ne[3] != 1)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "positions: %lld values, need %lld",
				(long long)tensor_nelem(pos), (long long)npos);
	if (ff && ff->ne[0] < j.n_dims / 2)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "frequency factors: %lld values, need %d",
				(long long)ff->ne[0], j.n_dims / 2);
	if (!(j.base > 0.0f) || !isfinite(j.fscale))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "freq_base %g / freq_scale %g", j.base, j.fscale);
	if (j.mode == ALICE_ROPE_IMROPE) {
		int sum = 0;
		for (int s = 0; s < 4; s++) {
			j.sect[s] = n->ip[2 + s];
			if (j.sect[s] < 0)
				return cpu_fail(a->ctx, ALICE_ERR_INVALID, "negative IMROPE section");
			sum += j.sect[s];
		}
		if (sum <= 0)
			return cpu_fail(a->ctx, ALICE_ERR_INVALID, "IMROPE sections sum to 0");
	}
	enum alice_status st = cpu_scratch(a->ctx, 0, (size_t)j.n_dims * 4 + 64);
	if (st != ALICE_OK)
		return st;
	cpu_pool_run_sized(a->ctx->pool, rope_pick(), &j, tensor_nelem(x) * 4);
	return ALICE_OK;
}
