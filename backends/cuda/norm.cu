/* norm.cu — RMS_NORM (optionally times a weight) and L2_NORM over dim 0.
 * One block per row; sums of squares in F32 with a block reduction. */
#include "common.cuh"
#include "quantx.cuh"

#define NORM_THREADS 256

/* The norm weight does not depend on the kernel before: bring it to L2
 * while that one finishes (one 128-byte line per thread). */
__device__ static inline void prefetch_w(const uint8_t *w, int64_t wnb0, int64_t n)
{
	if (!w || blockIdx.x != 0)
		return;
	for (int64_t off = (int64_t)threadIdx.x * 128; off < n * wnb0; off += (int64_t)NORM_THREADS * 128)
		asm volatile("prefetch.global.L2 [%0];" ::"l"(w + off));
}

template <bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
k_norm(uint8_t *__restrict__ d, struct cu_view dv, const uint8_t *__restrict__ x, struct cu_view xv,
       const uint8_t *__restrict__ w, int64_t wnb0, float eps)
{
	prefetch_w(w, wnb0, xv.ne[0]);
	pdl_wait();
	pdl_trigger();
	int64_t r = blockIdx.x;
	int64_t i1 = r % xv.ne[1], i2 = (r / xv.ne[1]) % xv.ne[2], i3 = r / (xv.ne[1] * xv.ne[2]);
	const uint8_t *xr = x + i1 * xv.nb[1] + i2 * xv.nb[2] + i3 * xv.nb[3];
	uint8_t *dr = d + i1 * dv.nb[1] + i2 * dv.nb[2] + i3 * dv.nb[3];
	int64_t n = xv.ne[0];
	float s = 0.f;
	for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
		float v = *(const float *)(xr + i * xv.nb[0]);
		s += v * v;
	}
	__shared__ float sh[NORM_THREADS / 32];
	s = warp_sum(s);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = s;
	__syncthreads();
	float tot = 0.f;
#pragma unroll
	for (int i = 0; i < NORM_THREADS / 32; i++)
		tot += sh[i];
	float scale = RMS ? 1.f / sqrtf(tot / (float)n + eps) : 1.f / fmaxf(sqrtf(tot), eps);
	for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
		float v = *(const float *)(xr + i * xv.nb[0]) * scale;
		if (w)
			v *= *(const float *)(w + i * wnb0);
		*(float *)(dr + i * dv.nb[0]) = v;
	}
}

static enum alice_status launch_norm(const struct cu_args *a, bool rms)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *d = a->dst, *x = a->src[0], *w = rms ? a->src[1] : NULL;
	for (int i = 0; i < 4; i++)
		if (d->ne[i] != x->ne[i])
			return cu_fail(ctx, ALICE_ERR_INVALID, "dst and src0 shapes differ");
	if (w && (w->ne[0] != x->ne[0] || tnelem(w) != w->ne[0]))
		return cu_fail(ctx, ALICE_ERR_INVALID, "RMS_NORM weight must be [%lld]", (long long)x->ne[0]);
	int64_t rows = x->ne[1] * x->ne[2] * x->ne[3];
	if (rows > 0x7fffffff)
		return cu_fail(ctx, ALICE_ERR_INVALID, "too many rows");
	const uint8_t *wp = w ? tdata(w) : NULL;
	if (rms)
		cu_launch(k_norm<true>, (unsigned)rows, NORM_THREADS, ctx->stream, tdata(d), cu_view_of(d),
			  (const uint8_t *)tdata(x), cu_view_of(x), wp, w ? w->nb[0] : 0, a->node->fp[0]);
	else
		cu_launch(k_norm<false>, (unsigned)rows, NORM_THREADS, ctx->stream, tdata(d), cu_view_of(d),
			  (const uint8_t *)tdata(x), cu_view_of(x), wp, (int64_t)0, a->node->fp[0]);
	CUDA_LAUNCH_CHECK(ctx, "norm");
	return ALICE_OK;
}

enum alice_status cu_op_rms_norm(const struct cu_args *a)
{
	return launch_norm(a, true);
}

enum alice_status cu_op_l2_norm(const struct cu_args *a)
{
	return launch_norm(a, false);
}

/* ADD followed by an RMS_NORM of its result (the residual stream: x + f(x)
 * and the next sublayer's norm), in one pass: the sum is written out and
 * normalized from the same registers-then-cache. Same float operations as
 * the two ops apart. */
template <int QK>
__global__ void __launch_bounds__(NORM_THREADS)
k_add_rms(uint8_t *__restrict__ s, struct cu_view sv, const uint8_t *__restrict__ a, struct cu_view av,
	  const uint8_t *__restrict__ b, struct cu_view bv, uint8_t *__restrict__ d, struct cu_view dv,
	  const uint8_t *__restrict__ w, int64_t wnb0, float eps, int8_t *__restrict__ q, float *__restrict__ qd)
{
	prefetch_w(w, wnb0, sv.ne[0]);
	pdl_wait();
	pdl_trigger();
	int64_t r = blockIdx.x;
	int64_t i1 = r % sv.ne[1], i2 = (r / sv.ne[1]) % sv.ne[2], i3 = r / (sv.ne[1] * sv.ne[2]);
	const uint8_t *ar = a + i1 * av.nb[1] + i2 * av.nb[2] + i3 * av.nb[3];
	const uint8_t *br = b + i1 * bv.nb[1] + i2 * bv.nb[2] + i3 * bv.nb[3];
	uint8_t *sr = s + i1 * sv.nb[1] + i2 * sv.nb[2] + i3 * sv.nb[3];
	uint8_t *dr = d + i1 * dv.nb[1] + i2 * dv.nb[2] + i3 * dv.nb[3];
	int64_t n = sv.ne[0];
	float ss = 0.f;
	for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
		float v = *(const float *)(ar + i * av.nb[0]) + *(const float *)(br + i * bv.nb[0]);
		*(float *)(sr + i * sv.nb[0]) = v;
		ss += v * v;
	}
	__shared__ float sh[NORM_THREADS / 32];
	ss = warp_sum(ss);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = ss;
	__syncthreads();
	float tot = 0.f;
