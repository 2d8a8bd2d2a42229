/* mmvq_tc.cu — batched decode for Q4_K / Q6_K on integer tensor cores.
 *
 * The same arithmetic per (row, column) as mmvq.cu's mat-vec (see the
 * K-quant note there): per super-block, exact integer sums from mma
 * (m16n8k32 for Q4_K's 32-value sub-blocks, m16n8k16 for Q6_K's 16), scaled
 * by the sub-block scales in integers, then one float term (kq_acc,
 * kquant.cuh);
 * super-blocks accumulated by group sb % (4 S) in order, groups combined
 * (g0 + g2) + (g1 + g3), parts in order. A column's result is bit for bit
 * the mat-vec's, so which columns run here never shows in the output.
 *
 * Block: 4 S warps, warp w = 4 p + g takes the super-blocks of group
 * g + 4 p; tile 16 MT rows (MT m16 tiles) x 8 NT columns (NT n8 tiles). The
 * integer dot's k order within a sub-block is free (exact), so each thread
 * loads 8 contiguous weight bytes per row and the activations match them:
 * k slots 4t..4t+3 <- bytes 8t..8t+3, 16+4t.. <- bytes 8t+4..8t+7 (Q4_K). */
#include "common.cuh"
#include "kquant.cuh"
#include "mma.cuh"

#define TC_COLS 16

/* every element of a thread's [MT][NT][4] fragment set */
template <int MT, int NT, typename V>
__device__ static inline void frag_fill(V (&a)[MT][NT][4], V v)
{
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				a[mt][nt][e] = v;
}

__device__ static inline int byte_of(uint32_t lo, uint32_t hi, int j)
{
	return (int)(((j < 4 ? lo : hi) >> (8 * (j & 3))) & 0xff);
}

/* one super-block of Q4_K: sumi/summ of the thread's 16 elements
 * [mt][nt][e] (e: c-fragment index) */
template <int MT, int NT>
__device__ static inline void q4k_sb(const uint8_t *const (&wr)[MT][2], const int8_t *__restrict__ xc, int64_t K,
				     int64_t sb, int t, int g, float (&d)[MT][2], float (&dmin)[MT][2],
				     int (&sumi)[MT][NT][4], int (&summ)[MT][NT][4])
{
	uint32_t sclo[MT][2], schi[MT][2], mlo[MT][2], mhi[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const uint4 hd = *(const uint4 *)(wr[mt][h] + sb * 144);
			d[mt][h] = __half2float(__ushort_as_half((unsigned short)(hd.x & 0xffff)));
			dmin[mt][h] = __half2float(__ushort_as_half((unsigned short)(hd.x >> 16)));
			sclo[mt][h] = hd.y & 0x3f3f3f3fu;
			mlo[mt][h] = hd.z & 0x3f3f3f3fu;
			schi[mt][h] = (hd.w & 0x0f0f0f0fu) | (((hd.y >> 6) & 0x03030303u) << 4);
			mhi[mt][h] = ((hd.w >> 4) & 0x0f0f0f0fu) | (((hd.z >> 6) & 0x03030303u) << 4);
		}
	frag_fill<MT, NT>(sumi, 0);
	frag_fill<MT, NT>(summ, 0);
#pragma unroll
	for (int c = 0; c < 4; c++) {
		uint2 q[MT][2];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int h = 0; h < 2; h++)
				q[mt][h] = *(const uint2 *)(wr[mt][h] + sb * 144 + 16 + 32 * c + 8 * t);
		uint2 xb[NT][2]; /* [nt][low/high sub-block] */
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
			const int8_t *xp = xc + (int64_t)(nt * 8 + g) * K + sb * 256 + 64 * c + 8 * t;
			xb[nt][0] = *(const uint2 *)xp;
			xb[nt][1] = *(const uint2 *)(xp + 32);
		}
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			const int j = 2 * c + hh;
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				const uint32_t sh = 4 * hh;
				const uint32_t a0 = (q[mt][0].x >> sh) & 0x0f0f0f0fu, a1 = (q[mt][1].x >> sh) & 0x0f0f0f0fu;
				const uint32_t a2 = (q[mt][0].y >> sh) & 0x0f0f0f0fu, a3 = (q[mt][1].y >> sh) & 0x0f0f0f0fu;
				const int s0 = byte_of(sclo[mt][0], schi[mt][0], j), s1 = byte_of(sclo[mt][1], schi[mt][1], j);
				const uint32_t m0 = (uint32_t)byte_of(mlo[mt][0], mhi[mt][0], j) * 0x01010101u;
				const uint32_t m1 = (uint32_t)byte_of(mlo[mt][1], mhi[mt][1], j) * 0x01010101u;
