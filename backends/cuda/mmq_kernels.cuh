/* mmq_kernels.cuh — the integer tensor-core prefill GEMM's device code
 * (see mmq.cu). Written against a small layer so that the same code also
 * runs on the CPU (MQ_HOST_EMU: tests/backends/test_mmq_emu.cc runs every
 * kernel here on 128 threads per block, with mma emulated from its PTX
 * fragment layout), which lets CI check it without a GPU. */
#ifndef ALICE_CUDA_MMQ_KERNELS_CUH
#define ALICE_CUDA_MMQ_KERNELS_CUH

#ifdef MQ_HOST_EMU
/* the includer defines threadIdx, blockIdx, __syncthreads, pdl_wait,
 * pdl_trigger, kq_acc, ld_b2, the intrinsics used here, mma_k32 / mma_k16,
 * ldsm_x4 / ldsm_x2, cp_async4 / cp_async16 / cp_commit / cp_wait1 and
 * mq_emu_dyn */
#define MQ_FN static inline
#define MQ_HD
#define MQ_KERNEL void
#define MQ_DYN_SMEM(name) uint8_t *name = mq_emu_dyn
#else
#include "common.cuh"
#include "kquant.cuh"
#include "mma.cuh"
#define MQ_FN __device__ static inline
#define MQ_HD __host__ __device__
#define MQ_KERNEL __global__ void __launch_bounds__(128)
#define MQ_DYN_SMEM(name) extern __shared__ __align__(16) uint8_t name[]

__device__ static inline void cp_async4(void *sp, const void *gp)
{
	const uint32_t sa = (uint32_t)__cvta_generic_to_shared(sp);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sa), "l"(gp));
}

/* 16 bytes, or zeros when !valid (gp must still be a valid address) */
__device__ static inline void cp_async16(void *sp, const void *gp, bool valid)
{
	const uint32_t sa = (uint32_t)__cvta_generic_to_shared(sp);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gp), "r"(valid ? 16 : 0));
}

__device__ static inline void cp_commit(void)
{
	asm volatile("cp.async.commit_group;");
}

__device__ static inline void cp_wait1(void)
{
	asm volatile("cp.async.wait_group 1;" ::: "memory");
}

#endif

#define MQ_BM 64
#define MQ_ROW 272 /* bytes per staged row: 256 quants + 16, so fragment loads hit 32 banks */

enum { MQ_K32, MQ_K16, MQ_B32 };

template <int T> struct mq_type;
/* fam: K32 / K16 (Q8_K activations, one super-block per chunk, integer
 * sub-block scales), B32 (Q8_0 activations, 8 blocks per chunk, F32
 * scales); min: a min term; bytes: block size */
template <> struct mq_type<ALICE_TYPE_Q4_K> { static constexpr int fam = MQ_K32, min = 1, bytes = 144; };
template <> struct mq_type<ALICE_TYPE_Q5_K> { static constexpr int fam = MQ_K32, min = 1, bytes = 176; };
template <> struct mq_type<ALICE_TYPE_IQ4_XS> { static constexpr int fam = MQ_K32, min = 0, bytes = 136; };
template <> struct mq_type<ALICE_TYPE_Q6_K> { static constexpr int fam = MQ_K16, min = 0, bytes = 210; };
template <> struct mq_type<ALICE_TYPE_Q3_K> { static constexpr int fam = MQ_K16, min = 0, bytes = 110; };
template <> struct mq_type<ALICE_TYPE_Q2_K> { static constexpr int fam = MQ_K16, min = 1, bytes = 84; };
template <> struct mq_type<ALICE_TYPE_Q4_0> { static constexpr int fam = MQ_B32, min = 0, bytes = 18; };
template <> struct mq_type<ALICE_TYPE_Q4_1> { static constexpr int fam = MQ_B32, min = 1, bytes = 20; };
template <> struct mq_type<ALICE_TYPE_Q5_0> { static constexpr int fam = MQ_B32, min = 0, bytes = 22; };
template <> struct mq_type<ALICE_TYPE_Q5_1> { static constexpr int fam = MQ_B32, min = 1, bytes = 24; };
template <> struct mq_type<ALICE_TYPE_Q8_0> { static constexpr int fam = MQ_B32, min = 0, bytes = 34; };
template <> struct mq_type<ALICE_TYPE_IQ4_NL> { static constexpr int fam = MQ_B32, min = 0, bytes = 18; };

