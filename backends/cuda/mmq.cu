/* mmq.cu — prefill MUL_MAT for quantized weights on integer tensor cores.
 *
 * The arithmetic of llama.cpp's CPU dot products, not a dequantize-to-F16
 * GEMM: activations are quantized as the CPU quantizes them for the weight
 * type (Q8_K blocks for the K-quants and IQ4_XS, Q8_0 blocks for the
 * 32-blocks; cu_xq_quant), weight and activation quants are multiplied
 * exactly in int32 by mma, and only the scales are floats:
 *   K-quants: per super-block, sumi = sum_j sc_j dot_j and summ = sum_j m_j
 *     bsum_j as integers (exact), then the one float term of kq_acc
 *     (kquant.cuh), as the mat-vecs compute it;
 *   32-blocks: per block (d_w d_x) dot (+ m_w s_x for Q4_1 / Q5_1, s_x the
 *     Q8_1 block sum, fp16(d_x sum q_x)), as ggml's generic dots.
 * Each output is owned by one thread, which adds its terms in K order, so
 * a column's result does not depend on M, the tile shape or the launch.
 *
 * Per 256-value chunk of K a block of 4 warps unpacks 64 weight rows to
 * int8 in shared memory (mq_unpack: one layout for every type, with the
 * scales beside it) and stages BN columns of activation quants; warps take
 * 32 x BN/2 tiles with m16n8k32 (sub-blocks of 32) or m16n8k16 (Q6_K,
 * Q3_K, Q2_K: sub-blocks of 16) mma. */
#include "mmq_kernels.cuh"

/* ---- host side ---- */

/* ALICE_CUDA_MMQ=1 / 0 turns it on / off; unset: MQ_DEFAULT. Off: on the
 * H100 it is exact to the CPU arithmetic (backends_test_mm_prefill) but
 * 2-3x slower than the F16 GEMM at M = 512 (bench/RESULTS.md, session
 * 15); scripts/device/mmq_run.sh measures it against that GEMM. */
#define MQ_DEFAULT 0
static int mmq_off(void)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("ALICE_CUDA_MMQ");
		off = e && e[0] ? e[0] == '0' : !MQ_DEFAULT;
	}
	return off;
}

template <typename F>
static bool mq_dispatch(uint32_t type, F &&f)
{
	switch (type) {
	case ALICE_TYPE_Q4_K: f.template operator()<ALICE_TYPE_Q4_K>(); return true;
	case ALICE_TYPE_Q5_K: f.template operator()<ALICE_TYPE_Q5_K>(); return true;
	case ALICE_TYPE_IQ4_XS: f.template operator()<ALICE_TYPE_IQ4_XS>(); return true;
	case ALICE_TYPE_Q6_K: f.template operator()<ALICE_TYPE_Q6_K>(); return true;
	case ALICE_TYPE_Q3_K: f.template operator()<ALICE_TYPE_Q3_K>(); return true;
	case ALICE_TYPE_Q2_K: f.template operator()<ALICE_TYPE_Q2_K>(); return true;
	case ALICE_TYPE_Q4_0: f.template operator()<ALICE_TYPE_Q4_0>(); return true;
	case ALICE_TYPE_Q4_1: f.template operator()<ALICE_TYPE_Q4_1>(); return true;
	case ALICE_TYPE_Q5_0: f.template operator()<ALICE_TYPE_Q5_0>(); return true;
	case ALICE_TYPE_Q5_1: f.template operator()<ALICE_TYPE_Q5_1>(); return true;
	case ALICE_TYPE_Q8_0: f.template operator()<ALICE_TYPE_Q8_0>(); return true;
	case ALICE_TYPE_IQ4_NL: f.template operator()<ALICE_TYPE_IQ4_NL>(); return true;
	default: return false;
	}
}

static bool mq_kquant(uint32_t type)
{
	return type == ALICE_TYPE_Q4_K || type == ALICE_TYPE_Q5_K || type == ALICE_TYPE_IQ4_XS ||
	       type == ALICE_TYPE_Q6_K || type == ALICE_TYPE_Q3_K || type == ALICE_TYPE_Q2_K;
}