#pragma unroll
				for (int nt = 0; nt < NT; nt++) {
					int cq[4] = {0, 0, 0, 0};
					mma_k32(cq, a0, a1, a2, a3, xb[nt][hh].x, xb[nt][hh].y);
					mma_k32(summ[mt][nt], m0, m1, m0, m1, xb[nt][hh].x, xb[nt][hh].y);
					sumi[mt][nt][0] += s0 * cq[0];
					sumi[mt][nt][1] += s0 * cq[1];
					sumi[mt][nt][2] += s1 * cq[2];
					sumi[mt][nt][3] += s1 * cq[3];
				}
			}
		}
	}
}

/* one super-block of Q6_K (summ unused): 16 sub-blocks of 16 values; half
 * n, positions 16 hh + 4 t .. + 4 of each of its four 32-runs r */
template <int MT, int NT, bool P>
__device__ static inline void q6k_sb(const uint8_t *const (&wr)[MT][2], const int8_t *__restrict__ xc, int64_t K,
				     int64_t sb, int t, int g, float (&d)[MT][2], int (&sumi)[MT][NT][4])
{
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int h = 0; h < 2; h++)
			d[mt][h] = __half2float(*(const __half *)q6_at<P>(wr[mt][h], sb).d);
	frag_fill<MT, NT>(sumi, 0);
#pragma unroll
	for (int n = 0; n < 2; n++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			uint32_t ql0[MT][2], ql1[MT][2], qh[MT][2];
			int sc[MT][2][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int h = 0; h < 2; h++) {
					const q6blk b = q6_at<P>(wr[mt][h], sb);
					ql0[mt][h] = q6_ld4<P>(b.q, 64 * n + 16 * hh + 4 * t);
					ql1[mt][h] = q6_ld4<P>(b.q, 64 * n + 32 + 16 * hh + 4 * t);
					qh[mt][h] = q6_ld4<P>(b.q, 128 + 32 * n + 16 * hh + 4 * t);
					const int8_t *s = (const int8_t *)b.sc + 8 * n + hh;
#pragma unroll
					for (int r = 0; r < 4; r++)
						sc[mt][h][r] = s[2 * r];
				}
#pragma unroll
			for (int r = 0; r < 4; r++) {
				uint32_t xb[NT];
#pragma unroll
				for (int nt = 0; nt < NT; nt++)
					xb[nt] = *(const uint32_t *)(xc + (int64_t)(nt * 8 + g) * K + sb * 256 + 128 * n + 32 * r +
								     16 * hh + 4 * t);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					uint32_t a[2];
#pragma unroll
					for (int h = 0; h < 2; h++) {
						const uint32_t ql = (r & 1) ? ql1[mt][h] : ql0[mt][h];
						const uint32_t lo = (r >> 1) ? (ql >> 4) & 0x0f0f0f0fu : ql & 0x0f0f0f0fu;
						const uint32_t v = lo | (((qh[mt][h] >> (2 * r)) & 0x03030303u) << 4);
						a[h] = (uint32_t)__vsubss4((int)v, 0x20202020);
					}
#pragma unroll
					for (int nt = 0; nt < NT; nt++) {
						int cq[4] = {0, 0, 0, 0};
						mma_k16(cq, a[0], a[1], xb[nt]);
						sumi[mt][nt][0] += sc[mt][0][r] * cq[0];
						sumi[mt][nt][1] += sc[mt][0][r] * cq[1];
						sumi[mt][nt][2] += sc[mt][1][r] * cq[2];
						sumi[mt][nt][3] += sc[mt][1][r] * cq[3];
					}
				}
			}
		}
}

