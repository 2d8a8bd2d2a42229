/* matmul.cu — MUL_MAT and GET_ROWS.
 *
 * Decode (M <= MMV_MAX_M activation columns): a mat-vec kernel per weight
 * type. A block of 128 threads owns R weight rows; its threads walk the row
 * in items of 32 weights (one dequantization unit), load the matching 32
 * activations once and dot them with each of the R rows, dequantizing in
 * registers; the block then reduces. Activations are first rounded the way
 * llama.cpp rounds them for the weight type (see act_round below) and then
 * multiplied in F32. Q4_K and Q6_K have hand-laid items (16-byte loads for
 * Q4_K); every other type uses the dq32 dequantizer. Consecutive mat-vecs of
 * one input (Q/K/V, gate/up, with gate/up's GLU as the epilogue) can share
 * one launch (cu_mul_mat_multi).
 *
 * Prefill (M > MMV_MAX_M): quantized weights take mmq.cu's integer
 * tensor-core GEMM (the CPU's arithmetic) for the column runs it is set to
 * take (cu_mmq_ok: none by default, ALICE_CUDA_MMQ=1 all); otherwise, and
 * for what it does not take: activations rounded as above (for the F16
 * GEMM, rounded and converted to F16 in one launch); F16 weights are
 * multiplied in place by cuBLAS (F16 inputs, F32 accumulation: exact
 * products); quantized weights are dequantized in row chunks into scratch
 * and multiplied in one F16 GEMM (11-bit operands, like llama.cpp's cuBLAS
 * path); ALICE_CUDA_GEMM_PRECISE=1 splits both operands into F16 hi + lo
 * halves (three GEMMs: products to F32 precision, ~4x slower prefill);
 * F32 / BF16 weights go through an F32 GEMM.
 *
 * Batch invariance (src2 gives each row's sequence row count): a
 * sequence's run of > MMV_MAX_M rows is one GEMM of its own M, every other
 * row takes the mat-vec, whose per-column sums do not depend on the
 * launch's column count (see cu_op_mul_mat). */
#include "dequant.cuh"
#include "quantx.cuh"

#define MMV_THREADS 128
#define MMV_R 2
#define GEMM_CHUNK_BYTES ((size_t)64 << 20)

/* ---- mat-vec items ---- */

__device__ static inline uint32_t byte_of3(uint32_t s0, uint32_t s1, uint32_t s2, int i)
{
	uint32_t w = i < 4 ? s0 : (i < 8 ? s1 : s2);
	return (w >> (8 * (i & 3))) & 0xff;
}

/* 16 bytes; the vector load when aligned (weights placed at odd offsets
 * still work, slower) */
__device__ static inline uint4 ld_u4(const uint8_t *p)
{
	if (((uintptr_t)p & 15) == 0)
		return *(const uint4 *)p;
	return make_uint4(dq_u32(p), dq_u32(p + 4), dq_u32(p + 8), dq_u32(p + 12));
}

__device__ static inline void ld_x8(const float *p, float *xv)
{
	float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
	xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w;
	xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
}

/* The 32 activations item `it` of type T pairs with. */
template <int T>
__device__ static inline void item_x(const float *__restrict__ x, int64_t it, float *xv)
{
	if constexpr (T == ALICE_TYPE_Q4_K) {
		int64_t sb = it >> 3;
		int p = (int)(it & 7);
		const float *xa = x + sb * 256 + (p >> 1) * 64 + (p & 1) * 16;
		ld_x8(xa, xv); ld_x8(xa + 8, xv + 8);
		ld_x8(xa + 32, xv + 16); ld_x8(xa + 40, xv + 24);
	} else if constexpr (T == ALICE_TYPE_Q6_K) {
		int64_t sb = it >> 3;
		int p = (int)(it & 7);
		const float *xa = x + sb * 256 + (p >> 2) * 128 + (p & 3) * 8;
#pragma unroll
		for (int g = 0; g < 4; g++)
			ld_x8(xa + g * 32, xv + g * 8);
	} else {
		const float *xa = x + it * 32;
#pragma unroll
		for (int i = 0; i < 4; i++)
			ld_x8(xa + 8 * i, xv + 8 * i);
	}
}

/* Dot of item `it` of a weight row with its activations. */
template <int T>
__device__ static inline float item_dot(const uint8_t *__restrict__ row, int64_t it, const float *xv)
{
	if constexpr (T == ALICE_TYPE_Q4_K) {
		const uint8_t *b = row + (it >> 3) * 144;
		int p = (int)(it & 7), pair = p >> 1;
		uint4 h = ld_u4(b);
		uint4 q = ld_u4(b + 16 + pair * 32 + (p & 1) * 16);
		float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xffff)));
		float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
		int j0 = 2 * pair, j1 = j0 + 1, sc0, m0, sc1, m1;
		if (j0 < 4) {
			sc0 = byte_of3(h.y, h.z, h.w, j0) & 63;
			m0 = byte_of3(h.y, h.z, h.w, j0 + 4) & 63;
			sc1 = byte_of3(h.y, h.z, h.w, j1) & 63;
			m1 = byte_of3(h.y, h.z, h.w, j1 + 4) & 63;
		} else {
			uint32_t a0 = byte_of3(h.y, h.z, h.w, j0 + 4), c0 = byte_of3(h.y, h.z, h.w, j0 - 4),
				 e0 = byte_of3(h.y, h.z, h.w, j0);
			uint32_t a1 = byte_of3(h.y, h.z, h.w, j1 + 4), c1 = byte_of3(h.y, h.z, h.w, j1 - 4),
				 e1 = byte_of3(h.y, h.z, h.w, j1);
			sc0 = (int)((a0 & 0xf) | ((c0 >> 6) << 4));
			m0 = (int)((a0 >> 4) | ((e0 >> 6) << 4));
			sc1 = (int)((a1 & 0xf) | ((c1 >> 6) << 4));
			m1 = (int)((a1 >> 4) | ((e1 >> 6) << 4));
		}
		const uint32_t qw[4] = { q.x, q.y, q.z, q.w };
		float slo = 0.f, shi = 0.f, xlo = 0.f, xhi = 0.f;
#pragma unroll
		for (int k = 0; k < 16; k++) {
			uint32_t byte = (qw[k >> 2] >> (8 * (k & 3))) & 0xff;
			slo += (float)(byte & 0xf) * xv[k];
			shi += (float)(byte >> 4) * xv[16 + k];
			xlo += xv[k];
			xhi += xv[16 + k];
		}
		return d * (float)sc0 * slo - dmin * (float)m0 * xlo + d * (float)sc1 * shi -
		       dmin * (float)m1 * xhi;
	} else if constexpr (T == ALICE_TYPE_Q6_K) {
		const uint8_t *b = row + (it >> 3) * 210;
		int p = (int)(it & 7), n = p >> 2, lq = (p & 3) * 8;
		const uint16_t *ql0 = (const uint16_t *)(b + n * 64 + lq);
		const uint16_t *ql1 = (const uint16_t *)(b + n * 64 + 32 + lq);
		const uint16_t *qh = (const uint16_t *)(b + 128 + n * 32 + lq);
		uint32_t a[4], c[4], hh[4];
#pragma unroll
		for (int i = 0; i < 4; i++) {
			a[i] = ql0[i];
			c[i] = ql1[i];
			hh[i] = qh[i];
		}
		const int8_t *sc = (const int8_t *)(b + 192) + n * 8 + lq / 16;
		float d = __half2float(*(const __half *)(b + 208));
		float s[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll
		for (int k = 0; k < 8; k++) {
			uint32_t lo0 = (a[k >> 1] >> (8 * (k & 1))) & 0xff;
			uint32_t lo1 = (c[k >> 1] >> (8 * (k & 1))) & 0xff;
			uint32_t h = (hh[k >> 1] >> (8 * (k & 1))) & 0xff;
			s[0] += (float)((int)((lo0 & 0xf) | ((h & 3) << 4)) - 32) * xv[k];
			s[1] += (float)((int)((lo1 & 0xf) | (((h >> 2) & 3) << 4)) - 32) * xv[8 + k];
			s[2] += (float)((int)((lo0 >> 4) | (((h >> 4) & 3) << 4)) - 32) * xv[16 + k];
			s[3] += (float)((int)((lo1 >> 4) | (((h >> 6) & 3) << 4)) - 32) * xv[24 + k];
		}
		return d * ((float)sc[0] * s[0] + (float)sc[2] * s[1] + (float)sc[4] * s[2] +
			    (float)sc[6] * s[3]);
	} else {
		float w[32];
		dq32<T>(row, it, w);
		float s = 0.f;
#pragma unroll
		for (int k = 0; k < 32; k++)
			s += w[k] * xv[k];
		return s;
	}
}