/* bytes of a whole 256-value chunk of a row */
template <int T> MQ_HD constexpr int mq_chunk_bytes()
{
	return mq_type<T>::fam == MQ_B32 ? 8 * mq_type<T>::bytes : mq_type<T>::bytes;
}


/* 4 bytes at a 2-byte aligned address */
MQ_FN uint32_t ld4a(const uint8_t *p)
{
	if (((uintptr_t)p & 3) == 0)
		return *(const uint32_t *)p;
	return ld_b2(p);
}

MQ_FN float ldh(const uint8_t *p)
{
	return __half2float(*(const __half *)p);
}

/* |i| < 2^22 to float without I2F (a quarter-rate conversion) */
MQ_FN float i2f_small(int i)
{
	return __int_as_float(i + 0x4B400000) - 12582912.0f;
}

/* bits 0..3 of b to bytes 0..3, each 0 or 1 */
MQ_FN uint32_t bits4(uint32_t b)
{
	return (b & 1u) | ((b & 2u) << 7) | ((b & 4u) << 14) | ((b & 8u) << 21);
}

/* IQ4_NL / IQ4_XS values of 4 nibbles (one per byte, 0..15) */
MQ_FN uint32_t iq4_lut(uint32_t n)
{
	/* -127 -104 -83 -65 | -49 -35 -22 -10 | 1 13 25 38 | 53 69 89 113 */
	const uint32_t t0 = 0xbfad9881u, t1 = 0xf6eaddcfu, t2 = 0x26190d01u, t3 = 0x71594535u;
	const uint32_t lo3 = n & 0x07070707u;
	const uint32_t sel = (lo3 & 0x7u) | ((lo3 >> 4) & 0x70u) | ((lo3 >> 8) & 0x700u) | ((lo3 >> 12) & 0x7000u);
	const uint32_t a = __byte_perm(t0, t1, sel), b = __byte_perm(t2, t3, sel);
	const uint32_t hi = ((n >> 3) & 0x01010101u) * 0xffu;
	return (a & ~hi) | (b & hi);
}

/* Q4_K / Q5_K scales and mins: 12 bytes -> sc[8], mn[8] */
MQ_FN void k4_scales(const uint8_t *s, int8_t *sc, int8_t *mn)
{
	const uint32_t a = ld4a(s), b = ld4a(s + 4), c = ld4a(s + 8);
	const uint32_t sclo = a & 0x3f3f3f3fu, mlo = b & 0x3f3f3f3fu;
	const uint32_t schi = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
	const uint32_t mhi = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
	*(uint2 *)sc = make_uint2(sclo, schi);
	*(uint2 *)mn = make_uint2(mlo, mhi);
}

/* Values [128 h, 128 h + 128) of a weight row's chunk (its bytes at cb,
 * global or shared memory) as int8 into q (the row's staged values), h == 0
 * (K) / each half's blocks (B32) also the scales. nb: blocks of the chunk
 * inside K (B32). */
