/* norm.cu — RMS_NORM (optionally times a weight) and L2_NORM over dim 0,
 * and ADD + RMS_NORM in one pass. One block per row; thread t owns values
 * 8t .. 8t+7 of every 2048 (the quantx.cuh layout, so a norm can emit its
 * output quantized from registers); sums of squares in F32, per thread in
 * that order, then across the block. Rows of up to NORM_REGS*2048 values
 * stay in registers between the two passes. */
#include <type_traits>

#include "common.cuh"
#include "quantx.cuh"

#define NORM_THREADS 256
#define NORM_CHUNK (NORM_THREADS * 8)
#define NORM_REGS 4

/* The norm weight does not depend on the kernel before: bring it to L2
 * while that one finishes (one 128-byte line per thread). */
__device__ static inline void prefetch_w(const uint8_t *w, int64_t wnb0, int64_t n)
{
	if (!w || blockIdx.x != 0)
		return;
	for (int64_t off = (int64_t)threadIdx.x * 128; off < n * wnb0; off += (int64_t)NORM_THREADS * 128)
		asm volatile("prefetch.global.L2 [%0];" ::"l"(w + off));
}

__device__ static inline float block_sum(float s)
{
	__shared__ float sh[NORM_THREADS / 32];
	s = warp_sum(s);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = s;
	__syncthreads();
	float tot = 0.f;
#pragma unroll
	for (int i = 0; i < NORM_THREADS / 32; i++)
		tot += sh[i];
	return tot;
}

/* vec bits: 1 rows dense and 16-byte aligned, 2 the weight too */
#define NORM_VEC_X 1
#define NORM_VEC_W 2

/* The second pass over a row: values times scale (times the weight) to dr,
 * and quantized (QK 32 / 256) to q/qd. R > 0: the values are in v; R == 0:
 * re-read from src (this thread's own values). */
template <int QK, int R>
__device__ static inline void norm_out(const float *v, const uint8_t *__restrict__ src, int64_t snb0, float scale,
				       const uint8_t *__restrict__ w, int64_t wnb0, uint8_t *__restrict__ dr,
				       int64_t dnb0, int64_t n, int vec, int8_t *__restrict__ q, float *__restrict__ qd)
{
	const int64_t k0 = (int64_t)threadIdx.x * 8;
	const int nch = R > 0 ? R : (int)((n + NORM_CHUNK - 1) / NORM_CHUNK);
#pragma unroll
	for (int c = 0; c < nch; c++) {
		const int64_t k = (int64_t)c * NORM_CHUNK + k0;
		float t[8], wv[8];
		if constexpr (R > 0) {
#pragma unroll
			for (int j = 0; j < 8; j++)
				t[j] = v[c * 8 + j];
		} else {
			load8(src, snb0, k, n, vec & NORM_VEC_X, t);
		}
		if (w)
			load8(w, wnb0, k, n, vec & NORM_VEC_W, wv);
#pragma unroll
		for (int j = 0; j < 8; j++) {
			t[j] *= scale;
			if (w)
				t[j] *= wv[j];
		}
		store8(dr, dnb0, k, n, vec & NORM_VEC_X, t);
		if constexpr (QK > 0)
			quant_regs<QK>(t, threadIdx.x & 31, k, q, qd, k < n);
		else if constexpr (QK < 0)
			quant_regs<-QK, true>(t, threadIdx.x & 31, k, NULL, NULL, k < n, NULL, (__half *)q);
	}
}