/* dst[row, c] for NC activation columns. The block's threads form
 * row groups of tpr threads (32, 64 or 128: short rows leave no thread
 * idle); each group owns MMV_R consecutive rows. */
template <int T, int NC, bool GLU>
__global__ void __launch_bounds__(MMV_THREADS)
k_mmv(const struct mmv_set set, const float *__restrict__ x, int64_t xcs, int64_t dcs, int64_t nitems, int tpr)
{
	/* GLU: matrices 0 (gate) and 1 (up) share every block's rows, and the
	 * epilogue also writes h = act(gate) * up */
	const int m = GLU ? 0 : (blockIdx.x >= set.bstart[1]) + (blockIdx.x >= set.bstart[2]);
	const uint8_t *__restrict__ w = set.w[m];
	const uint8_t *__restrict__ w2 = set.w[1];
	const int64_t wnb1 = set.wnb1[m], drs = set.drs[m], N = set.N[m];
	float *__restrict__ d = set.d[m];
	const int rg = threadIdx.x / tpr, lt = threadIdx.x % tpr;
	const int64_t row0 = ((int64_t)(blockIdx.x - set.bstart[m]) * (MMV_THREADS / tpr) + rg) * MMV_R;
	constexpr int NM = GLU ? 2 : 1;
	float acc[NM][MMV_R][NC];
#pragma unroll
	for (int q = 0; q < NM; q++)
#pragma unroll
		for (int r = 0; r < MMV_R; r++)
#pragma unroll
			for (int c = 0; c < NC; c++)
				acc[q][r][c] = 0.f;
	const int nr = row0 >= N ? 0 : (int)(N - row0 < MMV_R ? N - row0 : MMV_R);
	if (nr > 0) {
		for (int64_t it = lt; it < nitems; it += tpr) {
#pragma unroll
			for (int c = 0; c < NC; c++) {
				float xv[32];
				item_x<T>(x + c * xcs, it, xv);
#pragma unroll
				for (int r = 0; r < MMV_R; r++)
					if (r < nr) {
						acc[0][r][c] += item_dot<T>(w + (row0 + r) * wnb1, it, xv);
						if constexpr (GLU)
							acc[NM - 1][r][c] += item_dot<T>(w2 + (row0 + r) * set.wnb1[1], it, xv);
					}
			}
		}
	}
	__shared__ float sh[MMV_THREADS / 32][NM * MMV_R * NC];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
	for (int q = 0; q < NM; q++)
#pragma unroll
		for (int r = 0; r < MMV_R; r++)
#pragma unroll
			for (int c = 0; c < NC; c++) {
				float v = warp_sum(acc[q][r][c]);
				if (lane == 0)
					sh[warp][(q * MMV_R + r) * NC + c] = v;
			}
	__syncthreads();
	if (lt < MMV_R * NC) {
		int r = lt / NC, c = lt % NC;
		if (r < nr) {
			const int wpg = tpr / 32, w0 = rg * wpg;
			float s = 0.f;
			for (int i = 0; i < wpg; i++)
				s += sh[w0 + i][lt];
			d[(row0 + r) * drs + c * dcs] = s;
			if constexpr (GLU) {
				float u = 0.f;
				for (int i = 0; i < wpg; i++)
					u += sh[w0 + i][MMV_R * NC + lt];
				set.d[1][(row0 + r) * set.drs[1] + c * dcs] = u;
				set.h[(row0 + r) * set.hrs + c * set.hcs] = act_apply(set.act, s) * u;
			}
		}
	}
}

/* Plain (F32/F16/BF16) weights whose K is not a multiple of 32: one warp
 * per (row, column), any strides. Only odd shapes take this path. The
 * activations are rounded to the weight's partner (F16 for F16, BF16 for
 * BF16) as everywhere else, so products are the CPU's. */
__global__ void k_mm_plain(const uint8_t *__restrict__ w, uint32_t wt, int64_t wnb0, int64_t wnb1,
			   const uint8_t *__restrict__ x, int64_t xnb0, int64_t xnb1, float *__restrict__ d,
			   int64_t drs, int64_t dcs, int64_t N, int64_t K)
{
	int64_t row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
	int64_t m = blockIdx.y;
	int lane = threadIdx.x & 31;
	if (row >= N)
		return;
	float s = 0.f;
	for (int64_t k = lane; k < K; k += 32) {
		float xv = *(const float *)(x + k * xnb0 + m * xnb1);
		if (wt == ALICE_TYPE_F16)
			xv = __half2float(__float2half_rn(xv));
		else if (wt == ALICE_TYPE_BF16)
			xv = __bfloat162float(__float2bfloat16_rn(xv));
		s += ld_float(w + row * wnb1 + k * wnb0, wt) * xv;
	}
	s = warp_sum(s);
	if (lane == 0)
		d[row * drs + m * dcs] = s;
}

static bool mm_plain_odd(const struct alice_tensor *w)
{
	return w->ne[0] % 32 != 0 &&
	       (w->type == ALICE_TYPE_F32 || w->type == ALICE_TYPE_F16 || w->type == ALICE_TYPE_BF16);
}

/* ---- conversions ---- */

/* Rows [r0, r0+rows) of a weight matrix to a dense F16 (or F32) [rows, K]. */
template <int T, typename O>
__global__ void k_dequant_rows(const uint8_t *__restrict__ w, int64_t wnb1, O *__restrict__ out,
			       int64_t rows, int64_t ngroups)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows * ngroups)
		return;
	int64_t r = i / ngroups, g = i % ngroups;
	float v[32];
	dq32<T>(w + r * wnb1, g, v);
	O *o = out + r * ngroups * 32 + g * 32;
	if constexpr (sizeof(O) == 2) {
		uint4 pk[4];
		__half2 *h = (__half2 *)pk;
#pragma unroll
		for (int k = 0; k < 16; k++)
			h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
#pragma unroll
		for (int k = 0; k < 4; k++)
			((uint4 *)o)[k] = pk[k];
	} else {
#pragma unroll
		for (int k = 0; k < 8; k++)
			((float4 *)o)[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
	}
}

/* A strided F32 [K, M] view to dense [M, K] of type O. */
template <typename O>
__global__ void k_act_dense(const uint8_t *__restrict__ x, int64_t nb0, int64_t nb1, int64_t K, int64_t M,
			    O *__restrict__ out)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= K * M)
		return;
	int64_t k = i % K, m = i / K;
	float v = *(const float *)(x + k * nb0 + m * nb1);
	if constexpr (sizeof(O) == 2)
		out[i] = __float2half_rn(v);
	else
		out[i] = v;
}

/* Split F16 operands: v = hi + lo / 2048 with hi = f16(v), lo = f16((v -
 * hi) * 2048), 22 significant bits in all. Three F16 GEMMs (hi.hi, hi.lo,
 * lo.hi; F32 accumulation) then multiply quantized weights (d * q is not
 * an F16 value) and partner-rounded activations to within F32 rounding,
 * where one F16 GEMM would round both to 11 bits. */
__device__ static inline void split_h(float v, __half &hi, __half &lo)
{
	hi = __float2half_rn(v);
	lo = __float2half_rn((v - __half2float(hi)) * 2048.0f);
}

template <int T>
__global__ void k_dequant_split(const uint8_t *__restrict__ w, int64_t wnb1, __half *__restrict__ hi,
				__half *__restrict__ lo, int64_t rows, int64_t ngroups)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows * ngroups)
		return;
	int64_t r = i / ngroups, g = i % ngroups;
	float v[32];
	dq32<T>(w + r * wnb1, g, v);
	int64_t o = r * ngroups * 32 + g * 32;
	uint4 ph[4], pl[4]; /* 16-byte stores, as k_dequant_rows */
	__half *h = (__half *)ph, *l = (__half *)pl;