template <int T>
MQ_FN void mq_unpack(const uint8_t *__restrict__ cb, int h, int nb, int8_t *q, int8_t *sc,
					int8_t *mn, float *wd, float *wm)
{
	constexpr int BY = mq_type<T>::bytes;
	if constexpr (mq_type<T>::fam != MQ_B32) {
		const uint8_t *b = cb;
		if constexpr (T == ALICE_TYPE_Q4_K || T == ALICE_TYPE_Q5_K) {
			const uint8_t *qs = b + (T == ALICE_TYPE_Q4_K ? 16 : 48);
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const int c = 2 * h + (i >> 1), l0 = 16 * (i & 1);
				const uint4 v = *(const uint4 *)(qs + 32 * c + l0);
				uint4 lo = make_uint4(v.x & 0x0f0f0f0fu, v.y & 0x0f0f0f0fu, v.z & 0x0f0f0f0fu, v.w & 0x0f0f0f0fu);
				uint4 hi = make_uint4((v.x >> 4) & 0x0f0f0f0fu, (v.y >> 4) & 0x0f0f0f0fu,
						      (v.z >> 4) & 0x0f0f0f0fu, (v.w >> 4) & 0x0f0f0f0fu);
				if constexpr (T == ALICE_TYPE_Q5_K) {
					const uint4 qh = *(const uint4 *)(b + 16 + l0);
					const uint32_t s0 = 2 * c, s1 = 2 * c + 1;
					lo.x |= ((qh.x >> s0) & 0x01010101u) << 4;
					lo.y |= ((qh.y >> s0) & 0x01010101u) << 4;
					lo.z |= ((qh.z >> s0) & 0x01010101u) << 4;
					lo.w |= ((qh.w >> s0) & 0x01010101u) << 4;
					hi.x |= ((qh.x >> s1) & 0x01010101u) << 4;
					hi.y |= ((qh.y >> s1) & 0x01010101u) << 4;
					hi.z |= ((qh.z >> s1) & 0x01010101u) << 4;
					hi.w |= ((qh.w >> s1) & 0x01010101u) << 4;
				}
				*(uint4 *)(q + 64 * (i >> 1) + l0) = lo;
				*(uint4 *)(q + 64 * (i >> 1) + 32 + l0) = hi;
			}
			if (h == 0) {
				wd[0] = ldh(b);
				wm[0] = ldh(b + 2);
				k4_scales(b + 4, sc, mn);
			}
		} else if constexpr (T == ALICE_TYPE_IQ4_XS) {
			const uint8_t *qs = b + 8;
#pragma unroll
			for (int i4 = 0; i4 < 4; i4++) { /* blocks are 8-byte aligned */
				const uint2 v0 = *(const uint2 *)(qs + 16 * (4 * h + i4));
				const uint2 v1 = *(const uint2 *)(qs + 16 * (4 * h + i4) + 8);
				const uint32_t w[4] = {v0.x, v0.y, v1.x, v1.y};
#pragma unroll
				for (int i = 0; i < 4; i++) {
					*(uint32_t *)(q + 32 * i4 + 4 * i) = iq4_lut(w[i] & 0x0f0f0f0fu);
					*(uint32_t *)(q + 32 * i4 + 16 + 4 * i) = iq4_lut((w[i] >> 4) & 0x0f0f0f0fu);
				}
			}
			if (h == 0) {
				wd[0] = ldh(b);
				wm[0] = 0.f;
				const uint32_t sh = *(const uint16_t *)(b + 2), sl = *(const uint32_t *)(b + 4);
#pragma unroll
				for (int ib = 0; ib < 8; ib++) {
					const int ls = (int)((sl >> (4 * ib)) & 0xf) | (int)(((sh >> (2 * ib)) & 3) << 4);
					sc[ib] = (int8_t)(ls - 32);
				}
			}
		} else if constexpr (T == ALICE_TYPE_Q6_K) {
			/* half h: ql[64 h ..], qh[32 h ..], values 128 h + 32 part + l */
#pragma unroll
			for (int l = 0; l < 32; l += 4) {
				const uint32_t ql0 = ld4a(b + 64 * h + l), ql1 = ld4a(b + 64 * h + 32 + l);
				const uint32_t qh = ld4a(b + 128 + 32 * h + l);
#pragma unroll
				for (int part = 0; part < 4; part++) {
					const uint32_t ql = (part & 1) ? ql1 : ql0;
					const uint32_t nib = (part >> 1) ? (ql >> 4) & 0x0f0f0f0fu : ql & 0x0f0f0f0fu;
					const uint32_t v = nib | (((qh >> (2 * part)) & 0x03030303u) << 4);
					*(uint32_t *)(q + 32 * part + l) = (uint32_t)__vsubss4((int)v, 0x20202020);
				}
			}
			*(uint2 *)(sc + 8 * h) = make_uint2(ld4a(b + 192 + 8 * h), ld4a(b + 196 + 8 * h));
			if (h == 0) {
				wd[0] = ldh(b + 208);
				wm[0] = 0.f;
			}
		} else if constexpr (T == ALICE_TYPE_Q3_K) {
			/* hmask[32], qs[64], scales[12], d */
#pragma unroll
			for (int l = 0; l < 32; l += 4) {
				const uint32_t qw = ld4a(b + 32 + 32 * h + l), hw = ld4a(b + l);
#pragma unroll
				for (int j = 0; j < 4; j++) {
					const uint32_t v = ((qw >> (2 * j)) & 0x03030303u) |
							   (((hw >> (4 * h + j)) & 0x01010101u) << 2);
					*(uint32_t *)(q + 32 * j + l) = (uint32_t)__vsubss4((int)v, 0x04040404);
				}
			}
			if (h == 0) {
				const uint32_t a0 = ld4a(b + 96), a1 = ld4a(b + 100), tmp = ld4a(b + 104);
				const uint32_t s0 = (a0 & 0x0f0f0f0fu) | ((tmp & 0x03030303u) << 4);
				const uint32_t s1 = (a1 & 0x0f0f0f0fu) | (((tmp >> 2) & 0x03030303u) << 4);
				const uint32_t s2 = ((a0 >> 4) & 0x0f0f0f0fu) | (((tmp >> 4) & 0x03030303u) << 4);
				const uint32_t s3 = ((a1 >> 4) & 0x0f0f0f0fu) | (((tmp >> 6) & 0x03030303u) << 4);
				*(uint4 *)sc = make_uint4((uint32_t)__vsubss4((int)s0, 0x20202020),
							  (uint32_t)__vsubss4((int)s1, 0x20202020),
							  (uint32_t)__vsubss4((int)s2, 0x20202020),
							  (uint32_t)__vsubss4((int)s3, 0x20202020));
				wd[0] = ldh(b + 108);
				wm[0] = 0.f;
			}
		} else { /* Q2_K: scales[16], qs[64], d, dmin */
#pragma unroll
			for (int l = 0; l < 32; l += 4) {
				const uint32_t qw = ld4a(b + 16 + 32 * h + l);
#pragma unroll
				for (int j = 0; j < 4; j++)
					*(uint32_t *)(q + 32 * j + l) = (qw >> (2 * j)) & 0x03030303u;
			}
			const uint32_t s0 = ld4a(b + 8 * h), s1 = ld4a(b + 8 * h + 4);
			*(uint2 *)(sc + 8 * h) = make_uint2(s0 & 0x0f0f0f0fu, s1 & 0x0f0f0f0fu);
			*(uint2 *)(mn + 8 * h) = make_uint2((s0 >> 4) & 0x0f0f0f0fu, (s1 >> 4) & 0x0f0f0f0fu);
			if (h == 0) {
				wd[0] = ldh(b + 80);
				wm[0] = ldh(b + 82);
			}
		}
	} else {
		/* blocks 4h .. 4h+3 of the chunk: 32 values each */
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int ib = 4 * h + i;
			int8_t *o = q + 32 * i;
			if (ib >= nb) {
				*(uint4 *)o = make_uint4(0, 0, 0, 0);
				*(uint4 *)(o + 16) = make_uint4(0, 0, 0, 0);
				wd[ib] = 0.f;
				wm[ib] = 0.f;
				continue;
			}
			const uint8_t *b = cb + ib * BY;
			wd[ib] = ldh(b);
			wm[ib] = mq_type<T>::min ? ldh(b + 2) : 0.f;
			if constexpr (T == ALICE_TYPE_Q8_0) {
#pragma unroll
				for (int k = 0; k < 32; k += 4)
					*(uint32_t *)(o + k) = ld4a(b + 2 + k);
			} else {
				constexpr int QS = (T == ALICE_TYPE_Q4_0 || T == ALICE_TYPE_IQ4_NL) ? 2
						   : T == ALICE_TYPE_Q4_1			    ? 4
						   : T == ALICE_TYPE_Q5_0			    ? 6
											    : 8;
				uint32_t qh = 0;
				if constexpr (T == ALICE_TYPE_Q5_0 || T == ALICE_TYPE_Q5_1)
					qh = ld4a(b + QS - 4);
#pragma unroll
				for (int k = 0; k < 16; k += 4) {
					const uint32_t v = ld4a(b + QS + k);
					uint32_t lo = v & 0x0f0f0f0fu, hi = (v >> 4) & 0x0f0f0f0fu;
					if constexpr (T == ALICE_TYPE_Q5_0 || T == ALICE_TYPE_Q5_1) {
						lo |= bits4(qh >> k) << 4;
						hi |= bits4(qh >> (k + 16)) << 4;
					}
					if constexpr (T == ALICE_TYPE_Q4_0) {
						lo = (uint32_t)__vsubss4((int)lo, 0x08080808);
						hi = (uint32_t)__vsubss4((int)hi, 0x08080808);
					} else if constexpr (T == ALICE_TYPE_IQ4_NL) {
						lo = iq4_lut(lo);
						hi = iq4_lut(hi);
					} else if constexpr (T == ALICE_TYPE_Q5_0) {
						lo = (uint32_t)__vsubss4((int)lo, 0x10101010);
						hi = (uint32_t)__vsubss4((int)hi, 0x10101010);
					}
					*(uint32_t *)(o + k) = lo;
					*(uint32_t *)(o + 16 + k) = hi;
				}
			}
		}
	}
}