/* grid: x = column group of 8 NT, y = row tile of 16 MT rows over the set's
 * matrices (bstart); block: 4 * max split warps. More columns per warp
 * reuse each unpacked weight fragment for more mma (NT 4 at large M). */
template <int T, int MT, int NT>
__global__ void __launch_bounds__(512) k_mmvq_tc(const struct mmv_set set, const int8_t *__restrict__ x,
						 const float *__restrict__ xd, int64_t dcs, int64_t K, int64_t M)
{
	constexpr int ROWS = 16 * MT, COLS = 8 * NT;
	__shared__ float red[16][ROWS * COLS];
	const int m = (blockIdx.y >= set.bstart[1]) + (blockIdx.y >= set.bstart[2]);
	const int S = set.split[m];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int p = warp >> 2, grp = warp & 3;
	const int g = lane >> 2, t = lane & 3;
	const int64_t N = set.N[m], row0 = (int64_t)(blockIdx.y - set.bstart[m]) * ROWS;
	const int64_t c0 = (int64_t)blockIdx.x * COLS;
	const int8_t *xc = x + c0 * K;
	pdl_wait();
	pdl_trigger();
	float acc[MT][NT][4];
	frag_fill<MT, NT>(acc, 0.f);
	if (p < S) {
		const uint8_t *wr[MT][2];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int64_t r = row0 + mt * 16 + g + 8 * h;
				wr[mt][h] = set.w[m] + (r < N ? r : N - 1) * set.wnb1[m];
			}
		const int64_t nsb = K / 256;
		for (int64_t sb = grp + 4 * p; sb < nsb; sb += 4 * S) {
			float d[MT][2], dmin[MT][2];
			int sumi[MT][NT][4], summ[MT][NT][4];
			if constexpr (T == ALICE_TYPE_Q4_K) {
				q4k_sb<MT, NT>(wr, xc, K, sb, t, g, d, dmin, sumi, summ);
			} else {
				q6k_sb<MT, NT, T == T_Q6_KP>(wr, xc, K, sb, t, g, d, sumi);
#pragma unroll
				for (int mt = 0; mt < MT; mt++)
					dmin[mt][0] = dmin[mt][1] = 0.f;
				frag_fill<MT, NT>(summ, 0);
			}
#pragma unroll
			for (int nt = 0; nt < NT; nt++) {
				const float d8a = xd[(c0 + nt * 8 + 2 * t) * (K / 32) + sb * 8];
				const float d8b = xd[(c0 + nt * 8 + 2 * t + 1) * (K / 32) + sb * 8];
#pragma unroll
				for (int mt = 0; mt < MT; mt++)
#pragma unroll
					for (int e = 0; e < 4; e++)
						acc[mt][nt][e] = kq_acc(acc[mt][nt][e], d[mt][e >> 1], dmin[mt][e >> 1],
									 (e & 1) ? d8b : d8a, sumi[mt][nt][e], summ[mt][nt][e]);
			}
		}
		/* element (mt, nt, e): row mt*16 + g + 8*(e>>1), column nt*8 + 2t + (e&1) */
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					red[warp][(mt * 16 + g + 8 * (e >> 1)) * COLS + nt * 8 + 2 * t + (e & 1)] =
						acc[mt][nt][e];
	}
	__syncthreads();
	for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) {
		const int64_t row = row0 + i / COLS, col = c0 + i % COLS;
		float tot = 0.f;
		for (int pp = 0; pp < S; pp++) {
			const float w = __fadd_rn(__fadd_rn(red[4 * pp][i], red[4 * pp + 2][i]),
						  __fadd_rn(red[4 * pp + 1][i], red[4 * pp + 3][i]));
			tot = pp == 0 ? w : __fadd_rn(tot, w);
		}
		if (row < N && col < M) /* padded columns are computed, not stored */
			set.d[m][row * set.drs[m] + col * dcs] = tot;
	}
}