#pragma unroll
	for (int k = 0; k < 32; k++)
		split_h(v[k], h[k], l[k]);
#pragma unroll
	for (int k = 0; k < 4; k++) {
		((uint4 *)(hi + o))[k] = ph[k];
		((uint4 *)(lo + o))[k] = pl[k];
	}
}

__global__ void k_act_split(const uint8_t *__restrict__ x, int64_t nb0, int64_t nb1, int64_t K, int64_t M,
			    __half *__restrict__ hi, __half *__restrict__ lo)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= K * M)
		return;
	int64_t k = i % K, m = i / K;
	split_h(*(const float *)(x + k * nb0 + m * nb1), hi[i], lo[i]);
}

/* ALICE_CUDA_GEMM_PRECISE=1: quantized weights' prefill products to F32
 * precision (three split GEMMs; pp512 ~4x slower on the H200). Off by
 * default: one F16 GEMM, as llama.cpp's cuBLAS path. */
static bool gemm_precise(void)
{
	static int precise = -1;
	return cu_env_is("ALICE_CUDA_GEMM_PRECISE", '1', &precise);
}

/* ---- activation rounding ----
 * llama.cpp (and our CPU backend) round the activations to the weight
 * type's dot-product partner before multiplying: F16 / BF16 for those
 * weights, Q8_0 blocks (d = amax/127 stored as fp16, q = rint(x*127/amax))
 * for the 32-blocks, Q8_K blocks (the largest-magnitude value maps to -127,
 * d = 1/iscale in f32) for the K-quants and IQ4_XS. Doing the same rounding
 * here (then multiplying in F32) makes results agree with theirs to
 * summation order instead of to activation-rounding error. */
enum act_round { AR_NONE, AR_F16, AR_BF16, AR_Q8_0, AR_Q8_K };

static enum act_round act_round_of(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_F32: return AR_NONE;
	case ALICE_TYPE_F16: return AR_F16;
	case ALICE_TYPE_BF16: return AR_BF16;
	case ALICE_TYPE_Q2_K: case ALICE_TYPE_Q3_K: case ALICE_TYPE_Q4_K: case ALICE_TYPE_Q5_K:
	case ALICE_TYPE_Q6_K: case ALICE_TYPE_IQ4_XS:
		return AR_Q8_K;
	default:
		return AR_Q8_0;
	}
}

__device__ static inline void st_act(float *p, float v)
{
	*p = v;
}
/* the F16 GEMM's operand: the rounded value, then to F16 (as a separate
 * conversion of the rounded F32 would) */
__device__ static inline void st_act(__half *p, float v)
{
	*p = __float2half_rn(v);
}

/* A warp's block of activations (lane: v[i] = value lane + 32 i) rounded
 * for weight rounding R, stored to o (the block's first value). */
template <int R, typename O>
__device__ static inline void act_round_store(const float *v, int lane, O *o)
{
	constexpr int BS = R == AR_Q8_K ? 256 : 32, PER = BS / 32;
	if constexpr (R == AR_F16 || R == AR_BF16) {
		st_act(o + lane, R == AR_F16 ? __half2float(__float2half_rn(v[0])) : __bfloat162float(__float2bfloat16_rn(v[0])));
	} else if constexpr (R == AR_Q8_0) {
		float amax = warp_max(fabsf(v[0]));
		float d = __half2float(__float2half_rn(amax / 127.0f));
		float id = amax != 0.0f ? 127.0f / amax : 0.0f;
		st_act(o + lane, d * rintf(v[0] * id));
	} else {
		/* the first (lowest index) element of largest magnitude, signed */
		float amax = 0.f, mx = 0.f;
		int idx = 0x7fffffff;
#pragma unroll
		for (int i = 0; i < PER; i++) {
			float a = fabsf(v[i]);
			int e = lane + 32 * i;
			if (a > amax || (a == amax && e < idx && a > 0.f)) {
				amax = a;
				mx = v[i];
				idx = e;
			}
		}
		warp_amax_first(amax, mx, idx);
		if (amax == 0.f) {
#pragma unroll
			for (int i = 0; i < PER; i++)
				st_act(o + lane + 32 * i, 0.f);
		} else {
			float iscale = -127.0f / mx, d = 1.0f / iscale;
#pragma unroll
			for (int i = 0; i < PER; i++)
				st_act(o + lane + 32 * i, d * fminf(rintf(iscale * v[i]), 127.0f));
		}
	}
}

/* This warp's block of BS values of a [K, M] rounding: column m from
 * value k0; false past the last block. */
template <int BS>
__device__ static inline bool act_block(int64_t K, int64_t M, int64_t &m, int64_t &k0)
{
	const int64_t blk = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5), nb = K / BS;
	m = blk / nb;
	k0 = (blk % nb) * BS;
	return blk < nb * M;
}

/* One warp per 32 (F16/BF16/Q8_0) or 256 (Q8_K) activations of a [K, M]
 * strided view; out is dense [M, K]. */
template <int R, typename O>
__global__ void k_act_round(const uint8_t *__restrict__ x, int64_t nb0, int64_t nb1, int64_t K, int64_t M,
			    O *__restrict__ out)
{
	constexpr int BS = R == AR_Q8_K ? 256 : 32, PER = BS / 32;
	const int lane = threadIdx.x & 31;
	int64_t m, k0;
	if (!act_block<BS>(K, M, m, k0))
		return;
	float v[PER];
#pragma unroll
	for (int i = 0; i < PER; i++)
		v[i] = *(const float *)(x + (k0 + lane + 32 * i) * nb0 + m * nb1);
	act_round_store<R>(v, lane, out + m * K + k0);
}

/* The GLU h = act(g) * u ([K, M], rows of 4-byte values: the GLU op's
 * arithmetic) written out and, rounded for R, as the F16 GEMM's operand
 * (dense [M, K]) of the product that reads h next: one pass. */
template <int R>
__global__ void k_glu_round(const uint8_t *__restrict__ g, int64_t gnb1, const uint8_t *__restrict__ u, int64_t unb1,
			    uint8_t *__restrict__ h, int64_t hnb1, int act, int64_t K, int64_t M, __half *__restrict__ out)
{
	pdl_wait();
	pdl_trigger();
	constexpr int BS = R == AR_Q8_K ? 256 : 32, PER = BS / 32;
	const int lane = threadIdx.x & 31;
	int64_t m, k0;
	if (!act_block<BS>(K, M, m, k0))
		return;
	float v[PER];
#pragma unroll
	for (int i = 0; i < PER; i++) {
		const int64_t k = k0 + lane + 32 * i;
		v[i] = act_apply(act, *(const float *)(g + k * 4 + m * gnb1)) * *(const float *)(u + k * 4 + m * unb1);
		*(float *)(h + k * 4 + m * hnb1) = v[i];
	}
	act_round_store<R>(v, lane, out + m * K + k0);
}

/* Round the [K, M] view at x into dense out (F32, or F16 for the F16
 * GEMM); false if no rounding applies. */
template <typename O>
static bool launch_act_round(cudaStream_t s, uint32_t wtype, const uint8_t *x, int64_t nb0, int64_t nb1, int64_t K,
			     int64_t M, O *out)
{
	enum act_round r = act_round_of(wtype);
	int64_t bs = r == AR_Q8_K ? 256 : 32;
	if (r == AR_NONE || K % bs != 0)
		return false;
	int64_t warps = K / bs * M;
	unsigned grid = cu_blocks(warps, 8);
	switch (r) {
	case AR_F16: k_act_round<AR_F16, O><<<grid, 256, 0, s>>>(x, nb0, nb1, K, M, out); break;
	case AR_BF16: k_act_round<AR_BF16, O><<<grid, 256, 0, s>>>(x, nb0, nb1, K, M, out); break;
	case AR_Q8_0: k_act_round<AR_Q8_0, O><<<grid, 256, 0, s>>>(x, nb0, nb1, K, M, out); break;
	default: k_act_round<AR_Q8_K, O><<<grid, 256, 0, s>>>(x, nb0, nb1, K, M, out); break;
	}
	return true;
}

