/* kquant.cuh — what every K-quant decode kernel (mmvq.cu's mat-vecs,
 * mmvq_tc.cu's tensor-core tiles) must compute the same way, so a column's
 * result never depends on which kernel took it. */
#ifndef ALICE_CUDA_KQUANT_CUH
#define ALICE_CUDA_KQUANT_CUH

#include <stdint.h>

/* one super-block's term of a row's sum, from its exact integer sums:
 * Q4_K d d8 sumi - dmin d8 summ (Q6_K: summ = 0, dmin = 0); rounding fixed
 * by intrinsics so no kernel contracts it differently */
__device__ static inline float kq_acc(float acc, float d, float dmin, float d8, int sumi, int summ)
{
	float t = __fmaf_rn(__fmul_rn(d, d8), (float)sumi, -__fmul_rn(__fmul_rn(dmin, d8), (float)summ));
	return __fadd_rn(acc, t);
}

/* 4 bytes from a 2-byte aligned address (Q6_K / Q8_0 blocks) */
__device__ static inline uint32_t ld_b2(const uint8_t *p)
{
	const uint16_t *h = (const uint16_t *)p;
	return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

#endif
