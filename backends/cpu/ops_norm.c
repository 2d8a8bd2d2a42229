/* ops_norm.c — RMS_NORM (optionally fused with the weight multiply) and
 * L2_NORM over dim 0, rows split across threads. Sums are in double, as
 * llama.cpp's CPU backend does, so the scale rounds the same way. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

struct norm_job {
	const struct alice_tensor *x, *w, *d;
	float eps;
	bool l2;
};

static inline float ld_f(const uint8_t *p)
{
	float v;
	memcpy(&v, p, 4);
	return v;
}

static void norm_run(void *arg, int ith, int nth)
{
	struct norm_job *j = arg;
	const struct alice_tensor *x = j->x, *w = j->w, *d = j->d;
	int64_t ne0 = x->ne[0], rows = x->ne[1] * x->ne[2] * x->ne[3];
	for (int64_t r = ith; r < rows; r += nth) {
		int64_t i1 = r % x->ne[1], i2 = (r / x->ne[1]) % x->ne[2], i3 = r / (x->ne[1] * x->ne[2]);
		const uint8_t *xr = tensor_data(x) + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
		uint8_t *dr = tensor_data(d) + i1 * d->nb[1] + i2 * d->nb[2] + i3 * d->nb[3];
		double sum = 0.0;
		for (int64_t i = 0; i < ne0; i++) {
			float v = ld_f(xr + i * x->nb[0]);
			sum += (double)(v * v);
		}
		float scale;
		if (j->l2) {
			float nrm = sqrtf((float)sum); /* as ggml: the sum rounded to float first */
			scale = 1.0f / (nrm > j->eps ? nrm : j->eps);
		} else {
			scale = 1.0f / sqrtf((float)(sum / (double)ne0) + j->eps);
		}
		const uint8_t *wr = NULL;
		if (w)
			wr = tensor_data(w) + (i1 % w->ne[1]) * w->nb[1] + (i2 % w->ne[2]) * w->nb[2] +
			     (i3 % w->ne[3]) * w->nb[3];
		for (int64_t i = 0; i < ne0; i++) {
			float v = ld_f(xr + i * x->nb[0]) * scale;
			if (wr)
				v *= ld_f(wr + i * w->nb[0]);
			memcpy(dr + i * d->nb[0], &v, 4);
		}
	}
}

static enum alice_status norm(const struct alice_op_args *a, bool l2)
{
	const struct alice_tensor *x = a->src[0], *w = l2 ? NULL : a->src[1], *d = a->dst;
	if (!tensor_same_shape(x, d))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	if (w && (w->ne[0] != x->ne[0] || x->ne[1] % w->ne[1] || x->ne[2] % w->ne[2] ||
		  x->ne[3] % w->ne[3]))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "weight [%lld,...] does not broadcast over x [%lld,...]",
				(long long)w->ne[0], (long long)x->ne[0]);
	if (!(a->node->fp[0] >= 0.0f))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "eps must be >= 0");
	struct norm_job j = {.x = x, .w = w, .d = d, .eps = a->node->fp[0], .l2 = l2};
	cpu_pool_run_sized(a->ctx->pool, norm_run, &j, tensor_nelem(x));
	return ALICE_OK;
}

enum alice_status cpu_op_rms_norm(const struct alice_op_args *a)
{
	return norm(a, false);
}

enum alice_status cpu_op_l2_norm(const struct alice_op_args *a)
{
	return norm(a, true);
}