static bool act_rounds(const struct alice_tensor *w)
{
	enum act_round r = act_round_of(w->type);
	return r != AR_NONE && w->ne[0] % (r == AR_Q8_K ? 256 : 32) == 0;
}

/* ---- host side ---- */

static size_t align256(size_t x)
{
	return (x + 255) & ~(size_t)255;
}

static bool mm_use_mmv(const struct alice_op_args *a)
{
	return cu_mm_decode(a->node, a->src[1]->ne[1]);
}

static bool mm_x_dense(const struct alice_tensor *x)
{
	return x->nb[0] == 4 && x->nb[1] % 16 == 0 && ((uintptr_t)tdata(x) & 15) == 0;
}

static int64_t gemm_chunk_rows(int64_t N, int64_t K, size_t esize)
{
	int64_t rows = (int64_t)(GEMM_CHUNK_BYTES / ((size_t)K * esize));
	rows = rows / 256 * 256;
	if (rows < 256)
		rows = 256;
	return rows < N ? rows : N;
}

/* F16 GEMM, unless the weights are F32/BF16 (F32 GEMM) */
static bool gemm_f32(uint32_t type)
{
	return type == ALICE_TYPE_F32 || type == ALICE_TYPE_BF16;
}

/* Quantized weights with GEMM_PRECISE: split F16 operands (k_act_split).
 * F16 weights and F16-rounded activations are exact in one F16 GEMM. */
static bool gemm_split(const struct alice_tensor *w)
{
	return !gemm_f32(w->type) && w->type != ALICE_TYPE_F16 && gemm_precise();
}

/* the staged region (cu_xq) a MUL_MAT takes: its mat-vec's quantized
 * activations, or the F16 GEMM's rounded F16 activations */
size_t cu_mul_mat_staged(const struct alice_op_args *a)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1];
	int64_t K = w->ne[0], M = x->ne[1];
	size_t q = cu_mmvq_scratch(w->type, K, M);
	if (!mm_plain_odd(w) && !mm_use_mmv(a) && act_rounds(w) && !gemm_f32(w->type) && !gemm_split(w)) {
		size_t h = align256((size_t)(K * M) * 2);
		q = h > q ? h : q;
	}
	return q;
}

size_t cu_mul_mat_scratch(const struct alice_op_args *a)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1];
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	if (mm_plain_odd(w))
		return 0;
	size_t xr = act_rounds(w) ? align256((size_t)(K * M * 4)) : 0;
	/* the fast path's F16 staging or dense copy (its int8 quants have
	 * their own region past every op's scratch, sized by graph_compute;
	 * counted here too, generously); with src2 a GEMM op's decode rows
	 * take it too */
	size_t q = cu_mmvq_scratch(w->type, K, M) + (mm_x_dense(x) ? 0 : align256((size_t)(K * M * 4)));
	size_t old = xr ? xr : (mm_x_dense(x) ? 0 : align256((size_t)(K * M * 4)));
	size_t mv = q > old ? q : old;
	if (mm_use_mmv(a))
		return mv;
	/* column runs the integer GEMM takes need its splits' sums; longer
	 * ones (past ALICE_CUDA_MMQ_MAXM) the F16 path's scratch */
	if (cu_mmq_ok(w, tdata(w), 0)) {
		size_t sp = cu_mmq_scratch(a->ctx, N, K, M);
		mv = sp > mv ? sp : mv;
		if (cu_mmq_ok(w, tdata(w), M))
			return mv;
	}
	size_t es = gemm_f32(w->type) ? 4 : 2;
	bool split = gemm_split(w);
	size_t xs = xr + align256((size_t)(K * M) * es) * (split ? 2 : 1);
	bool direct = (w->type == ALICE_TYPE_F32 && w->nb[1] % 4 == 0) ||
		      (w->type == ALICE_TYPE_F16 && w->nb[1] % 2 == 0);
	size_t g = direct ? xs
			  : xs + align256((size_t)gemm_chunk_rows(N, K, split ? 2 * es : es) * (size_t)K * es) *
					 (split ? 2 : 1);
	return g > mv ? g : mv;
}

/* set.w/wnb1/d/drs/N filled for n matrices; bstart is computed here. */
template <int T>
static void launch_mmv_t(cudaStream_t s, struct mmv_set set, int n, const float *x, int64_t xcs, int64_t dcs,
			 int64_t K, int64_t M, bool glu = false)
{
	int64_t nitems = K / 32;
	int tpr = nitems <= 32 ? 32 : (nitems <= 64 ? 64 : MMV_THREADS);
	int64_t rows_per_block = (int64_t)(MMV_THREADS / tpr) * MMV_R;
	unsigned b = 0;
	for (int i = 0; i < MMV_MAX_SET; i++) {
		set.bstart[i] = b;
		if (i < (glu ? 1 : n))
			b += (unsigned)((set.N[i] + rows_per_block - 1) / rows_per_block);
	}
	set.bstart[MMV_MAX_SET] = b;
	for (int i = n; i < MMV_MAX_SET; i++)
		set.bstart[i] = b; /* unused slots: no block maps there */
	int64_t c = 0;
	for (; c + 4 <= M; c += 4) {
		struct mmv_set sc = set;
		for (int i = 0; i < n; i++)
			sc.d[i] = set.d[i] + c * dcs;
		sc.h = set.h ? set.h + c * set.hcs : NULL;
		if (glu)
			k_mmv<T, 4, true><<<b, MMV_THREADS, 0, s>>>(sc, x + c * xcs, xcs, dcs, nitems, tpr);
		else
			k_mmv<T, 4, false><<<b, MMV_THREADS, 0, s>>>(sc, x + c * xcs, xcs, dcs, nitems, tpr);
	}
	for (; c < M; c++) {
		struct mmv_set sc = set;
		for (int i = 0; i < n; i++)
			sc.d[i] = set.d[i] + c * dcs;
		sc.h = set.h ? set.h + c * set.hcs : NULL;
		if (glu)
			k_mmv<T, 1, true><<<b, MMV_THREADS, 0, s>>>(sc, x + c * xcs, xcs, dcs, nitems, tpr);
		else
			k_mmv<T, 1, false><<<b, MMV_THREADS, 0, s>>>(sc, x + c * xcs, xcs, dcs, nitems, tpr);
	}
}

template <int T>
static void launch_dequant_split_t(cudaStream_t s, const uint8_t *w, int64_t wnb1, __half *hi, __half *lo, int64_t rows,
				   int64_t K)
{
	int64_t n = rows * (K / 32);
	k_dequant_split<T><<<cu_blocks(n, 256), 256, 0, s>>>(w, wnb1, hi, lo, rows, K / 32);
}

template <int T, typename O>
static void launch_dequant_t(cudaStream_t s, const uint8_t *w, int64_t wnb1, O *out, int64_t rows, int64_t K)
{
	int64_t n = rows * (K / 32);
	k_dequant_rows<T, O><<<cu_blocks(n, 256), 256, 0, s>>>(w, wnb1, out, rows, K / 32);
}

/* The kept F16 copy of quantized weights wb (wcache.cu), made now on first
 * use, or NULL (the product dequantizes them in chunks as before). */
static const __half *wcache_f16(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const uint8_t *wb,
				uint32_t kt)
{
	int64_t K = w->ne[0], N = w->ne[1];
	const __half *h = cu_wcache_find(ctx, wb, w->nb[1], N, K, kt);
	if (h)
		return h;
	__half *d = cu_wcache_add(ctx, w, wb, w->nb[1], N, K, kt);
	if (!d)
		return NULL;
	auto l = [&]<int T>() { launch_dequant_t<T, __half>(ctx->stream, wb, w->nb[1], d, N, K); };
	if (!dispatch_type(kt, l) || cudaPeekAtLastError() != cudaSuccess) {
		cu_wcache_drop(ctx, wb, 1);
		return NULL;
	}
	return d;
}

/* One [K, M] block of activations (a batch slice, or one part of it) times
 * the weights at wb: the mat-vec when mmv, else the GEMM. */
