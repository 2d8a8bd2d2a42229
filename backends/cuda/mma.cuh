/* mma.cuh — integer tensor-core mma (s8 x s8 -> s32) for the batched
 * decode mat-vec (mmvq_tc.cu) and the prefill GEMM (mmq_kernels.cuh).
 * Fragments (lane 4 g + t): A rows g (a0, a2) and g + 8 (a1, a3), k slots
 * 4t .. 4t + 3 (a0, a1) and 16 + 4t .. (a2, a3); B column g, the same k
 * slots (b0, b1); C rows g (c0, c1) and g + 8 (c2, c3), columns 2t, 2t + 1.
 * m16n8k16: a0 / a1 and b0 only. */
#ifndef ALICE_CUDA_MMA_CUH
#define ALICE_CUDA_MMA_CUH

#include <stdint.h>

__device__ static inline void mma_k32(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
				      uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
		     "{%0,%1,%2,%3};"
		     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ static inline void mma_k16(int *c, uint32_t a0, uint32_t a1, uint32_t b0)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
		     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		     : "r"(a0), "r"(a1), "r"(b0));
#endif
}

/* ldmatrix .x4 / .x2 (b16 8 x 8 matrices): lane 8 q + r gives the address
 * of row r of matrix q (16 bytes, shared memory); lane 4 g + t gets bytes
 * 4t .. 4t + 3 of row g of each matrix, matrix q in register q. So with
 * matrices (rows 0-7, k 0-15), (rows 8-15, k 0-15), (rows 0-7, k 16-31),
 * (rows 8-15, k 16-31) it loads an m16n8k32 A fragment. */
__device__ static inline void ldsm_x4(const void *p, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
		     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
		     : "r"(a));
}

__device__ static inline void ldsm_x2(const void *p, uint32_t &r0, uint32_t &r1)
{
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(a));
}

#endif