/* the weight tile of a chunk, unpacked */
struct mq_wtile {
	int8_t w[MQ_BM][MQ_ROW]; /* weight quants as int8 values */
	int8_t sc[MQ_BM][16];    /* K-quants: sub-block scales (16 or 8 used) */
	int8_t mn[MQ_BM][16];    /* K-quants: sub-block mins */
	float wd[MQ_BM][8];      /* K: [0] d; B32: each block's d */
	float wm[MQ_BM][8];      /* K: [0] dmin; B32: each block's m */
};

/* One chunk's products into acc: warp tile rows r0 .. r0 + 32, columns
 * c0 .. c0 + BN/2 of the block tile; X / XD / XS: the chunk's activation
 * quants, their scales and Q8_1 sums. */
template <int T, int BN>
MQ_FN void mq_chunk(const mq_wtile &W, const int8_t (*X)[MQ_ROW], const float (*XD)[8],
				       const float (*XS)[8], int r0, int c0, int g, int t, float (&acc)[2][BN / 16][4])
{
	constexpr int FAM = mq_type<T>::fam, MIN = mq_type<T>::min, NT = BN / 16;
	/* fragments by ldmatrix (mma.cuh): lane l = 4 g + t addresses row
	 * l & 7 of matrix l >> 3 */
	const int l = 4 * g + t, lr = l & 7, lq = l >> 3;
	if constexpr (FAM == MQ_K32 || FAM == MQ_K16) {
		int sumi[2][NT][4], summ[2][NT][4];
#pragma unroll
		for (int mt = 0; mt < 2; mt++)
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					sumi[mt][nt][e] = summ[mt][nt][e] = 0;
		constexpr int NS = FAM == MQ_K32 ? 8 : 16, SW = 256 / NS;
#pragma unroll 2
		for (int j = 0; j < NS; j++) {
			uint32_t b[NT][2];
#pragma unroll
			for (int nt = 0; nt < NT; nt += 2) {
				if constexpr (FAM == MQ_K32) /* (nt, k 0-15), (nt, k 16-31), (nt + 1, ...) */
					ldsm_x4(X[c0 + 8 * (nt + (lq >> 1)) + lr] + SW * j + 16 * (lq & 1), b[nt][0], b[nt][1],
						b[nt + 1][0], b[nt + 1][1]);
				else
					ldsm_x2(X[c0 + 8 * (nt + (lq & 1)) + lr] + SW * j, b[nt][0], b[nt + 1][0]);
			}
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				const int ra = r0 + 16 * mt + g, rb = ra + 8;
				uint32_t a0, a1, a2 = 0, a3 = 0;
				const int8_t *pl = W.w[r0 + 16 * mt + 8 * (lq & 1) + lr] + SW * j + 16 * (lq >> 1);
				if constexpr (FAM == MQ_K32)
					ldsm_x4(pl, a0, a1, a2, a3);
				else
					ldsm_x2(pl, a0, a1);
				const int sa = W.sc[ra][j], sb = W.sc[rb][j];
				uint32_t ma = 0, mb = 0;
				if constexpr (MIN) {
					ma = (uint32_t)(uint8_t)W.mn[ra][j] * 0x01010101u;
					mb = (uint32_t)(uint8_t)W.mn[rb][j] * 0x01010101u;
				}
#pragma unroll
				for (int nt = 0; nt < NT; nt++) {
					int cq[4] = {0, 0, 0, 0};
					if constexpr (FAM == MQ_K32) {
						mma_k32(cq, a0, a1, a2, a3, b[nt][0], b[nt][1]);
						if constexpr (MIN)
							mma_k32(summ[mt][nt], ma, mb, ma, mb, b[nt][0], b[nt][1]);
					} else {
						mma_k16(cq, a0, a1, b[nt][0]);
						if constexpr (MIN)
							mma_k16(summ[mt][nt], ma, mb, b[nt][0]);
					}
					sumi[mt][nt][0] += sa * cq[0];
					sumi[mt][nt][1] += sa * cq[1];
					sumi[mt][nt][2] += sb * cq[2];
					sumi[mt][nt][3] += sb * cq[3];
				}
			}
		}
#pragma unroll
		for (int mt = 0; mt < 2; mt++) {
			const int ra = r0 + 16 * mt + g, rb = ra + 8;
			const float da = W.wd[ra][0], db = W.wd[rb][0];
			const float ma = W.wm[ra][0], mb = W.wm[rb][0];
#pragma unroll
			for (int nt = 0; nt < NT; nt++) {
				const float xa = XD[c0 + 8 * nt + 2 * t][0], xb = XD[c0 + 8 * nt + 2 * t + 1][0];
				acc[mt][nt][0] = kq_acc(acc[mt][nt][0], da, ma, xa, sumi[mt][nt][0], summ[mt][nt][0]);
				acc[mt][nt][1] = kq_acc(acc[mt][nt][1], da, ma, xb, sumi[mt][nt][1], summ[mt][nt][1]);
				acc[mt][nt][2] = kq_acc(acc[mt][nt][2], db, mb, xa, sumi[mt][nt][2], summ[mt][nt][2]);
				acc[mt][nt][3] = kq_acc(acc[mt][nt][3], db, mb, xb, sumi[mt][nt][3], summ[mt][nt][3]);
			}
		}
	} else {
#pragma unroll 2
		for (int j = 0; j < 8; j++) {
			uint32_t b[NT][2];
			float xa[NT], xb[NT], sa[NT], sb[NT];
#pragma unroll
			for (int nt = 0; nt < NT; nt += 2)
				ldsm_x4(X[c0 + 8 * (nt + (lq >> 1)) + lr] + 32 * j + 16 * (lq & 1), b[nt][0], b[nt][1],
					b[nt + 1][0], b[nt + 1][1]);
#pragma unroll
			for (int nt = 0; nt < NT; nt++) {
				xa[nt] = XD[c0 + 8 * nt + 2 * t][j];
				xb[nt] = XD[c0 + 8 * nt + 2 * t + 1][j];
				if constexpr (MIN) {
					sa[nt] = XS[c0 + 8 * nt + 2 * t][j];
					sb[nt] = XS[c0 + 8 * nt + 2 * t + 1][j];
				}
			}
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				const int ra = r0 + 16 * mt + g, rb = ra + 8;
				uint32_t a0, a1, a2, a3;
				ldsm_x4(W.w[r0 + 16 * mt + 8 * (lq & 1) + lr] + 32 * j + 16 * (lq >> 1), a0, a1, a2, a3);
				const float da = W.wd[ra][j], db = W.wd[rb][j];
				const float ma = W.wm[ra][j], mb = W.wm[rb][j];
#pragma unroll
				for (int nt = 0; nt < NT; nt++) {
					int cq[4] = {0, 0, 0, 0};
					mma_k32(cq, a0, a1, a2, a3, b[nt][0], b[nt][1]);
					acc[mt][nt][0] = __fmaf_rn(__fmul_rn(da, xa[nt]), i2f_small(cq[0]), acc[mt][nt][0]);
					acc[mt][nt][1] = __fmaf_rn(__fmul_rn(da, xb[nt]), i2f_small(cq[1]), acc[mt][nt][1]);
					acc[mt][nt][2] = __fmaf_rn(__fmul_rn(db, xa[nt]), i2f_small(cq[2]), acc[mt][nt][2]);
					acc[mt][nt][3] = __fmaf_rn(__fmul_rn(db, xb[nt]), i2f_small(cq[3]), acc[mt][nt][3]);
					if constexpr (MIN) {
						acc[mt][nt][0] = __fmaf_rn(ma, sa[nt], acc[mt][nt][0]);
						acc[mt][nt][1] = __fmaf_rn(ma, sb[nt], acc[mt][nt][1]);
						acc[mt][nt][2] = __fmaf_rn(mb, sa[nt], acc[mt][nt][2]);
						acc[mt][nt][3] = __fmaf_rn(mb, sb[nt], acc[mt][nt][3]);
					}
				}
			}
		}
	}
}