static enum alice_status mm_block(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const uint8_t *wb,
				  const uint8_t *xb, int64_t xnb0, int64_t xnb1, float *db, int64_t drs, int64_t dcs,
				  int64_t M, bool mmv)
{
	const struct alice_type_info *ti = alice_type_info(w->type);
	const uint32_t kt = cu_ktype(w);
	int64_t K = w->ne[0], N = w->ne[1];
	cudaStream_t s = ctx->stream;
	bool xdense = xnb0 == 4 && xnb1 % 16 == 0 && ((uintptr_t)xb & 15) == 0;
	size_t xr = 0; /* scratch bytes taken by the rounded activations */
	if (mm_plain_odd(w)) {
		dim3 grid((unsigned)((N + 3) / 4), (unsigned)M);
		k_mm_plain<<<grid, 128, 0, s>>>(wb, w->type, w->nb[0], w->nb[1], xb, xnb0, xnb1, db, drs, dcs, N, K);
		CUDA_LAUNCH_CHECK(ctx, "mm_plain");
		return ALICE_OK;
	}
	if (mmv) {
		struct mmv_set set;
		memset(&set, 0, sizeof(set));
		set.w[0] = wb;
		set.wnb1[0] = w->nb[1];
		set.d[0] = db;
		set.drs[0] = drs;
		set.N[0] = N;
		if (cu_mmvq_ok(kt, K, &set, 1)) {
			const uint8_t *xq = xb;
			int64_t qnb0 = xnb0, qnb1 = xnb1;
			if (w->type == ALICE_TYPE_F16 && !xdense) {
				/* the F16 kernel reads dense rows: copy after the region it leaves free */
				float *tmp = (float *)ctx->scratch;
				k_act_dense<float><<<cu_blocks(K * M, 256), 256, 0, s>>>(xb, xnb0, xnb1, K, M, tmp);
				CUDA_LAUNCH_CHECK(ctx, "act_dense");
				xq = ctx->scratch;
				qnb0 = 4;
				qnb1 = K * 4;
			}
			return cu_mmvq(ctx, set, 1, kt, xq, qnb0, qnb1, dcs, K, M, false, false);
		}
	}
	if (!mmv && drs == 1 && cu_mmq_ok(w, wb, M))
		return cu_mmq(ctx, w, wb, xb, xnb0, xnb1, db, dcs, M);
	/* the F16 GEMM's activations rounded and converted in one pass */
	const bool round_h = !mmv && act_rounds(w) && !gemm_f32(w->type) && !gemm_split(w);
	if (act_rounds(w) && !round_h) {
		launch_act_round(s, w->type, xb, xnb0, xnb1, K, M, (float *)ctx->scratch);
		CUDA_LAUNCH_CHECK(ctx, "act_round");
		xb = ctx->scratch;
		xnb0 = 4;
		xnb1 = K * 4;
		xr = align256((size_t)(K * M * 4));
		xdense = true;
	}
	if (mmv) {
		const float *xd = (const float *)xb;
		int64_t xcs = xnb1 / 4;
		if (!xr && !xdense) {
			float *tmp = (float *)ctx->scratch;
			k_act_dense<float><<<cu_blocks(K * M, 256), 256, 0, s>>>(xb, xnb0, xnb1, K, M, tmp);
			xd = tmp;
			xcs = K;
		}
		struct mmv_set set;
		memset(&set, 0, sizeof(set));
		set.w[0] = wb;
		set.wnb1[0] = w->nb[1];
		set.d[0] = db;
		set.drs[0] = drs;
		set.N[0] = N;
		auto l = [&]<int T>() { launch_mmv_t<T>(s, set, 1, xd, xcs, dcs, K, M); };
		if (!dispatch_type(kt, l))
			return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "MUL_MAT: weight type %s", ti->name);
		CUDA_LAUNCH_CHECK(ctx, "mmv");
		return ALICE_OK;
	}
	/* GEMM: D[N, M] (column-major, ld = dcs) = W^T X */
	if (drs != 1)
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: dst rows must be contiguous for M > %d", MMV_MAX_M);
	bool f32 = gemm_f32(w->type);
	size_t es = f32 ? 4 : 2;
	bool direct = (w->type == ALICE_TYPE_F32 && w->nb[1] % 4 == 0) || (w->type == ALICE_TYPE_F16 && w->nb[1] % 2 == 0);
	bool split = gemm_split(w);
	uint8_t *xs = ctx->scratch + xr;
	uint8_t *xs2 = xs + align256((size_t)(K * M) * es); /* split: the activations' lo halves */
	uint8_t *ws = split ? xs2 + align256((size_t)(K * M) * es) : xs2;
	/* rounded F16 activations go to the staged region (cu_xq), where
	 * the next products of the same tensor (K and V after Q, up after
	 * gate) find them */
	const int xh_code = 1000 + (int)act_round_of(w->type);
	if (round_h) {
		if (ctx->scratch_size < ctx->xq_off + (size_t)(K * M) * 2)
			return cu_fail(ctx, ALICE_ERR_BACKEND, "MUL_MAT: scratch not sized for staged K %lld M %lld",
				       (long long)K, (long long)M);
		ws = xs;
		xs = (uint8_t *)cu_xq_q(ctx);
	}
	if (round_h && cu_xq_has(ctx, xb, xnb0, xnb1, K, M, xh_code))
		; /* staged by the previous product of this tensor */
	else if (f32)
		k_act_dense<float><<<cu_blocks(K * M, 256), 256, 0, s>>>(xb, xnb0, xnb1, K, M, (float *)xs);
	else if (split)
		k_act_split<<<cu_blocks(K * M, 256), 256, 0, s>>>(xb, xnb0, xnb1, K, M, (__half *)xs, (__half *)xs2);
	else if (round_h) {
		launch_act_round(s, w->type, xb, xnb0, xnb1, K, M, (__half *)xs);
		cu_xq_set(ctx, xb, xnb0, xnb1, K, M, xh_code, ctx->xq_cur);
	} else
		k_act_dense<__half><<<cu_blocks(K * M, 256), 256, 0, s>>>(xb, xnb0, xnb1, K, M, (__half *)xs);
	CUDA_LAUNCH_CHECK(ctx, "act");
	cudaDataType_t ct = f32 ? CUDA_R_32F : CUDA_R_16F;
	const float one = 1.f, zero = 0.f, lof = 1.0f / 2048.0f;
	const __half *wh = direct || f32 || split ? NULL : wcache_f16(ctx, w, wb, kt);
	if (wh) { /* the kept F16 copy is multiplied as F16 weights are */
		wb = (const uint8_t *)wh;
		direct = true;
	}
	const int64_t wnb1 = wh ? K * 2 : w->nb[1];
	int64_t chunk = direct ? N : gemm_chunk_rows(N, K, split ? 2 * es : es);
	uint8_t *ws2 = ws + align256((size_t)chunk * (size_t)K * es); /* split: the weights' lo halves */
	const double t_blas = ctx->steps ? cu_now_us() : 0; /* ALICE_CUDA_PROFILE=2 */
	for (int64_t n0 = 0; n0 < N; n0 += chunk) {
		int64_t rows = N - n0 < chunk ? N - n0 : chunk;
		const void *A;
		int64_t lda;
		if (direct) {
			A = wb + n0 * wnb1;
			lda = wnb1 / (int64_t)es;
		} else {
			const uint8_t *wr = wb + n0 * w->nb[1];
			int64_t nb1 = w->nb[1];
			bool ok;
			if (f32) {
				auto l = [&]<int T>() { launch_dequant_t<T, float>(s, wr, nb1, (float *)ws, rows, K); };
				ok = dispatch_type(kt, l);
			} else if (split) {
				auto l = [&]<int T>() {
					launch_dequant_split_t<T>(s, wr, nb1, (__half *)ws, (__half *)ws2, rows, K);
				};
				ok = dispatch_type(kt, l);
			} else {
				auto l = [&]<int T>() { launch_dequant_t<T, __half>(s, wr, nb1, (__half *)ws, rows, K); };
				ok = dispatch_type(kt, l);
			}
			if (!ok)
				return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "MUL_MAT: weight type %s", ti->name);
			CUDA_LAUNCH_CHECK(ctx, "dequant");
			A = ws;
			lda = K;
		}
		cublasStatus_t cs = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)M, (int)K, &one, A,
						 ct, (int)lda, xs, ct, (int)K, &zero, db + n0, CUDA_R_32F, (int)dcs,
						 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		if (split && cs == CUBLAS_STATUS_SUCCESS) /* + hi.lo + lo.hi, each scaled by 1/2048 */
			cs = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)M, (int)K, &lof, A, ct,
					  (int)lda, xs2, ct, (int)K, &one, db + n0, CUDA_R_32F, (int)dcs, CUBLAS_COMPUTE_32F,
					  CUBLAS_GEMM_DEFAULT);
		if (split && cs == CUBLAS_STATUS_SUCCESS)
			cs = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)M, (int)K, &lof, ws2, ct,
					  (int)K, xs, ct, (int)K, &one, db + n0, CUDA_R_32F, (int)dcs, CUBLAS_COMPUTE_32F,
					  CUBLAS_GEMM_DEFAULT);
		if (cs != CUBLAS_STATUS_SUCCESS)
			return cu_fail(ctx, ALICE_ERR_BACKEND, "cublasGemmEx failed: %s (N %lld, M %lld, K %lld)",
				       cublasGetStatusString(cs), (long long)rows, (long long)M, (long long)K);
	}
	if (ctx->steps)
		cu_steps_blas(ctx->steps, cu_now_us() - t_blas);
	return ALICE_OK;
}