#pragma unroll
	for (int i = 0; i < NORM_THREADS / 32; i++)
		tot += sh[i];
	float scale = 1.f / sqrtf(tot / (float)n + eps);
	for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
		/* each thread re-reads only what it wrote itself */
		float v = *(const float *)(sr + i * sv.nb[0]) * scale;
		if (w)
			v *= *(const float *)(w + i * wnb0);
		*(float *)(dr + i * dv.nb[0]) = v;
	}
	if constexpr (QK > 0) {
		/* the row quantized for the mat-vec that reads it (mmvq.cu
		 * layout: column r at q + r*n, scales at qd + r*n/32) */
		__syncthreads();
		const int lane = threadIdx.x & 31;
		for (int64_t blk = threadIdx.x >> 5; blk < n / QK; blk += NORM_THREADS / 32)
			quant_warp<QK>(dr, dv.nb[0], blk * QK, q + r * n, qd + r * (n / 32), lane);
	}
}

static uint64_t view_span(const struct alice_tensor *t)
{
	uint64_t e = (uint64_t)t->ne[0] * 4;
	for (int d = 1; d < 4; d++)
		e += (uint64_t)(t->ne[d] - 1) * (uint64_t)t->nb[d];
	return e;
}

static bool v_overlap(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->buf == b->buf && a->offset < b->offset + view_span(b) && b->offset < a->offset + view_span(a);
}

static bool v_same(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->buf == b->buf && a->offset == b->offset && !memcmp(a->ne, b->ne, sizeof(a->ne)) &&
	       !memcmp(a->nb, b->nb, sizeof(a->nb));
}

bool cu_add_rms_alias_ok(const struct cu_args *add, const struct cu_args *norm)
{
	const struct alice_tensor *outs[2] = { add->dst, norm->dst };
	const struct alice_tensor *ins[2] = { add->src[0], add->src[1] };
	const struct alice_tensor *w = norm->src[1];
	for (int o = 0; o < 2; o++) {
		for (int i = 0; i < 2; i++)
			if (v_overlap(outs[o], ins[i]) && !v_same(outs[o], ins[i]))
				return false;
		if (w && v_overlap(outs[o], w))
			return false;
	}
	return !v_overlap(outs[0], outs[1]) || v_same(outs[0], outs[1]);
}

bool cu_add_rms_fusable(const struct cu_args *add, const struct cu_args *norm)
{
	const struct alice_tensor *s = add->dst, *a = add->src[0], *b = add->src[1], *x = norm->src[0];
	if (add->node->op != ALICE_OP_ADD || norm->node->op != ALICE_OP_RMS_NORM ||
	    norm->node->src[0] != add->node->dst)
		return false;
	for (int i = 0; i < 4; i++)
		if (a->ne[i] != s->ne[i] || b->ne[i] != s->ne[i] || x->ne[i] != s->ne[i] || norm->dst->ne[i] != s->ne[i])
			return false;
	const struct alice_tensor *w = norm->src[1];
	if (w && (w->ne[0] != s->ne[0] || tnelem(w) != w->ne[0]))
		return false;
	return s->ne[1] * s->ne[2] * s->ne[3] <= 0x7fffffff;
}

enum alice_status cu_add_rms_norm(const struct cu_args *add, const struct cu_args *norm, int qk)
{
	struct alice_backend_ctx *ctx = add->ctx;
	const struct alice_tensor *s = add->dst, *a = add->src[0], *b = add->src[1], *d = norm->dst,
				  *w = norm->src[1];
	int64_t rows = s->ne[1] * s->ne[2] * s->ne[3], K = s->ne[0];
	const uint8_t *wp = w ? tdata(w) : NULL;
	/* quantized output only where the mat-vec's staging holds it */
	if ((qk != 32 && qk != 256) || K % qk != 0 || s->ne[2] * s->ne[3] != 1 || rows > MMV_MAX_M ||
	    ctx->scratch_size < ctx->xq_off + cu_mmvq_scratch(ALICE_TYPE_Q8_0, K, rows))
		qk = 0;
	int8_t *q = qk ? cu_xq_q(ctx) : NULL;
	float *qd = qk ? cu_xq_d(ctx, K, rows) : NULL;
	auto l = [&](auto kern) {
		cu_launch(kern, (unsigned)rows, NORM_THREADS, ctx->stream, tdata(s), cu_view_of(s), (const uint8_t *)tdata(a),
			  cu_view_of(a), (const uint8_t *)tdata(b), cu_view_of(b), tdata(d), cu_view_of(d), wp,
			  w ? w->nb[0] : 0, norm->node->fp[0], q, qd);
	};
	if (qk == 256)
		l(k_add_rms<256>);
	else if (qk == 32)
		l(k_add_rms<32>);
	else
		l(k_add_rms<0>);
	CUDA_LAUNCH_CHECK(ctx, "add+rms_norm");
	if (qk)
		cu_xq_set(ctx, tdata(d), d->nb[0], d->nb[1], K, rows, qk, norm->node->dst);
	return ALICE_OK;
}