bool cu_mmq_ok(const struct alice_tensor *w, const uint8_t *wb)
{
	/* packed weights (pack.cu) keep the dequantize + GEMM path */
	if (mmq_off() || (w->flags & ALICE_TENSOR_PACKED) || !(mq_kquant(w->type) || w->type == ALICE_TYPE_Q4_0 || w->type == ALICE_TYPE_Q4_1 ||
			   w->type == ALICE_TYPE_Q5_0 || w->type == ALICE_TYPE_Q5_1 || w->type == ALICE_TYPE_Q8_0 ||
			   w->type == ALICE_TYPE_IQ4_NL))
		return false;
	const int64_t K = w->ne[0];
	if (K % (mq_kquant(w->type) ? 256 : 32) != 0)
		return false;
	/* 16-byte loads of Q4_K / Q5_K quants, 8-byte of IQ4_XS (136-byte
	 * blocks); every other field is read in 2-byte aligned pieces */
	uintptr_t al = (w->type == ALICE_TYPE_Q4_K || w->type == ALICE_TYPE_Q5_K) ? 15
		       : w->type == ALICE_TYPE_IQ4_XS				  ? 7
										  : 1;
	return ((uintptr_t)wb & al) == 0 && ((uintptr_t)w->nb[1] & al) == 0;
}

enum alice_status cu_mmq(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const uint8_t *wb,
			 const uint8_t *x, int64_t xnb0, int64_t xnb1, float *dst, int64_t dcs, int64_t M)
{
	const int64_t K = w->ne[0], N = w->ne[1];
	int8_t *q;
	float *d;
	const bool q81 = w->type == ALICE_TYPE_Q4_1 || w->type == ALICE_TYPE_Q5_1;
	enum alice_status st = cu_xq_quant(ctx, x, xnb0, xnb1, K, M, mq_kquant(w->type) ? 256 : q81 ? 33 : 32, &q, &d);
	if (st != ALICE_OK)
		return st;
	const float *sums = d + K / 32 * cu_xq_cols(M);
	/* 64-column tiles when they fill the GPU twice over, else 32 (more
	 * blocks); a column's result is the same in either */
	const int64_t rt = (N + MQ_BM - 1) / MQ_BM;
	static int force_bn = -1; /* ALICE_CUDA_MMQ_BN=32|64: comparisons */
	if (force_bn < 0) {
		const char *e = getenv("ALICE_CUDA_MMQ_BN");
		force_bn = e ? atoi(e) : 0;
	}
	const bool wide = force_bn ? force_bn == 64 : rt * ((M + 63) / 64) >= 2 * 132;
	const int64_t bn = wide ? 64 : 32;
	dim3 grid((unsigned)((M + bn - 1) / bn), (unsigned)rt);
	cudaStream_t s = ctx->stream;
	const int64_t wnb1 = w->nb[1];
	bool ok = true;
	mq_dispatch(w->type, [&]<int T>() {
		const float *dd = d;
		/* more than the 48 KB of static shared memory: opted in once per kernel */
		static bool opt64 = false, opt32 = false;
		if (wide && !opt64)
			opt64 = cudaFuncSetAttribute(k_mmq<T, 64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
						     (int)sizeof(mq_smem<64>)) == cudaSuccess;
		if (!wide && !opt32)
			opt32 = cudaFuncSetAttribute(k_mmq<T, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
						     (int)sizeof(mq_smem<32>)) == cudaSuccess;
		ok = wide ? opt64 : opt32;
		if (!ok)
			return;
		if (wide)
			cu_launch_smem(k_mmq<T, 64>, grid, 128, sizeof(mq_smem<64>), s, wb, wnb1, N, q, dd, sums, K, M,
				       dst, dcs);
		else
			cu_launch_smem(k_mmq<T, 32>, grid, 128, sizeof(mq_smem<32>), s, wb, wnb1, N, q, dd, sums, K, M,
				       dst, dcs);
	});
	if (!ok)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "mmq: cannot opt in to %zu bytes of shared memory",
			       sizeof(mq_smem<64>));
	CUDA_LAUNCH_CHECK(ctx, "mmq");
	return ALICE_OK;
}