/* src2's rows (count, index) on the host. Read once per graph_compute (one
 * sync; only GEMM graphs, which are never captured, come here). */
struct mm_regime_cache {
	const struct alice_backend_ctx *ctx;
	uint64_t n_compute;
	const uint8_t *dev;
	int64_t M, nb1;
	int32_t *v; /* [M][2] */
	int64_t cap;
};
static __thread struct mm_regime_cache g_rc;

static const int32_t *mm_regime(struct alice_backend_ctx *ctx, const struct alice_tensor *r, int64_t M)
{
	const uint8_t *dev = tdata(r);
	if (g_rc.ctx == ctx && g_rc.n_compute == ctx->n_compute && g_rc.dev == dev && g_rc.M == M &&
	    g_rc.nb1 == r->nb[1])
		return g_rc.v;
	if (g_rc.cap < M) {
		int32_t *nv = (int32_t *)realloc(g_rc.v, (size_t)M * 2 * sizeof(int32_t));
		if (!nv)
			return NULL;
		g_rc.v = nv;
		g_rc.cap = M;
	}
	g_rc.ctx = NULL;
	cudaError_t e = cudaMemcpy2DAsync(g_rc.v, 8, dev, (size_t)r->nb[1], 8, (size_t)M, cudaMemcpyDeviceToHost,
					  ctx->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(ctx->stream);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	g_rc.ctx = ctx;
	g_rc.n_compute = ctx->n_compute;
	g_rc.dev = dev;
	g_rc.M = M;
	g_rc.nb1 = r->nb[1];
	return g_rc.v;
}

/* src2 of a GEMM op checked and read (*reg: [M][2] on the host) */
static enum alice_status mm_regime_check(struct alice_backend_ctx *ctx, const struct alice_tensor *x,
					 const struct alice_tensor *rg, int64_t M, const int32_t **reg)
{
	if (rg->type != ALICE_TYPE_I32 || rg->ne[0] < 2 || rg->ne[1] != M || rg->nb[0] != 4 || x->ne[2] * x->ne[3] != 1)
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: row regime (src2) must be I32 [2, %lld] with unbatched activations",
			       (long long)M);
	*reg = mm_regime(ctx, rg, M);
	if (!*reg)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "MUL_MAT: reading the row regime (src2) failed");
	return ALICE_OK;
}

/* The part of a GEMM op's columns from m: [m, *e). true: a run of one
 * sequence's rows (count > MMV_MAX_M), one GEMM of exactly its own M;
 * false: mat-vec rows up to the next such run. Without src2, one run. */
static bool mm_next_part(const int32_t *reg, int64_t M, int64_t m, int64_t *e)
{
	if (!reg) {
		*e = M;
		return true;
	}
	int64_t c = reg[2 * m];
	*e = m + c;
	if (c > MMV_MAX_M && reg[2 * m + 1] == 0 && *e <= M && reg[2 * (*e - 1) + 1] == c - 1 && reg[2 * (*e - 1)] == c)
		return true;
	for (*e = m + 1; *e < M; ++*e) {
		int64_t c2 = reg[2 * *e];
		if (c2 > MMV_MAX_M && reg[2 * *e + 1] == 0 && *e + c2 <= M && reg[2 * (*e + c2 - 1) + 1] == c2 - 1)
			break;
	}
	return false;
}

/* Batch invariance: a sequence's rows get the kernel, and so the summation
 * order, they would get alone. With src2 (each row's sequence row count and
 * index) a run of one sequence's rows with count > MMV_MAX_M is one GEMM
 * of exactly its own M; every other row (decode, short prompts) goes to the
 * mat-vec, whose per-column result does not depend on the launch's column
 * count. Without src2 the op's M decides, as for a single sequence. */
enum alice_status cu_op_mul_mat(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *dt = a->dst, *rg = a->src[2];
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	if (x->ne[0] != K || dt->ne[0] != N || dt->ne[1] != M || dt->ne[2] != x->ne[2] ||
	    dt->ne[3] != x->ne[3] || x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0)
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT shapes do not match: w [%lld,%lld] x [%lld,%lld] dst [%lld,%lld]",
			       (long long)K, (long long)N, (long long)x->ne[0], (long long)M,
			       (long long)dt->ne[0], (long long)dt->ne[1]);
	if (K % 32 != 0 && !mm_plain_odd(w))
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: K = %lld is not a multiple of 32", (long long)K);
	if (!cu_packed_view_ok(w))
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: a view of a packed %s weight cuts its runs", alice_type_name(w->type));
	if (M > 65535 && mm_plain_odd(w))
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "MUL_MAT: M = %lld with an odd K", (long long)M);
	if (dt->nb[0] % 4 != 0 || dt->nb[1] % 4 != 0 || x->nb[0] % 4 != 0)
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: dst / activation strides must be float aligned");
	const struct alice_type_info *ti = alice_type_info(w->type);
	if (ti->block_size == 1 && w->nb[0] != (int64_t)ti->type_size)
		return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: weight rows must be contiguous");
	int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
	int64_t drs = dt->nb[0] / 4, dcs = dt->nb[1] / 4;
	bool mmv = mm_use_mmv(a);
	const int32_t *reg = NULL;
	if (!mmv && rg && !mm_plain_odd(w)) {
		enum alice_status st = mm_regime_check(ctx, x, rg, M, &reg);
		if (st != ALICE_OK)
			return st;
	}
	for (int64_t i3 = 0; i3 < x->ne[3]; i3++) {
		for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
			const uint8_t *wb = tdata(w) + (i2 / r2) * w->nb[2] + (i3 / r3) * w->nb[3];
			const uint8_t *xb = tdata(x) + i2 * x->nb[2] + i3 * x->nb[3];
			float *db = (float *)(tdata(dt) + i2 * dt->nb[2] + i3 * dt->nb[3]);
			if (!reg) {
				enum alice_status st = mm_block(ctx, w, wb, xb, x->nb[0], x->nb[1], db, drs, dcs, M, mmv);
				if (st != ALICE_OK)
					return st;
				continue;
			}
			for (int64_t m = 0, e; m < M; m = e) {
				const bool run = mm_next_part(reg, M, m, &e);
				enum alice_status st = mm_block(ctx, w, wb, xb + m * x->nb[1], x->nb[0], x->nb[1],
								db + m * dcs, drs, dcs, e - m, !run);
				if (st != ALICE_OK)
					return st;
			}
		}
	}
	return ALICE_OK;
}

/* Consecutive MUL_MAT nodes that can share one mat-vec launch with a[0]:
 * same activations tensor (dense, M <= MMV_MAX_M, no batch dims), same
 * weight type and K, dst columns with the same stride. */
