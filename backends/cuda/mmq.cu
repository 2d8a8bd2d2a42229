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
 * Each output is owned by one thread, which adds its terms in K order
 * (with K in splits, each split's; k_mmq_reduce then adds the splits in
 * order; the split count is a function of N and K), so a column's result
 * depends on its own inputs only: not on M, the tile width or the launch.
 *
 * Per 256-value chunk of K a block of 4 warps unpacks 64 weight rows to
 * int8 in shared memory (mq_unpack: one layout for every type, with the
 * scales beside it) and stages BN columns of activation quants; warps take
 * 32 x BN/2 tiles with m16n8k32 (sub-blocks of 32) or m16n8k16 (Q6_K,
 * Q3_K, Q2_K: sub-blocks of 16) mma. */
#include "mmq_kernels.cuh"

/* ---- host side ---- */

/* The column runs it takes: at most MQ_MAX_M columns by default (it is
 * exact to the CPU arithmetic, backends_test_mm_prefill, but slower than
 * the F16 GEMM at M = 512: bench/RESULTS.md, sessions 15 and 27).
 * ALICE_CUDA_MMQ=1 / 0: every run / none; ALICE_CUDA_MMQ_MAXM=n: runs of
 * at most n (comparisons). scripts/device/prefill_prof.sh measures it. */
#define MQ_MAX_M 0
static int64_t mmq_max_m(void)
{
	static int64_t mx = -1;
	if (mx < 0) {
		const char *e = getenv("ALICE_CUDA_MMQ"), *m = getenv("ALICE_CUDA_MMQ_MAXM");
		mx = e && e[0] ? (e[0] == '0' ? 0 : INT64_MAX) : m && atoll(m) > 0 ? atoll(m) : MQ_MAX_M;
	}
	return mx;
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

bool cu_mmq_ok(const struct alice_tensor *w, const uint8_t *wb, int64_t M)
{
	/* packed weights (pack.cu) keep the dequantize + GEMM path */
	if (mmq_max_m() == 0 || M > mmq_max_m() || (w->flags & ALICE_TENSOR_PACKED))
		return false;
	if (!(mq_kquant(w->type) || w->type == ALICE_TYPE_Q4_0 || w->type == ALICE_TYPE_Q4_1 ||
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

/* 64-column tiles when they fill the GPU twice over, else 32 (more
 * blocks); a column's result is the same in either */
static bool mq_wide(const struct alice_backend_ctx *ctx, int64_t N, int64_t M)
{
	static int force_bn = -1; /* ALICE_CUDA_MMQ_BN=32|64: comparisons */
	if (force_bn < 0) {
		const char *e = getenv("ALICE_CUDA_MMQ_BN");
		force_bn = e ? atoi(e) : 0;
	}
	const int64_t rt = (N + MQ_BM - 1) / MQ_BM;
	return force_bn ? force_bn == 64 : rt * ((M + 63) / 64) >= 2 * (int64_t)ctx->n_sm;
}

/* Splits of K: where the row tiles, with 4 column tiles (a short prompt),
 * would leave SMs with fewer than two blocks (K / V and the 2048-row
 * products of a 1B model), K is cut into up to 8 runs of at least 2
 * chunks, each a block of its own, and their sums are added in split
 * order by k_mmq_reduce. A function of N and K only, so a column's result
 * still does not depend on M or on what else the launch holds.
 * ALICE_CUDA_MMQ_SPLIT=1 turns it off, =S forces S (comparisons). */
static int64_t mq_splits(const struct alice_backend_ctx *ctx, int64_t N, int64_t K, int64_t *cps)
{
	static long force = -1;
	if (force < 0) {
		const char *e = getenv("ALICE_CUDA_MMQ_SPLIT");
		force = e && atol(e) > 0 ? atol(e) : 0;
	}
	const int64_t nch = (K + 255) / 256, blocks = (N + MQ_BM - 1) / MQ_BM * 4;
	int64_t S = force ? force : (2 * (int64_t)ctx->n_sm + blocks - 1) / blocks;
	if (!force) {
		S = S < nch / 2 ? S : nch / 2;
		S = S < 8 ? S : 8;
	}
	S = S < nch ? S : nch;
	S = S > 1 ? S : 1;
	*cps = (nch + S - 1) / S;
	return (nch + *cps - 1) / *cps; /* no empty split */
}

size_t cu_mmq_scratch(const struct alice_backend_ctx *ctx, int64_t N, int64_t K, int64_t M)
{
	int64_t cps;
	const int64_t S = mq_splits(ctx, N, K, &cps);
	return S > 1 ? (size_t)(S * N * M) * 4 : 0;
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
	const int64_t rt = (N + MQ_BM - 1) / MQ_BM;
	const bool wide = mq_wide(ctx, N, M);
	const int64_t bn = wide ? 64 : 32;
	int64_t cps;
	const int64_t S = mq_splits(ctx, N, K, &cps);
	if (S > 1 && ctx->scratch_size < (size_t)(S * N * M) * 4)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "mmq: scratch not sized for %lld splits of N %lld M %lld",
			       (long long)S, (long long)N, (long long)M);
	float *out = S > 1 ? (float *)ctx->scratch : dst;
	const int64_t ocs = S > 1 ? N : dcs, zs = S > 1 ? N * M : 0;
	dim3 grid((unsigned)((M + bn - 1) / bn), (unsigned)rt, (unsigned)S);
	cudaStream_t s = ctx->stream;
	const int64_t wnb1 = w->nb[1];
	bool ok = true;
	size_t need = 0;
	mq_dispatch(w->type, [&]<int T>() {
		const float *dd = d;
		/* more than the 48 KB of static shared memory: opted in once per kernel */
		static bool opt64 = false, opt32 = false;
		if (wide && !opt64)
			opt64 = cudaFuncSetAttribute(k_mmq<T, 64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
						     (int)sizeof(mq_smem<T, 64>)) == cudaSuccess;
		if (!wide && !opt32)
			opt32 = cudaFuncSetAttribute(k_mmq<T, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
						     (int)sizeof(mq_smem<T, 32>)) == cudaSuccess;
		ok = wide ? opt64 : opt32;
		need = wide ? sizeof(mq_smem<T, 64>) : sizeof(mq_smem<T, 32>);
		if (!ok)
			return;
		if (wide)
			cu_launch_smem(k_mmq<T, 64>, grid, 128, sizeof(mq_smem<T, 64>), s, wb, wnb1, N, q, dd, sums, K, M,
				       out, ocs, cps, zs);
		else
			cu_launch_smem(k_mmq<T, 32>, grid, 128, sizeof(mq_smem<T, 32>), s, wb, wnb1, N, q, dd, sums, K, M,
				       out, ocs, cps, zs);
	});
	if (!ok)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "mmq: cannot opt in to %zu bytes of shared memory", need);
	CUDA_LAUNCH_CHECK(ctx, "mmq");
	if (S > 1) {
		cu_launch(k_mmq_reduce, cu_blocks(N * M, 128), 128, s, (const float *)out, (int)S, N, M, dst, dcs);
		CUDA_LAUNCH_CHECK(ctx, "mmq_reduce");
	}
	return ALICE_OK;
}