template <int T>
MQ_FN void mq_zero(float (&acc)[2][T][4])
{
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < T; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[mt][nt][e] = 0.f;
}

template <int BN>
MQ_FN void mq_store(const float (&acc)[2][BN / 16][4], int64_t row0, int64_t col0, int r0, int c0,
				       int g, int t, int64_t N, int64_t M, float *__restrict__ dst, int64_t dcs)
{
	constexpr int NT = BN / 16;
	/* element (mt, nt, e): row r0 + 16 mt + g + 8 (e >> 1), column c0 + 8 nt + 2 t + (e & 1) */
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int64_t row = row0 + r0 + 16 * mt + g + 8 * (e >> 1);
				const int64_t col = col0 + c0 + 8 * nt + 2 * t + (e & 1);
				if (row < N && col < M)
					dst[row + col * dcs] = acc[mt][nt][e];
			}
}

/* ---- staging: cp.async into two stages ---- */

/* a row's raw chunk in shared memory: Q4_K / Q5_K as 16-byte pieces, the
 * others as the 4-byte words around its bytes (blocks of 2-aligned types
 * keep their address mod 4); rows 16-byte aligned. Sized per type, so
 * that three blocks fit an SM's shared memory where they can. */
template <int T> MQ_HD constexpr int mq_raw_bytes()
{
	return T == ALICE_TYPE_Q4_K || T == ALICE_TYPE_Q5_K ? mq_chunk_bytes<T>()
							    : ((mq_chunk_bytes<T>() + 2 + 3) / 4 * 4 + 15) / 16 * 16;
}