static uint64_t t_extent(const struct alice_tensor *t)
{
	uint64_t e = alice_row_size(t->type, t->ne[0]);
	for (int d = 1; d < 4; d++)
		e += (uint64_t)(t->ne[d] - 1) * (uint64_t)t->nb[d];
	return e;
}

static bool t_overlap(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->buf == b->buf && a->offset < b->offset + t_extent(b) && b->offset < a->offset + t_extent(a);
}

/* member k's weights or dst overlap what an earlier member writes */
static bool reads_earlier(const struct alice_op_args *a, int k)
{
	bool dep = false;
	for (int j = 0; j < k; j++)
		dep = dep || t_overlap(a[k].src[0], a[j].dst) || t_overlap(a[k].dst, a[j].dst);
	return dep;
}

int cu_mul_mat_fusable(const struct alice_op_args *a, int n)
{
	const struct alice_tensor *x = a[0].src[1];
	if (!mm_use_mmv(&a[0]) || !mm_x_dense(x) || x->ne[2] * x->ne[3] != 1 || mm_plain_odd(a[0].src[0]))
		return 1;
	int k = 1;
	uint32_t kt = cu_ktype(a[0].src[0]); /* the type the next member must have */
	while (k < n && k < MMV_MAX_SET) {
		const struct alice_tensor *w = a[k].src[0], *d = a[k].dst;
		/* one switch of type where the launch can take it (Q4_K_M's Q6_K V) */
		if (cu_ktype(w) != kt && kt == cu_ktype(a[0].src[0]) && cu_mmvq_mixable(kt, cu_ktype(w), x->ne[1]))
			kt = cu_ktype(w);
		if (a[k].node->src[1] != a[0].node->src[1] || cu_ktype(w) != kt ||
		    w->ne[0] != a[0].src[0]->ne[0] || w->ne[2] * w->ne[3] != 1 ||
		    (d->nb[1] != a[0].dst->nb[1] && x->ne[1] > 1) || /* one column stride per launch */
		    d->nb[0] % 4 != 0 || d->ne[0] != w->ne[1] || d->ne[1] != x->ne[1])
			break;
		if (reads_earlier(a, k))
			break;
		k++;
	}
	return k;
}

/* The mat-vecs of a[0..n) (one input, one dst column stride) on columns
 * [m0, m0 + Mp), with the GLU after a gate/up pair when glu. */
static enum alice_status mmv_multi(const struct alice_op_args *a, int n, const struct alice_op_args *glu, int64_t m0,
				   int64_t Mp)
{
	struct alice_backend_ctx *ctx = a[0].ctx;
	const struct alice_tensor *x = a[0].src[1];
	struct mmv_set set;
	memset(&set, 0, sizeof(set));
	int64_t dcs = a[0].dst->nb[1] / 4;
	for (int i = 0; i < n; i++) {
		const struct alice_tensor *w = a[i].src[0], *d = a[i].dst;
		if (w->ne[2] * w->ne[3] != 1 || d->ne[0] != w->ne[1])
			return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: fused shapes do not match");
		if (!cu_packed_view_ok(w))
			return cu_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: a view of a packed %s weight cuts its runs",
				       alice_type_name(w->type));
		set.w[i] = tdata(w);
		set.wnb1[i] = w->nb[1];
		set.d[i] = (float *)tdata(d) + m0 * dcs;
		set.drs[i] = d->nb[0] / 4;
		set.N[i] = w->ne[1];
	}
	int64_t K = x->ne[0], xcs = x->nb[1] / 4;
	const uint8_t *xb = tdata(x) + m0 * x->nb[1];
	const float *xd = (const float *)xb;
	cudaStream_t s = ctx->stream;
	if (glu) {
		set.hrs = glu->dst->nb[0] / 4;
		set.hcs = glu->dst->nb[1] / 4;
		set.h = (float *)tdata(glu->dst) + m0 * set.hcs;
		set.act = glu->node->ip[0];
	}
	if (n == 3 && !glu && ctx->rope_req) {
		set.rope = *ctx->rope_req;
		set.rope_taken = &ctx->rope_taken;
	}
	const uint32_t kt = cu_ktype(a[0].src[0]);
	int mix = 1;
	while (mix < n && cu_ktype(a[mix].src[0]) == kt)
		mix++;
	if (mix < n) { /* a second type (cu_mmvq_mixable): one launch where both take the mat-vec */
		if (glu) /* cu_mul_mat_glu_fusable takes one type */
			return cu_fail(ctx, ALICE_ERR_BACKEND, "MUL_MAT: a GLU pair of two weight types");
		struct mmv_set tail = set;
		for (int i = mix; i < n; i++) {
			tail.w[i - mix] = set.w[i];
			tail.wnb1[i - mix] = set.wnb1[i];
		}
		const uint32_t kt2 = cu_ktype(a[mix].src[0]);
		if (!cu_mmvq_ok(kt, K, &set, mix) || !cu_mmvq_ok(kt2, K, &tail, n - mix)) {
			enum alice_status st = mmv_multi(a, mix, NULL, m0, Mp);
			return st != ALICE_OK ? st : mmv_multi(a + mix, n - mix, NULL, m0, Mp);
		}
		set.mix = (uint8_t)mix;
		set.mix_type = kt2;
		if (!ctx->mix_logged) {
			ctx->mix_logged = true;
			cu_log(0, "cuda backend: %s and %s products of one input in one mat-vec launch", cu_ktype_name(kt),
			       cu_ktype_name(kt2));
		}
	}
	if (set.mix || cu_mmvq_ok(kt, K, &set, n)) { /* x is dense here (cu_mul_mat_fusable) */
		bool stage = glu && t_overlap(glu->dst, x);
		for (int i = 0; i < n; i++)
			stage = stage || t_overlap(a[i].dst, x);
		return cu_mmvq(ctx, set, n, kt, xb, x->nb[0], x->nb[1], dcs, K, Mp, glu != NULL, stage);
	}
	if (act_rounds(a[0].src[0])) {
		launch_act_round(s, a[0].src[0]->type, xb, x->nb[0], x->nb[1], K, Mp, (float *)ctx->scratch);
		CUDA_LAUNCH_CHECK(ctx, "act_round");
		xd = (const float *)ctx->scratch;
		xcs = K;
	}
	auto l = [&]<int T>() { launch_mmv_t<T>(s, set, n, xd, xcs, dcs, K, Mp, glu != NULL); };
	if (!dispatch_type(kt, l))
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "MUL_MAT: weight type %s", alice_type_name(a[0].src[0]->type));
	CUDA_LAUNCH_CHECK(ctx, "mmv multi");
	return ALICE_OK;
}

#include "mm_group.cuh"

bool cu_mul_mat_stages_x(const struct alice_op_args *a, int n)
{
	/* F32 weights read x as it is; every other type's launch rounds or
	 * quantizes it into scratch first (cu_mul_mat_multi) */
	return n >= 2 && a[0].src[0]->type != ALICE_TYPE_F32;
}

/* The GLU node g can be folded into the mat-vec launch of the pair a[0..2). */
bool cu_mul_mat_glu_fusable(const struct alice_op_args *a, const struct alice_op_args *g)
{
	const struct alice_tensor *h = g->dst;
	return g->node->op == ALICE_OP_GLU && g->node->src[0] == a[0].node->dst && g->node->src[1] == a[1].node->dst &&
	       cu_ktype(a[0].src[0]) == cu_ktype(a[1].src[0]) &&
	       alice_bc_act_ok(g->node->ip[0]) && a[0].src[0]->ne[1] == a[1].src[0]->ne[1] && h->ne[0] == a[0].dst->ne[0] &&
	       h->ne[1] == a[0].dst->ne[1] && h->ne[2] * h->ne[3] == 1 && h->nb[0] % 4 == 0 && h->nb[1] % 4 == 0 &&
	       a[0].dst->nb[1] == a[1].dst->nb[1];
}

static_assert(1000 + AR_Q8_0 == CU_XH_Q8_0 && 1000 + AR_Q8_K == CU_XH_Q8_K, "staged F16 operand codes");