template <bool RMS, int R>
__global__ void __launch_bounds__(NORM_THREADS)
k_norm(uint8_t *__restrict__ d, struct cu_view dv, const uint8_t *__restrict__ x, struct cu_view xv,
       const uint8_t *__restrict__ w, int64_t wnb0, float eps, int vec)
{
	prefetch_w(w, wnb0, xv.ne[0]);
	pdl_wait();
	pdl_trigger();
	int64_t r = blockIdx.x;
	int64_t i1 = r % xv.ne[1], i2 = (r / xv.ne[1]) % xv.ne[2], i3 = r / (xv.ne[1] * xv.ne[2]);
	const uint8_t *xr = x + i1 * xv.nb[1] + i2 * xv.nb[2] + i3 * xv.nb[3];
	uint8_t *dr = d + i1 * dv.nb[1] + i2 * dv.nb[2] + i3 * dv.nb[3];
	const int64_t n = xv.ne[0], k0 = (int64_t)threadIdx.x * 8;
	const int nch = R > 0 ? R : (int)((n + NORM_CHUNK - 1) / NORM_CHUNK);
	float v[R > 0 ? 8 * R : 1];
	float s = 0.f;
#pragma unroll
	for (int c = 0; c < nch; c++) {
		float t[8];
		load8(xr, xv.nb[0], (int64_t)c * NORM_CHUNK + k0, n, vec & NORM_VEC_X, t);
#pragma unroll
		for (int j = 0; j < 8; j++) {
			s += t[j] * t[j];
			if constexpr (R > 0)
				v[c * 8 + j] = t[j];
		}
	}
	float tot = block_sum(s);
	float scale = RMS ? 1.f / sqrtf(tot / (float)n + eps) : 1.f / fmaxf(sqrtf(tot), eps);
	norm_out<0, R>(v, xr, xv.nb[0], scale, w, wnb0, dr, dv.nb[0], n, vec, NULL, NULL);
}

static bool vec_rows(const struct alice_tensor *t)
{
	return t->nb[0] == 4 && ((uintptr_t)tdata(t) & 15) == 0 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 &&
	       t->nb[3] % 16 == 0 && t->ne[0] % 8 == 0;
}

/* f(std::integral_constant<int, R>) with R the chunks of a row of n kept
 * in registers (1, 2, NORM_REGS; 0: too long, the second pass re-reads) */
template <typename F>
static void with_regs(int64_t n, F f)
{
	const int64_t c = (n + NORM_CHUNK - 1) / NORM_CHUNK;
	if (c <= 1)
		f(std::integral_constant<int, 1>());
	else if (c <= 2)
		f(std::integral_constant<int, 2>());
	else if (c <= NORM_REGS)
		f(std::integral_constant<int, NORM_REGS>());
	else
		f(std::integral_constant<int, 0>());
}

static enum alice_status launch_norm(const struct alice_op_args *a, bool rms)
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
	int vec = (vec_rows(d) && vec_rows(x) ? NORM_VEC_X : 0) | (w && vec_rows(w) ? NORM_VEC_W : 0);
	auto l = [&](auto kern) {
		cu_launch(kern, (unsigned)rows, NORM_THREADS, ctx->stream, tdata(d), cu_view_of(d), (const uint8_t *)tdata(x),
			  cu_view_of(x), wp, w ? w->nb[0] : 0, a->node->fp[0], vec);
	};
	with_regs(x->ne[0], [&](auto r) {
		constexpr int R = decltype(r)::value;
		if (rms)
			l(k_norm<true, R>);
		else
			l(k_norm<false, R>);
	});
	CUDA_LAUNCH_CHECK(ctx, "norm");
	return ALICE_OK;
}

enum alice_status cu_op_rms_norm(const struct alice_op_args *a)
{
	return launch_norm(a, true);
}

enum alice_status cu_op_l2_norm(const struct alice_op_args *a)
{
	return launch_norm(a, false);
}

/* ADD followed by an RMS_NORM of its result (the residual stream: x + f(x)
 * and the next sublayer's norm), in one pass: the sum is written out and
 * normalized from registers. Same float operations as the two ops apart.
 * QK > 0: the output also quantized for the mat-vec that reads it next
 * (mmvq.cu layout: column r at q + r*n, scales at qd + r*n/32); QK < 0:
 * rounded as for -QK blocks and stored as F16 [rows][n] at q, the F16
 * GEMM's operand for the products that read it next (matmul.cu). */
template <int QK, int R>
__global__ void __launch_bounds__(NORM_THREADS)
k_add_rms(uint8_t *__restrict__ s, struct cu_view sv, const uint8_t *__restrict__ a, struct cu_view av,
	  const uint8_t *__restrict__ b, struct cu_view bv, uint8_t *__restrict__ d, struct cu_view dv,
	  const uint8_t *__restrict__ w, int64_t wnb0, float eps, int vec, int8_t *__restrict__ q, float *__restrict__ qd)
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
	const int64_t n = sv.ne[0], k0 = (int64_t)threadIdx.x * 8;
	const int nch = R > 0 ? R : (int)((n + NORM_CHUNK - 1) / NORM_CHUNK);
	float v[R > 0 ? 8 * R : 1];
	float ss = 0.f;
