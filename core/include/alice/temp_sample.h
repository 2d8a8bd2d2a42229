/* temp_sample.h — a draw from a whole logits row at temperature T, with no
 * truncation: the sampler's rule (sampling.c) in one place, so the
 * backends' SAMPLE_TEMP op (backend.h) gives the same token bit for bit.
 *
 * The row w (cleaned logits: no NaN, no +inf) with max mx: a token is live
 * when w >= floor = mx - 30 * max(T, 1) (the rest would add < 1e-13 of the
 * mass); its weight is exp_neg((w - mx) * (1 / T)) (vexp.h). Weights are
 * summed per block of 1024 tokens over 8 interleaved float partial sums
 * (token i of a block goes to sum (i - start) % 8, in order), the 8 added
 * in double; the row's total z adds the blocks in order (double). The draw
 * u = r * z (r uniform in [0, 1), double) walks the block sums, entering a
 * block when u < cum + its sum (or it is the last live block), then that
 * block's tokens, cum += weight: the first live token with u < cum. A row
 * with one live token takes it without a draw. */
#ifndef ALICE_TEMP_SAMPLE_H
#define ALICE_TEMP_SAMPLE_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "alice/vexp.h"

#define ALICE_TS_BLOCK 1024
#define ALICE_TS_NEGLIGIBLE 30.0f

/* A logit as every sampling step sees it: NaN -> -inf (excluded), +inf ->
 * FLT_MAX (keeps the weights finite); branch-free so copy loops vectorise.
 * The sampler and the backends' sampling ops (TOPK too) clean alike. */
static inline float alice_ts_clean(float x)
{
	x = x == x ? x : -INFINITY;
	return x < FLT_MAX ? x : FLT_MAX;
}

/* A token's logit bias and penalties (alice_sampler_adjustments, the
 * LOGIT_ADJUST op), on its cleaned logit x, in this order. */
#define ALICE_ADJ_BIAS 1u    /* x + bias */
#define ALICE_ADJ_BAN 2u     /* -inf (a bias <= -100) */
#define ALICE_ADJ_REPEAT 4u  /* x > 0 ? x / rp : x * rp */
#define ALICE_ADJ_PENALTY 8u /* x - pen (frequency * count + presence) */
static inline float alice_ts_adjust(float x, uint32_t flags, float bias, float rp, float pen)
{
	if (flags & ALICE_ADJ_BIAS)
		x = alice_ts_clean(x + bias);
	if (flags & ALICE_ADJ_BAN)
		x = -INFINITY;
	if (flags & ALICE_ADJ_REPEAT)
		x = alice_ts_clean(x > 0 ? x / rp : x * rp);
	if (flags & ALICE_ADJ_PENALTY)
		x = alice_ts_clean(x - pen);
	return x;
}

/* The live floor for max mx at temperature t. */
static inline float alice_ts_floor(float mx, float t)
{
	return mx - ALICE_TS_NEGLIGIBLE * (t > 1 ? t : 1);
}

/* Weigh w[0..n) in place (0 below floor); bs[ceil(n / 1024)] gets the block
 * sums. Returns z; *n_live the live tokens, *last the last block with one. */
static inline double alice_ts_weigh(float *w, int32_t n, float mx, float floor, float inv_t, double *bs,
				    int32_t *n_live, int32_t *last)
{
	const int32_t nblk = (n + ALICE_TS_BLOCK - 1) / ALICE_TS_BLOCK;
	double z = 0;
	*n_live = 0;
	*last = -1;
	for (int32_t b = 0; b < nblk; b++) {
		int32_t i0 = b * ALICE_TS_BLOCK, i1 = i0 + ALICE_TS_BLOCK < n ? i0 + ALICE_TS_BLOCK : n;
		float part[8] = {0};
		int32_t live = 0, i = i0;
		for (; i + 8 <= i1; i += 8)
			for (int k = 0; k < 8; k++) {
				float x = w[i + k];
				float v = alice_fsel(x >= floor, alice_exp_neg((x - mx) * inv_t), 0.0f);
				live += x >= floor;
				w[i + k] = v;
				part[k] += v;
			}
		for (; i < i1; i++) {
			float x = w[i];
			float v = alice_exp_neg((x - mx) * inv_t);
			v = x >= floor ? v : 0.0f;
			live += x >= floor;
			w[i] = v;
			part[(i - i0) & 7] += v;
		}
		double sum = 0;
		for (int k = 0; k < 8; k++)
			sum += part[k];
		bs[b] = sum;
		z += sum;
		*n_live += live;
		if (live)
			*last = b;
	}
	return z;
}

/* Logprobs' normaliser (sampling.h) over the row x (cleaned here) with max
 * mx of its cleaned values: the sum of exp_neg(x - mx) over the tokens
 * within 30 nats of mx, per block of 1024 tokens over 8 interleaved double
 * partial sums (token order), the 8 added in order, the blocks in order:
 * one order the backends' LOGSUMEXP op reproduces bit for bit. The
 * log-sum-exp is mx + log(sum). */
static inline double alice_ts_lse_sum(const float *x, int32_t n, float mx)
{
	const float floor = mx - ALICE_TS_NEGLIGIBLE;
	double z = 0;
	for (int32_t i0 = 0; i0 < n; i0 += ALICE_TS_BLOCK) {
		int32_t i1 = i0 + ALICE_TS_BLOCK < n ? i0 + ALICE_TS_BLOCK : n;
		double part[8] = {0};
		for (int32_t i = i0; i < i1; i++) {
			float v = alice_ts_clean(x[i]);
			if (v >= floor)
				part[(i - i0) & 7] += (double)alice_exp_neg(v - mx);
		}
		double sum = 0;
		for (int k = 0; k < 8; k++)
			sum += part[k];
		z += sum;
	}
	return z;
}

/* The one live token (n_live == 1). */
static inline int32_t alice_ts_single(const float *w, int32_t n)
{
	for (int32_t i = 0; i < n; i++)
		if (w[i] > 0)
			return i;
	return -1;
}

/* The token drawn by u (= r * z) from weights w and block sums bs. */
static inline int32_t alice_ts_draw(const float *w, int32_t n, const double *bs, int32_t last, double u)
{
	const int32_t nblk = (n + ALICE_TS_BLOCK - 1) / ALICE_TS_BLOCK;
	double cum = 0;
	for (int32_t b = 0; b < nblk; b++) {
		if (!(u < cum + bs[b]) && b != last) {
			cum += bs[b];
			continue;
		}
		int32_t i0 = b * ALICE_TS_BLOCK, i1 = i0 + ALICE_TS_BLOCK < n ? i0 + ALICE_TS_BLOCK : n, hit = -1;
		for (int32_t i = i0; i < i1; i++) {
			if (w[i] > 0)
				hit = i;
			cum += w[i];
			if (w[i] > 0 && u < cum)
				return i;
		}
		if (b == last)
			return hit; /* u landed in the rounding slack */
	}
	return -1;
}

#endif
