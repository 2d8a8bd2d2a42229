/* pack_layout.cuh — where tensor_pack (pack.cu) puts each byte of a run of
 * 8 blocks, and where the kernels then find a block's fields. Host and
 * device code: backends_test_pack_layout checks on the CPU that the packers'
 * byte maps and the readers' offsets agree for every byte.
 *
 * Packed Q8_0 run (256 values, 272 bytes): block j's 32 quants at 32 j,
 * its fp16 scale at 256 + 2 j.
 * Packed Q6_K run (2048 values, 1680 bytes): super-block j's 192 quant
 * bytes (ql, then qh) at 192 j, its 16 scales at 1536 + 16 j, its fp16 d
 * at 1664 + 2 j. */
#ifndef ALICE_CUDA_PACK_LAYOUT_CUH
#define ALICE_CUDA_PACK_LAYOUT_CUH

#ifdef __CUDACC__
#define PL_HD __host__ __device__
#else
#define PL_HD
#endif

#define PL_Q80_RUN 272
#define PL_Q6K_RUN 1680

PL_HD static inline int pl_q80_q(int j) { return 32 * j; }
PL_HD static inline int pl_q80_d(int j) { return 256 + 2 * j; }
PL_HD static inline int pl_q6k_q(int j) { return 192 * j; }
PL_HD static inline int pl_q6k_sc(int j) { return 1536 + 16 * j; }
PL_HD static inline int pl_q6k_d(int j) { return 1664 + 2 * j; }

/* the original byte of packed byte o of a run (blocks of 34 / 210 bytes:
 * Q8_0 d then 32 quants; Q6_K 192 quant bytes, 16 scales, d) */
PL_HD static inline int pl_q80_src(int o)
{
	return o < 256 ? 34 * (o / 32) + 2 + o % 32 : 34 * ((o - 256) / 2) + (o - 256) % 2;
}

PL_HD static inline int pl_q6k_src(int o)
{
	if (o < 1536)
		return 210 * (o / 192) + o % 192;
	if (o < 1664)
		return 210 * ((o - 1536) / 16) + 192 + (o - 1536) % 16;
	return 210 * ((o - 1664) / 2) + 208 + (o - 1664) % 2;
}

#endif
