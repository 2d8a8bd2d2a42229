/* ops_norm.c — RMS_NORM (optionally fused with the weight multiply),
 * L2_NORM and NORM (LayerNorm, with weight and bias) over dim 0, rows
 * split across threads. Sums are in double, as
 * llama.cpp's CPU backend does, so the scale rounds the same way. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

static inline float ld_f(const uint8_t *p)
{
	float v;
	memcpy(&v, p, 4);
	return v;
}

struct norm_job {
	const struct alice_tensor *x, *w, *b, *d;
	float eps;
	bool l2, layer;
};

/* Row r of t broadcast over x's rows (RMS_NORM's weight rule). */
static const uint8_t *bcast_row(const struct alice_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
	return tensor_data(t) + (i1 % t->ne[1]) * t->nb[1] + (i2 % t->ne[2]) * t->nb[2] + (i3 % t->ne[3]) * t->nb[3];
}

/* The float sum of w squares (w 16 or 8) as ggml_vec_cvar_f32 folds one
 * SIMD block: _mm512_reduce_add_ps (halves: 8, then 4, then (0+2)+(1+3)),
 * or its AVX2 fold (4, then (0+2)+(1+3)). */
static float block_sum(const float *v, int w)
{
	float a[8], b[4];
	int h = w / 2;
	for (int i = 0; i < h; i++)
		a[i] = v[i + h] + v[i];
	if (w == 8)
		return (a[0] + a[2]) + (a[1] + a[3]);
	for (int i = 0; i < 4; i++)
		b[i] = a[i + 4] + a[i];
	return (b[0] + b[2]) + (b[1] + b[3]);
}

/* LayerNorm of one row as ggml_norm on llama.cpp's CPU build of the same
 * ISA: the sum in double rounded to float, mean = sum / n in float; the
 * squares of (x - mean) summed per SIMD block (block_sum), the blocks and
 * the tail in double; scale = 1 / sqrtf(float(var / n) + eps). */
static void layer_norm_row(const struct norm_job *j, const uint8_t *xr, uint8_t *dr, const uint8_t *wr,
			   const uint8_t *br)
{
	const struct alice_tensor *x = j->x, *d = j->d;
	int64_t ne0 = x->ne[0];
	double sum = 0.0;
	for (int64_t i = 0; i < ne0; i++)
		sum += (double)ld_f(xr + i * x->nb[0]);
	float mean = (float)sum / (float)ne0;
	int w = !strncmp(cpu_k->isa, "avx512", 6) ? 16 : !strcmp(cpu_k->isa, "avx2") ? 8 : 1;
	double var = 0.0;
	int64_t i = 0;
	float sq[16];
	for (; w > 1 && i + w <= ne0; i += w) {
		for (int l = 0; l < w; l++) {
			float c = ld_f(xr + (i + l) * x->nb[0]) - mean;
			sq[l] = c * c;
		}
		var += (double)block_sum(sq, w);
	}
	for (; i < ne0; i++) {
		float c = ld_f(xr + i * x->nb[0]) - mean;
		var += (double)(c * c);
	}
	float scale = 1.0f / sqrtf((float)(var / (double)ne0) + j->eps);
	for (int64_t i = 0; i < ne0; i++) {
		float v = (ld_f(xr + i * x->nb[0]) - mean) * scale;
		if (wr)
			v *= ld_f(wr + i * j->w->nb[0]);
		if (br)
			v += ld_f(br + i * j->b->nb[0]);
		memcpy(dr + i * d->nb[0], &v, 4);
	}
}

/* ggml's sum of squares: one double chain per row, in element order. Dense
 * rows go 4 at a time, their chains interleaved (each an add's latency per
 * element alone). */
