/* quantx.cuh — one warp rounds QK activations to int8 as llama.cpp's CPU
 * path does for the weight type (mmvq.cu): QK = 256, Q8_K (the value of
 * largest magnitude maps to -127, d = 1/iscale, the same d stored for each
 * 32 of the block); QK = 32, Q8_0 (d = fp16(amax/127)). Shared by the
 * quantize kernel and the norms that emit their output quantized. */
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

/* x: the column (byte stride nb0 between values); values k0 .. k0+QK go to
 * q[k0 ..], scales to d[k0/32 ..]. */
template <int QK>
__device__ static inline void quant_warp(const uint8_t *__restrict__ x, int64_t nb0, int64_t k0, int8_t *__restrict__ q,
					 float *__restrict__ d, int lane)
{
	if constexpr (QK == 32) {
		float v = *(const float *)(x + (k0 + lane) * nb0);
		float amax = warp_max(fabsf(v));
		float dd = __half2float(__float2half_rn(amax / 127.0f));
		float id = amax != 0.0f ? 127.0f / amax : 0.0f;
		q[k0 + lane] = (int8_t)(int)rintf(v * id);
		if (lane == 0)
			d[k0 / 32] = dd;
	} else {
		constexpr int PER = QK / 32;
		/* lane holds 8 consecutive values: 32-groups stay whole per 4 lanes */
		float v[PER];
		const uint8_t *xr = x + (k0 + lane * PER) * nb0;
#pragma unroll
		for (int i = 0; i < PER; i++)
			v[i] = *(const float *)(xr + i * nb0);
		/* the first (lowest index) element of largest magnitude, signed */
		float amax = 0.f, mx = 0.f;
		int idx = 0x7fffffff;
#pragma unroll
		for (int i = 0; i < PER; i++) {
			float a = fabsf(v[i]);
			if (a > amax) {
				amax = a;
				mx = v[i];
				idx = lane * PER + i;
			}
		}
		warp_amax_first(amax, mx, idx);
		float iscale = amax == 0.f ? 0.f : -127.0f / mx;
		float dd = amax == 0.f ? 0.f : 1.0f / iscale;
		uint32_t w[2] = { 0, 0 };
#pragma unroll
		for (int i = 0; i < PER; i++) {
			int qi = amax == 0.f ? 0 : (int)fminf(rintf(iscale * v[i]), 127.0f);
			w[i / 4] |= ((uint32_t)qi & 0xffu) << (8 * (i % 4));
		}
		*(uint2 *)(q + k0 + lane * PER) = make_uint2(w[0], w[1]);
		if (lane < PER)
			d[k0 / 32 + lane] = dd;
	}
}

#endif