int cu_mul_mat_xh(const struct alice_op_args *a)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1];
	const int64_t M = x->ne[1];
	if (mm_use_mmv(a) || mm_plain_odd(w) || x->ne[2] * x->ne[3] != 1 || w->ne[2] * w->ne[3] != 1 ||
	    !act_rounds(w) || gemm_f32(w->type) || gemm_split(w) || cu_mmq_ok(w, tdata(w), M))
		return 0;
	const enum act_round r = act_round_of(w->type);
	return r == AR_Q8_0 || r == AR_Q8_K ? 1000 + (int)r : 0;
}

bool cu_glu_round_ok(const struct alice_op_args *glu)
{
	const struct alice_tensor *h = glu->dst, *g = glu->src[0], *u = glu->src[1];
	for (int i = 0; i < 4; i++)
		if (g->ne[i] != h->ne[i] || u->ne[i] != h->ne[i])
			return false;
	return h->ne[2] * h->ne[3] == 1 && h->nb[0] == 4 && g->nb[0] == 4 && u->nb[0] == 4 && alice_bc_act_ok(glu->node->ip[0]);
}

enum alice_status cu_glu_round(const struct alice_op_args *glu, int xh)
{
	struct alice_backend_ctx *ctx = glu->ctx;
	const struct alice_tensor *h = glu->dst, *g = glu->src[0], *u = glu->src[1];
	const int64_t K = h->ne[0], M = h->ne[1];
	const int bs = xh == CU_XH_Q8_K ? 256 : 32;
	if ((xh != CU_XH_Q8_K && xh != CU_XH_Q8_0) || K % bs != 0 ||
	    ctx->scratch_size < ctx->xq_off + (size_t)(K * M) * 2)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "GLU: staging not sized for K %lld M %lld", (long long)K, (long long)M);
	__half *out = (__half *)cu_xq_q(ctx);
	const unsigned grid = cu_blocks(K / bs * M, 8);
	if (xh == CU_XH_Q8_K)
		cu_launch(k_glu_round<AR_Q8_K>, grid, 256, ctx->stream, (const uint8_t *)tdata(g), g->nb[1],
			  (const uint8_t *)tdata(u), u->nb[1], tdata(h), h->nb[1], glu->node->ip[0], K, M, out);
	else
		cu_launch(k_glu_round<AR_Q8_0>, grid, 256, ctx->stream, (const uint8_t *)tdata(g), g->nb[1],
			  (const uint8_t *)tdata(u), u->nb[1], tdata(h), h->nb[1], glu->node->ip[0], K, M, out);
	CUDA_LAUNCH_CHECK(ctx, "glu+round");
	cu_xq_set(ctx, tdata(h), h->nb[0], h->nb[1], K, M, xh, glu->node->dst);
	return ALICE_OK;
}

int cu_mul_mat_xq(const struct alice_op_args *a)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1];
	if (!mm_use_mmv(a) || mm_plain_odd(w) || x->ne[2] * x->ne[3] != 1 || w->ne[2] * w->ne[3] != 1)
		return 0;
	static int q80_off = -1;
	int qk = w->type == ALICE_TYPE_Q4_K || w->type == ALICE_TYPE_Q6_K ? 256
		 : w->type == ALICE_TYPE_Q8_0 && !cu_env_is("ALICE_CUDA_NORM_Q80", '0', &q80_off) ? 32 : 0;
	if (!qk)
		return 0;
	struct mmv_set set;
	memset(&set, 0, sizeof(set));
	set.w[0] = tdata(w);
	set.wnb1[0] = w->nb[1];
	if (!cu_mmvq_ok(cu_ktype(w), w->ne[0], &set, 1))
		return 0;
	return qk;
}

/* ---- GET_ROWS ---- */

template <int T>
__global__ void k_get_rows_q(const uint8_t *__restrict__ src, int64_t snb1, const int32_t *__restrict__ ids,
			     int64_t inb0, int64_t n_rows, uint8_t *__restrict__ dst, int64_t dnb0, int64_t dnb1,
			     int64_t ngroups, int64_t n, int *__restrict__ flag)
{
	pdl_wait();
	pdl_trigger();
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= ngroups * n)
		return;
	int64_t t = i / ngroups, g = i % ngroups;
	int32_t id = *(const int32_t *)((const uint8_t *)ids + t * inb0);
	float v[32];
	if (id < 0 || id >= n_rows) {
		if (g == 0)
			atomicOr(flag, CU_FLAG_ROW_ID);
#pragma unroll
		for (int k = 0; k < 32; k++)
			v[k] = 0.f; /* out-of-range ids read as zeros, never outside the tensor */
	} else {
		dq32<T>(src + (int64_t)id * snb1, g, v);
	}
	uint8_t *o = dst + t * dnb1 + g * 32 * dnb0;
#pragma unroll
	for (int k = 0; k < 32; k++)
		*(float *)(o + k * dnb0) = v[k];
}

__global__ void k_get_rows_f(const uint8_t *__restrict__ src, uint32_t type, int64_t snb0, int64_t snb1,
			     const int32_t *__restrict__ ids, int64_t inb0, int64_t n_rows, uint8_t *__restrict__ dst,
			     int64_t dnb0, int64_t dnb1, int64_t ne0, int64_t n, int *__restrict__ flag)
{
	pdl_wait();
	pdl_trigger();
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= ne0 * n)
		return;
	int64_t t = i / ne0, k = i % ne0;
	int32_t id = *(const int32_t *)((const uint8_t *)ids + t * inb0);
	float v = 0.f;
	if (id >= 0 && id < n_rows)
		v = ld_float(src + (int64_t)id * snb1 + k * snb0, type);
	else if (k == 0)
		atomicOr(flag, CU_FLAG_ROW_ID);
	*(float *)(dst + t * dnb1 + k * dnb0) = v;
}

enum alice_status cu_op_get_rows(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *ids = a->src[1], *d = a->dst;
	int64_t ne0 = s->ne[0], n = ids->ne[0];
	if (d->ne[0] != ne0 || d->ne[1] != n || ids->ne[1] * ids->ne[2] * ids->ne[3] != 1 ||
	    d->ne[2] * d->ne[3] != 1 || s->ne[2] * s->ne[3] != 1)
		return cu_fail(ctx, ALICE_ERR_INVALID, "GET_ROWS: expected src [ne0, rows], ids [n], dst [ne0, n]");
	uint32_t type = s->type, kt = cu_ktype(s);
	if (!cu_packed_view_ok(s))
		return cu_fail(ctx, ALICE_ERR_INVALID, "GET_ROWS: a view of a packed %s tensor cuts its runs", alice_type_name(type));
	cudaStream_t st = ctx->stream;
	if (type == ALICE_TYPE_F32 || type == ALICE_TYPE_F16 || type == ALICE_TYPE_BF16) {
		k_get_rows_f<<<cu_blocks(ne0 * n, 256), 256, 0, st>>>(tdata(s), type, s->nb[0], s->nb[1],
								       (const int32_t *)tdata(ids), ids->nb[0],
								       s->ne[1], tdata(d), d->nb[0], d->nb[1], ne0, n, ctx->dflag);
	} else {
		if (ne0 % 32 != 0)
			return cu_fail(ctx, ALICE_ERR_INVALID, "GET_ROWS: row length %lld", (long long)ne0);
		int64_t ng = ne0 / 32;
		const uint8_t *sp = tdata(s);
		const int32_t *ip = (const int32_t *)tdata(ids);
		uint8_t *dp = tdata(d);
		int *fl = ctx->dflag;
		int64_t snb1 = s->nb[1], inb0 = ids->nb[0], nr = s->ne[1], dnb0 = d->nb[0], dnb1 = d->nb[1];
		auto l = [&]<int T>() {
			cu_launch(k_get_rows_q<T>, cu_blocks(ng * n, 128), 128, st, sp, snb1, ip, inb0, nr, dp, dnb0, dnb1, ng, n, fl);
		};
		if (!dispatch_type(kt, l))
			return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "GET_ROWS: type %s", cu_ktype_name(kt));
	}
	CUDA_LAUNCH_CHECK(ctx, "get_rows");
	return ALICE_OK;
}