template <int T, int BN> struct mq_stage {
	uint8_t raw[MQ_BM][mq_raw_bytes<T>()];
	int8_t x[BN][MQ_ROW];
	float xd[BN][8], xs[BN][8];
};

template <int T, int BN> struct mq_smem {
	mq_stage<T, BN> st[2];
	mq_wtile W;
};

/* chunk ch of the block's rows and columns into stage st, as cp.async */
template <int T, int BN>
MQ_FN void mq_issue(mq_stage<T, BN> &st, const uint8_t *__restrict__ w, int64_t wnb1, int64_t N,
				       int64_t row0, const int8_t *__restrict__ xq, const float *__restrict__ xdq,
				       const float *__restrict__ xsq, int64_t K, int64_t M, int64_t col0, int64_t ch,
				       int tid)
{
	constexpr int FAM = mq_type<T>::fam, MIN = mq_type<T>::min, CB = mq_chunk_bytes<T>();
	const int64_t nkb = K / 32;
	const int nb = (int)(nkb - ch * 8 < 8 ? nkb - ch * 8 : 8);
	const int len = FAM == MQ_B32 ? nb * mq_type<T>::bytes : CB;
	if constexpr (CB % 16 == 0 && (T == ALICE_TYPE_Q4_K || T == ALICE_TYPE_Q5_K)) {
		constexpr int NP = CB / 16;
		for (int i = tid; i < MQ_BM * NP; i += 128) {
			const int r = i / NP, p = i % NP;
			const int64_t gr = row0 + r < N ? row0 + r : N - 1;
			cp_async16(st.raw[r] + 16 * p, w + gr * wnb1 + ch * CB + 16 * p, true);
		}
	} else {
		/* words of [start & ~3, start + len); the last is copied by hand
		 * when it would run past the chunk (2-aligned blocks) */
		constexpr int NP = (CB + 2 + 3) / 4;
		for (int i = tid; i < MQ_BM * NP; i += 128) {
			const int r = i / NP, p = i % NP;
			const int64_t gr = row0 + r < N ? row0 + r : N - 1;
			const uint8_t *start = w + gr * wnb1 + ch * CB;
			const int o = (int)((uintptr_t)start & 3);
			const uint8_t *wp = start - o + 4 * p;
			if (4 * p + 4 <= o + len)
				cp_async4(st.raw[r] + 4 * p, wp);
			else if (4 * p < o + len) /* 2 bytes left */
				*(uint16_t *)(st.raw[r] + 4 * p) = *(const uint16_t *)wp;
		}
	}
	for (int i = tid; i < BN * 16; i += 128) {
		const int c = i >> 4, p = i & 15;
		const int64_t col = col0 + c < M ? col0 + c : M - 1;
		const int64_t k = ch * 256 + 16 * p;
		cp_async16(st.x[c] + 16 * p, xq + col * K + (k < K ? k : 0), k < K);
	}
	for (int i = tid; i < BN * 8; i += 128) {
		const int c = i >> 3, p = i & 7;
		const int64_t col = col0 + c < M ? col0 + c : M - 1;
		if (FAM == MQ_B32 || p == 0) {
			if (p < nb)
				cp_async4(&st.xd[c][p], xdq + col * nkb + ch * 8 + p);
			else
				st.xd[c][p] = 0.f;
		}
		if (MIN && FAM == MQ_B32) {
			if (p < nb)
				cp_async4(&st.xs[c][p], xsq + col * nkb + ch * 8 + p);
			else
				st.xs[c][p] = 0.f;
		}
	}
}