#pragma unroll
	for (int c = 0; c < nch; c++) {
		const int64_t k = (int64_t)c * NORM_CHUNK + k0;
		float t[8], u[8];
		load8(ar, av.nb[0], k, n, vec & NORM_VEC_X, t);
		load8(br, bv.nb[0], k, n, vec & NORM_VEC_X, u);
#pragma unroll
		for (int j = 0; j < 8; j++) {
			t[j] += u[j];
			ss += t[j] * t[j];
			if constexpr (R > 0)
				v[c * 8 + j] = t[j];
		}
		store8(sr, sv.nb[0], k, n, vec & NORM_VEC_X, t);
	}
	float tot = block_sum(ss);
	float scale = 1.f / sqrtf(tot / (float)n + eps);
	norm_out<QK, R>(v, sr, sv.nb[0], scale, w, wnb0, dr, dv.nb[0], n, vec,
			QK > 0 ? q + r * n : QK < 0 ? q + r * n * 2 : NULL, QK > 0 ? qd + r * (n / 32) : NULL);
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

bool cu_add_rms_alias_ok(const struct alice_op_args *add, const struct alice_op_args *norm)
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

bool cu_add_rms_fusable(const struct alice_op_args *add, const struct alice_op_args *norm)
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

enum alice_status cu_add_rms_norm(const struct alice_op_args *add, const struct alice_op_args *norm, int qk)
{
	struct alice_backend_ctx *ctx = add->ctx;
	const struct alice_tensor *s = add->dst, *a = add->src[0], *b = add->src[1], *d = norm->dst,
				  *w = norm->src[1];
	int64_t rows = s->ne[1] * s->ne[2] * s->ne[3], K = s->ne[0];
	const uint8_t *wp = w ? tdata(w) : NULL;
	/* quantized output only where the mat-vec's staging holds it; F16
	 * rounded output (qk < 0) where the GEMM's does */
	const int xh = qk < 0 ? -qk : 0;
	if (xh) {
		qk = xh == CU_XH_Q8_K ? -256 : xh == CU_XH_Q8_0 ? -32 : 0;
		if (qk && (K % -qk != 0 || s->ne[2] * s->ne[3] != 1 ||
			   ctx->scratch_size < ctx->xq_off + (size_t)(K * rows) * 2))
			qk = 0;
	} else if ((qk != 32 && qk != 256) || K % qk != 0 || s->ne[2] * s->ne[3] != 1 || rows > MMV_MAX_M ||
		   ctx->scratch_size < ctx->xq_off + cu_mmvq_scratch(ALICE_TYPE_Q8_0, K, rows)) {
		qk = 0;
	}
	int8_t *q = qk ? cu_xq_q(ctx) : NULL;
	float *qd = qk > 0 ? cu_xq_d(ctx, K, rows) : NULL;
	int vec = (vec_rows(s) && vec_rows(a) && vec_rows(b) && vec_rows(d) ? NORM_VEC_X : 0) |
		  (w && vec_rows(w) ? NORM_VEC_W : 0);
	auto l = [&](auto kern) {
		cu_launch(kern, (unsigned)rows, NORM_THREADS, ctx->stream, tdata(s), cu_view_of(s), (const uint8_t *)tdata(a),
			  cu_view_of(a), (const uint8_t *)tdata(b), cu_view_of(b), tdata(d), cu_view_of(d), wp,
			  w ? w->nb[0] : 0, norm->node->fp[0], vec, q, qd);
	};
	with_regs(K, [&](auto r) {
		constexpr int R = decltype(r)::value;
		if (qk == 256)
			l(k_add_rms<256, R>);
		else if (qk == 32)
			l(k_add_rms<32, R>);
		else if (qk == -256)
			l(k_add_rms<-256, R>);
		else if (qk == -32)
			l(k_add_rms<-32, R>);
		else
			l(k_add_rms<0, R>);
	});
	CUDA_LAUNCH_CHECK(ctx, "add+rms_norm");
	if (qk)
		cu_xq_set(ctx, tdata(d), d->nb[0], d->nb[1], K, rows, qk > 0 ? qk : xh, norm->node->dst);
	return ALICE_OK;
}
