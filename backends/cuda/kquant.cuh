/* kquant.cuh — what every K-quant decode kernel (mmvq.cu's mat-vecs,
 * mmvq_tc.cu's tensor-core tiles) must compute the same way, so a column's
 * result never depends on which kernel took it. */
#ifndef ALICE_CUDA_KQUANT_CUH
#define ALICE_CUDA_KQUANT_CUH

#include <stdint.h>

#include "pack_layout.cuh"

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

/* Q6_K super-block sb of a row: its 192 quant bytes (ql, then qh), 16
 * int8 scales and fp16 d. Packed (P, T_Q6_KP of pack.cu): per run of 8
 * super-blocks, the 8 quant parts (16-byte aligned), then the 8 scale
 * parts, then the 8 d's; the same bytes, so the same arithmetic. */
struct q6blk {
	const uint8_t *q, *sc, *d;
};
template <bool P>
__device__ static inline q6blk q6_at(const uint8_t *row, int64_t sb)
{
	if constexpr (P) {
		const uint8_t *r = row + (sb >> 3) * PL_Q6K_RUN;
		const int j = (int)(sb & 7);
		return q6blk{ r + pl_q6k_q(j), r + pl_q6k_sc(j), r + pl_q6k_d(j) };
	} else {
		const uint8_t *b = row + sb * 210;
		return q6blk{ b, b + 192, b + 208 };
	}
}

/* 4 quant bytes at q + o (o % 4 == 0): one load when packed */
template <bool P>
__device__ static inline uint32_t q6_ld4(const uint8_t *q, int o)
{
	if constexpr (P)
		return *(const uint32_t *)(q + o);
	else
		return ld_b2(q + o);
}

#endif