/* grid: x = BN-column tile, y = 64-row tile, z = split of K (cps chunks
 * each; with more than one split, split z's sums go to dst + z * zs and
 * k_mmq_reduce adds them). 4 warps: warp w takes rows 32 (w >> 1) .. + 32
 * and columns BN/2 (w & 1) .. + BN/2 of the tile. Chunk ch + 1's bytes are
 * copied by cp.async while chunk ch is unpacked and multiplied (two
 * stages; dynamic shared memory). */
template <int T, int BN>
MQ_KERNEL k_mmq(const uint8_t *__restrict__ w, int64_t wnb1, int64_t N,
						   const int8_t *__restrict__ xq, const float *__restrict__ xdq,
						   const float *__restrict__ xsq, int64_t K, int64_t M,
						   float *__restrict__ dst, int64_t dcs, int64_t cps, int64_t zs)
{
	constexpr int NT = BN / 16;
	MQ_DYN_SMEM(mq_dyn);
	mq_smem<T, BN> &sm = *(mq_smem<T, BN> *)mq_dyn;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int64_t row0 = (int64_t)blockIdx.y * MQ_BM, col0 = (int64_t)blockIdx.x * BN;
	const int r0 = 32 * (warp >> 1), c0 = (BN / 2) * (warp & 1);
	const int64_t ch0 = (int64_t)blockIdx.z * cps, nkb = K / 32;
	const int64_t nch = (K + 255) / 256 < ch0 + cps ? (K + 255) / 256 : ch0 + cps;
	const int ur = tid >> 1, uh = tid & 1;
	const int64_t gr = row0 + ur < N ? row0 + ur : N - 1;
	pdl_wait();
	pdl_trigger();
	float acc[2][NT][4];
	mq_zero<NT>(acc);
	mq_issue<T, BN>(sm.st[0], w, wnb1, N, row0, xq, xdq, xsq, K, M, col0, ch0, tid);
	cp_commit();
	for (int64_t ch = ch0; ch < nch; ch++) {
		if (ch + 1 < nch)
			mq_issue<T, BN>(sm.st[(ch + 1 - ch0) & 1], w, wnb1, N, row0, xq, xdq, xsq, K, M, col0, ch + 1, tid);
		cp_commit();
		cp_wait1();
		__syncthreads();
		mq_stage<T, BN> &st = sm.st[(ch - ch0) & 1];
		const int nb = (int)(nkb - ch * 8 < 8 ? nkb - ch * 8 : 8);
		const int o = (int)((uintptr_t)(w + gr * wnb1 + ch * mq_chunk_bytes<T>()) & 3);
		mq_unpack<T>(st.raw[ur] + o, uh, nb, sm.W.w[ur] + 128 * uh, sm.W.sc[ur], sm.W.mn[ur], sm.W.wd[ur],
			     sm.W.wm[ur]);
		__syncthreads();
		mq_chunk<T, BN>(sm.W, st.x, st.xd, st.xs, r0, c0, g, t, acc);
		__syncthreads();
	}
	mq_store<BN>(acc, row0, col0, r0, c0, g, t, N, M, dst + (int64_t)blockIdx.z * zs, dcs);
}

/* the splits' sums of element i (row i % N, column i / N; split stride
 * N M), added in split order: a fixed order for a given split count */
MQ_KERNEL k_mmq_reduce(const float *__restrict__ part, int S, int64_t N, int64_t M, float *__restrict__ dst,
		       int64_t dcs)
{
	pdl_wait();
	pdl_trigger();
	const int64_t i = (int64_t)blockIdx.x * 128 + threadIdx.x;
	if (i >= N * M)
		return;
	float v = part[i];
	for (int z = 1; z < S; z++)
		v = __fadd_rn(v, part[i + (int64_t)z * N * M]);
	dst[i % N + i / N * dcs] = v;
}


#endif