/* h = act(d[0]) * d[1] over the tensor-core columns of a gate/up launch */
__global__ void k_tc_glu(const struct mmv_set set, int64_t dcs, int64_t N, int64_t M)
{
	pdl_wait();
	pdl_trigger();
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= N * M)
		return;
	const int64_t row = i % N, col = i / N;
	const float a = set.d[0][row * set.drs[0] + col * dcs], b = set.d[1][row * set.drs[1] + col * dcs];
	set.h[row * set.hrs + col * set.hcs] = act_apply(set.act, a) * b;
}

/* ALICE_CUDA_MMVQ_TC=0: batched columns on the mat-vec kernels (comparisons;
 * the results are the same). The backend needs sm_90 (backend.cu), so mma
 * is always there. */
static int tc_off(void)
{
	static int off = -1;
	return cu_env_is("ALICE_CUDA_MMVQ_TC", '0', &off);
}

typedef void (*tc_kernel_fn)(const struct mmv_set, const int8_t *__restrict__, const float *__restrict__, int64_t,
			     int64_t, int64_t);
/* ti: 0 Q4_K, 1 Q6_K, 2 packed Q6_K */
template <int MT, int NT>
static tc_kernel_fn tc_kernel(int ti)
{
	return ti == 0 ? k_mmvq_tc<ALICE_TYPE_Q4_K, MT, NT>
	       : ti == 1 ? k_mmvq_tc<ALICE_TYPE_Q6_K, MT, NT>
			 : k_mmvq_tc<T_Q6_KP, MT, NT>;
}

int64_t cu_mmvq_tc(cudaStream_t s, struct mmv_set set, int n, uint32_t type, const int8_t *x, const float *xd,
		   int64_t dcs, int64_t K, int64_t M, bool glu)
{
	if ((type != ALICE_TYPE_Q4_K && type != ALICE_TYPE_Q6_K && type != T_Q6_KP) || M < TC_COLS || tc_off())
		return 0;
	/* 32 columns per warp from 17 columns on (ALICE_CUDA_TC_COLS=16 forces
	 * 16); the last tile may be partial: the activations are padded to 32
	 * columns (cu_xq_cols) and columns past M are not stored. (Whole tiles
	 * only, with the rest on the mat-vec kernels, made a 63-row step read
	 * the weights four more times: 8.1 ms against 3.7 at 64 rows.) */
	static int c16 = -1;
	const int nt = (M > 16 && !cu_env_is("ALICE_CUDA_TC_COLS", '1', &c16)) ? 4 : 2;
	const int64_t ntile = (M + 8 * nt - 1) / (8 * nt), ncols = M;
	/* 16-row tiles while that gives few blocks (latency: a warp may have
	 * only one super-block), 32 rows once the grid is large (activation
	 * reuse); with 32 columns a tile keeps 16 rows (registers). Results are
	 * the same either way */
	int64_t rows_all = 0;
	for (int i = 0; i < n; i++)
		rows_all += set.N[i];
	const int mt = nt == 2 && rows_all / 32 * (ntile * 8 * nt / TC_COLS) >= 8 * 132 ? 2 : 1;
	unsigned b = 0;
	int smax = 1;
	for (int i = 0; i < MMV_MAX_SET; i++) {
		set.bstart[i] = b;
		if (i < n) {
			b += (unsigned)((set.N[i] + 16 * mt - 1) / (16 * mt));
			smax = set.split[i] > smax ? set.split[i] : smax;
		}
	}
	set.bstart[MMV_MAX_SET] = b;
	dim3 grid((unsigned)ntile, b);
	const int ti = type == ALICE_TYPE_Q4_K ? 0 : type == ALICE_TYPE_Q6_K ? 1 : 2;
	if (nt == 4)
		cu_launch(tc_kernel<1, 4>(ti), grid, 128 * smax, s, set, x, xd, dcs, K, M);
	else if (mt == 2)
		cu_launch(tc_kernel<2, 2>(ti), grid, 128 * smax, s, set, x, xd, dcs, K, M);
	else
		cu_launch(tc_kernel<1, 2>(ti), grid, 128 * smax, s, set, x, xd, dcs, K, M);
	if (glu)
		cu_launch(k_tc_glu, cu_blocks(set.N[0] * ncols, 256), 256, s, set, dcs, set.N[0], ncols);
	return ncols;
}