static void sumsq_rows(const struct norm_job *j, int64_t r0, int nr, int nth, double *sum)
{
	const struct alice_tensor *x = j->x;
	const uint8_t *xr[4];
	for (int k = 0; k < nr; k++) {
		int64_t r = r0 + (int64_t)k * nth;
		int64_t i1 = r % x->ne[1], i2 = (r / x->ne[1]) % x->ne[2], i3 = r / (x->ne[1] * x->ne[2]);
		xr[k] = tensor_data(x) + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
		sum[k] = 0.0;
	}
	if (nr == 4 && x->nb[0] == 4) {
		const float *a = (const float *)xr[0], *b = (const float *)xr[1], *c = (const float *)xr[2],
			    *e = (const float *)xr[3];
		double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
		for (int64_t i = 0; i < x->ne[0]; i++) {
			s0 += (double)(a[i] * a[i]);
			s1 += (double)(b[i] * b[i]);
			s2 += (double)(c[i] * c[i]);
			s3 += (double)(e[i] * e[i]);
		}
		sum[0] = s0, sum[1] = s1, sum[2] = s2, sum[3] = s3;
		return;
	}
	for (int k = 0; k < nr; k++)
		for (int64_t i = 0; i < x->ne[0]; i++) {
			float v = ld_f(xr[k] + i * x->nb[0]);
			sum[k] += (double)(v * v);
		}
}

static void norm_run(void *arg, int ith, int nth)
{
	struct norm_job *j = arg;
	const struct alice_tensor *x = j->x, *w = j->w, *d = j->d;
	int64_t ne0 = x->ne[0], rows = x->ne[1] * x->ne[2] * x->ne[3];
	double sums[4];
	int have = 0;
	for (int64_t r = ith; r < rows; r += nth) {
		int64_t i1 = r % x->ne[1], i2 = (r / x->ne[1]) % x->ne[2], i3 = r / (x->ne[1] * x->ne[2]);
		const uint8_t *xr = tensor_data(x) + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
		uint8_t *dr = tensor_data(d) + i1 * d->nb[1] + i2 * d->nb[2] + i3 * d->nb[3];
		if (j->layer) {
			layer_norm_row(j, xr, dr, w ? bcast_row(w, i1, i2, i3) : NULL,
				       j->b ? bcast_row(j->b, i1, i2, i3) : NULL);
			continue;
		}
		if (have == 0) { /* this row and up to 3 of this thread's next */
			int64_t left = (rows - 1 - r) / nth + 1;
			have = left < 4 ? (int)left : 4;
			sumsq_rows(j, r, have, nth, sums);
		}
		double sum = sums[0];
		for (int k = 1; k < have; k++)
			sums[k - 1] = sums[k];
		have--;
		float scale;
		if (j->l2) {
			float nrm = sqrtf((float)sum); /* as ggml: the sum rounded to float first */
			scale = 1.0f / (nrm > j->eps ? nrm : j->eps);
		} else {
			scale = 1.0f / sqrtf((float)(sum / (double)ne0) + j->eps);
		}
		const uint8_t *wr = w ? bcast_row(w, i1, i2, i3) : NULL;
		for (int64_t i = 0; i < ne0; i++) {
			float v = ld_f(xr + i * x->nb[0]) * scale;
			if (wr)
				v *= ld_f(wr + i * w->nb[0]);
			memcpy(dr + i * d->nb[0], &v, 4);
		}
	}
}

static bool broadcasts(const struct alice_tensor *w, const struct alice_tensor *x)
{
	return w->ne[0] == x->ne[0] && x->ne[1] % w->ne[1] == 0 && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0;
}

static enum alice_status norm(const struct alice_op_args *a, bool l2, bool layer)
{
	const struct alice_tensor *x = a->src[0], *w = l2 ? NULL : a->src[1], *b = layer ? a->src[2] : NULL;
	const struct alice_tensor *d = a->dst;
	if (!tensor_same_shape(x, d))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	if ((w && !broadcasts(w, x)) || (b && !broadcasts(b, x)))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "weight/bias [%lld,...] does not broadcast over x [%lld,...]",
				(long long)(w && !broadcasts(w, x) ? w : b)->ne[0], (long long)x->ne[0]);
	if (!(a->node->fp[0] >= 0.0f))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "eps must be >= 0");
	struct norm_job j = {.x = x, .w = w, .b = b, .d = d, .eps = a->node->fp[0], .l2 = l2, .layer = layer};
	/* each element is an add's latency in its row's double chain: weighted
	 * 4x against the elementwise ops' threshold */
	cpu_pool_run_sized(a->ctx->pool, norm_run, &j, 4 * tensor_nelem(x));
	return ALICE_OK;
}

enum alice_status cpu_op_rms_norm(const struct alice_op_args *a)
{
	return norm(a, false, false);
}

enum alice_status cpu_op_l2_norm(const struct alice_op_args *a)
{
	return norm(a, true, false);
}

enum alice_status cpu_op_layer_norm(const struct alice_op_args *a)
{
	return norm(a, false, true);
}
