/* quantx.cuh — activations rounded to int8 as llama.cpp's CPU path rounds
 * them for the weight type (mmvq.cu): QK = 256, Q8_K (the value of largest
 * magnitude maps to -127, d = 1/iscale, the same d stored for each 32 of the
 * block); QK = 32, Q8_0 (d = amax/127 stored as fp16, quants
 * x * 127/amax rounded to nearest even, as ggml-cpu's SIMD quantize_row_q8_0
 * and our CPU backend; its reference rounds x/d half away from zero); with s, also Q8_1's block
 * sums.
 *
 * Layout shared by every producer: a lane holds 8 consecutive values, so a
 * Q8_0 group is 4 lanes and a Q8_K block one warp. Used by the quantize
 * kernel and by the norms that emit their output quantized. */
#ifndef ALICE_CUDA_QUANTX_CUH
#define ALICE_CUDA_QUANTX_CUH

#include "common.cuh"

/* Across the warp: the largest magnitude amax, its signed value mx and its
 * index idx, the lowest index among equal magnitudes (llama.cpp's Q8_K
 * scale comes from the first such element). */
__device__ static inline void warp_amax_first(float &amax, float &mx, int &idx)
{
	for (int off = 16; off > 0; off >>= 1) {
		float a2 = __shfl_xor_sync(0xffffffffu, amax, off);
		float m2 = __shfl_xor_sync(0xffffffffu, mx, off);
		int i2 = __shfl_xor_sync(0xffffffffu, idx, off);
		if (a2 > amax || (a2 == amax && i2 < idx)) {
			amax = a2;
			mx = m2;
			idx = i2;
		}
	}
}

/* v: this lane's 8 consecutive values, which start at value k of the
 * column (k % 8 == 0; QK = 256: k = k0 + 8*lane of a 256-aligned block k0).
 * Quants go to q[k ..], scales to d[k/32 ..]; H: instead, the rounded
 * values d q as F16 to h[k ..] (the F16 GEMM's operand, matmul.cu's
 * k_act_round). Every lane of the warp must
 * call it (shuffles); lanes with present == false (past the column's end:
 * their whole group is) store nothing. */
template <int QK, bool H = false>
__device__ static inline void quant_regs(const float v[8], int lane, int64_t k, int8_t *__restrict__ q,
					 float *__restrict__ d, bool present, float *__restrict__ s = nullptr,
					 __half *__restrict__ h = nullptr)
{
	uint32_t w[2] = { 0, 0 };
	if constexpr (QK == 32) {
		float amax = 0.f;
#pragma unroll
		for (int i = 0; i < 8; i++)
			amax = fmaxf(amax, fabsf(v[i]));
		amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
		amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
		const float dd = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
		int sum = 0;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			const int qi = (int)rintf(v[i] * id);
			sum += qi;
			w[i / 4] |= ((uint32_t)qi & 0xffu) << (8 * (i % 4));
		}
		if constexpr (H) { /* the rounded values as the F16 GEMM's operand */
			const float dh = __half2float(__float2half_rn(dd));
			if (present)
#pragma unroll
				for (int i = 0; i < 8; i++)
					h[k + i] = __float2half_rn(dh * (float)(int8_t)(w[i / 4] >> (8 * (i % 4))));
			return;
		}
		if (present && (lane & 3) == 0)
			d[k / 32] = __half2float(__float2half_rn(dd));
		if (s) { /* Q8_1's s: fp16(sum of the block's quants x d) */
			sum += __shfl_xor_sync(0xffffffffu, sum, 1);
			sum += __shfl_xor_sync(0xffffffffu, sum, 2);
			if (present && (lane & 3) == 0)
				s[k / 32] = __half2float(__float2half_rn((float)sum * dd));
		}
	} else {
		/* the first (lowest index) element of largest magnitude, signed */
		float amax = 0.f, mx = 0.f;
		int idx = 0x7fffffff;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			float a = fabsf(v[i]);
			if (a > amax) {
				amax = a;
				mx = v[i];
				idx = lane * 8 + i;
			}
		}
		warp_amax_first(amax, mx, idx);
		const float iscale = amax == 0.f ? 0.f : -127.0f / mx;
		const float dd = amax == 0.f ? 0.f : 1.0f / iscale;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			int qi = amax == 0.f ? 0 : (int)fminf(rintf(iscale * v[i]), 127.0f);
			w[i / 4] |= ((uint32_t)qi & 0xffu) << (8 * (i % 4));
		}
		if constexpr (H) {
			if (present)
#pragma unroll
				for (int i = 0; i < 8; i++)
					h[k + i] = __float2half_rn(dd * (float)(int8_t)(w[i / 4] >> (8 * (i % 4))));
			return;
		}
		if (present && lane < 8)
			d[(k - 8 * lane) / 32 + lane] = dd;
	}
	if (present)
		*(uint2 *)(q + k) = make_uint2(w[0], w[1]);
}

/* 8 values of a column from value k on (byte stride nb0); vec: nb0 == 4
 * and 16-byte aligned; values at n and past read as 0 */
__device__ static inline void load8(const uint8_t *__restrict__ x, int64_t nb0, int64_t k, int64_t n, bool vec,
				    float v[8])
{
	if (vec && k + 8 <= n) {
		float4 a = *(const float4 *)(x + k * 4), b = *(const float4 *)(x + k * 4 + 16);
		v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
		return;
	}
#pragma unroll
	for (int i = 0; i < 8; i++)
		v[i] = k + i < n ? *(const float *)(x + (k + i) * nb0) : 0.f;
}

__device__ static inline void store8(uint8_t *__restrict__ x, int64_t nb0, int64_t k, int64_t n, bool vec,
				     const float v[8])
{
	if (vec && k + 8 <= n) {
		*(float4 *)(x + k * 4) = make_float4(v[0], v[1], v[2], v[3]);
		*(float4 *)(x + k * 4 + 16) = make_float4(v[4], v[5], v[6], v[7]);
		return;
	}
#pragma unroll
	for (int i = 0; i < 8; i++)
		if (k + i < n)
			*(float *)(x + (k + i) * nb0) = v[i];
}

#endif
