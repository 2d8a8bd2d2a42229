/* vec_kgemm512.c — Q4_K prefill GEMM on AVX-512 VNNI (no AMX): 16 weight
 * rows x M activation rows (Q8_K, read in place: cpu_kernels.gemm_rows).
 *
 * The 16 rows are first unpacked into the thread's scratch, transposed so
 * that one zmm holds 4 consecutive nibbles of each of the 16 rows; every
 * activation row then takes one vpdpbusd per 4 inputs against a broadcast of
 * its own 4 bytes, lanes = weight rows, so nothing is summed across lanes.
 * Each weight block is thus decoded once for all M rows.
 *
 * Arithmetic: per superblock the exact integer sums S_b = sum_j sc_j dot_j
 * and M_b = sum_j min_j bsum_j, then acc = fma(d_w d_a, S_b, acc) and
 * accm = fma(dmin_w d_a, M_b, accm), result acc - accm: the order of
 * vec_kseq.h's mat-vecs, so a row's result is the same bits whichever kernel
 * (and however many rows) computed it. Built with the AVX-512 flags; only
 * called when cpuid reports them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "vec_x86.h"

#define Q4K_BYTES 144
/* per superblock of 16 rows in scratch: nibbles [64 quads][16 rows][4],
 * scales [8][16] i32, min pairs [4][16] (2 x i16), d [16], dmin [16] */
#define U_Q 4096
#define U_SC (U_Q + 8 * 64)
#define U_MN (U_SC + 4 * 64)
#define U_D (U_MN + 64)
#define U_BYTES (U_D + 64)
/* the unpacked rows fit the scratch ops_matmul.c gives a GEMM */
_Static_assert(U_BYTES <= 32 * QKK, "cpu_gemm_scratch(k) >= k * 32");

/* Z[r] = (row r, row r + 8) as two 8-dword halves -> out[q] = dword q of
 * rows 0..15 (lane = row) */
static inline void transpose8x2(const __m512i *Z, __m512i *out)
{
	__m512i t[8], u[8];
	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(Z[2 * i], Z[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(Z[2 * i], Z[2 * i + 1]);
	}
	for (int h = 0; h < 2; h++) { /* rows 0..3 (h = 0), 4..7 (h = 1) */
		__m512i *a = t + 4 * h;
		u[4 * h + 0] = _mm512_unpacklo_epi64(a[0], a[2]); /* dwords 0 | 4 */
		u[4 * h + 1] = _mm512_unpackhi_epi64(a[0], a[2]); /* 1 | 5 */
		u[4 * h + 2] = _mm512_unpacklo_epi64(a[1], a[3]); /* 2 | 6 */
		u[4 * h + 3] = _mm512_unpackhi_epi64(a[1], a[3]); /* 3 | 7 */
	}
	const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
	const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
	for (int q = 0; q < 4; q++) {
		out[q] = _mm512_permutex2var_epi64(u[q], lo, u[4 + q]);
		out[q + 4] = _mm512_permutex2var_epi64(u[q], hi, u[4 + q]);
	}
}

/* Superblock b of 16 rows into the scratch layout above. */
static void unpack16(const uint8_t *w, size_t ws, int64_t b, uint8_t *u)
{
	const __m512i m4 = _mm512_set1_epi8(0xf);
	for (int p = 0; p < 4; p++) { /* 32 bytes of nibbles: sub-blocks 2p (low), 2p + 1 (high) */
		__m512i lo[8], hi[8], out[8];
		for (int r = 0; r < 8; r++) {
			const uint8_t *q0 = w + (size_t)r * ws + b * Q4K_BYTES + 16 + 32 * p;
			__m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q0)),
						       _mm256_loadu_si256((const __m256i *)(q0 + 8 * ws)), 1);
			lo[r] = _mm512_and_si512(z, m4);
			hi[r] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
		}
		transpose8x2(lo, out);
		for (int q = 0; q < 8; q++)
			_mm512_storeu_si512((void *)(u + (16 * p + q) * 64), out[q]);
		transpose8x2(hi, out);
		for (int q = 0; q < 8; q++)
			_mm512_storeu_si512((void *)(u + (16 * p + 8 + q) * 64), out[q]);
	}
	int32_t *sc = (int32_t *)(u + U_Q), *mn = (int32_t *)(u + U_SC);
	float *d = (float *)(u + U_MN), *dm = (float *)(u + U_D);
	for (int r = 0; r < 16; r++) {
		const uint8_t *blk = w + (size_t)r * ws + b * Q4K_BYTES;
		uint32_t v[4];
		k4_scales_mins(blk + 4, v);
		uint8_t s8[16];
		memcpy(s8, v, 16); /* 0..7 scales, 8..15 mins */
		for (int j = 0; j < 8; j++)
			sc[j * 16 + r] = s8[j];
		for (int p = 0; p < 4; p++)
			mn[p * 16 + r] = (int32_t)((uint32_t)s8[8 + 2 * p] | (uint32_t)s8[9 + 2 * p] << 16);
		d[r] = ld_fp16(blk);
		dm[r] = ld_fp16(blk + 2);
	}
}

/* MR activation rows against one unpacked superblock: acc/accm += its terms */
static inline __attribute__((always_inline)) void rows_block(int mr, const uint8_t *u, const struct act_q8_k *const *a,
							     __m512 *acc, __m512 *accm)
{
	__m512i S[8], t[8];
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		S[r] = _mm512_setzero_si512();
	for (int j = 0; j < 8; j++) {
		_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
			t[r] = _mm512_setzero_si512();
		_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
			__m512i wz = _mm512_loadu_si512((const void *)(u + (8 * j + q) * 64));
			_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
				int32_t x;
				memcpy(&x, a[r]->q + 32 * j + 4 * q, 4);
				t[r] = _mm512_dpbusd_epi32(t[r], wz, _mm512_set1_epi32(x));
			}
		}
		__m512i sc = _mm512_loadu_si512((const void *)(u + U_Q + 64 * j));
		_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
			S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(t[r], sc));
	}
	__m512 d = _mm512_loadu_ps((const float *)(u + U_MN)), dm = _mm512_loadu_ps((const float *)(u + U_D));
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[r]->bsums),
					    _mm_loadu_si128((const __m128i *)(a[r]->bsums + 8)));
		int32_t bp[4];
		_mm_storeu_si128((__m128i *)bp, bs); /* pairs of 32-element sums */
		__m512i Mi = _mm512_setzero_si512();
		_Pragma("GCC unroll 8") for (int p = 0; p < 4; p++)
			Mi = _mm512_dpwssd_epi32(Mi, _mm512_loadu_si512((const void *)(u + U_SC + 64 * p)),
						 _mm512_set1_epi32(bp[p]));
		__m512 da = _mm512_set1_ps(a[r]->d);
		acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(S[r]), acc[r]);
		accm[r] = _mm512_fmadd_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(Mi), accm[r]);
	}
}

static inline __attribute__((always_inline)) void rows_tile(int mr, int64_t nb, const uint8_t *un,
							    const struct act_q8_k *a0, size_t astride, int64_t m,
							    uint8_t *out, size_t os_n, size_t os_m)
{
	const struct act_q8_k *a[8];
	__m512 acc[8], accm[8];
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
		acc[r] = _mm512_setzero_ps();
		accm[r] = _mm512_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++) {
		_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
			a[r] = (const struct act_q8_k *)((const uint8_t *)a0 + (size_t)(m + r) * astride) + b;
		rows_block(mr, un + (size_t)b * U_BYTES, a, acc, accm);
	}
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
		__m512 res = _mm512_sub_ps(acc[r], accm[r]);
		uint8_t *o = out + (size_t)(m + r) * os_m;
		if (os_n == 4) {
			_mm512_storeu_ps(o, res);
			continue;
		}
		float v[16];
		_mm512_storeu_ps(v, res);
		for (int n = 0; n < 16; n++)
			memcpy(o + n * os_n, &v[n], 4);
	}
}

static void g_gemm_q4_k(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp; /* not registered under ALICE_CPU_EXACT (every row: the gemv order) */
	int64_t nb = k / QKK;
	uint8_t *un = scratch;
	for (int64_t b = 0; b < nb; b++)
		unpack16(w, ws, b, un + (size_t)b * U_BYTES);
	size_t astride = (size_t)nb * sizeof(struct act_q8_k);
	int64_t m = 0;
	for (; m + 4 <= M; m += 4)
		rows_tile(4, nb, un, act, astride, m, out, os_n, os_m);
	for (; m < M; m++)
		rows_tile(1, nb, un, act, astride, m, out, os_n, os_m);
}

/* ---- Q4_0 (default mode; its llama.cpp order is not installed, see
 * vec_llorder.c): per block the exact integer S_b = sum (q - 8) a, then
 * acc_c = fma(d_w d_a, S_b, acc_c) with c = b % 4 (four chains per output,
 * so the fma latency is not paid once per 18-byte block), the result
 * (acc_0 + acc_1) + (acc_2 + acc_3): Q40_CHAINS in cpu_internal.h. ---- */
#define Q40_BYTES 18
/* per block of 16 rows: weights - 8 as s8 [8 quads][16 rows][4], 128 x their
 * sum [16] i32, d [16] */
#define P_OFF 512
#define P_D (P_OFF + 64)
#define P_BYTES (P_D + 64)
_Static_assert(P_BYTES <= 32 * QK8, "cpu_gemm_scratch(k) >= k * 32");

static inline __m256i q40_row(const uint8_t *blk)
{
	__m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
	const __m128i m4 = _mm_set1_epi8(0xf);
	__m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
	return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

static void unpack16_q40(const uint8_t *w, size_t ws, int64_t b, uint8_t *u)
{
	__m512i Z[8], out[8];
	for (int r = 0; r < 8; r++) {
		const uint8_t *blk = w + (size_t)r * ws + b * Q40_BYTES;
		Z[r] = _mm512_inserti64x4(_mm512_castsi256_si512(q40_row(blk)), q40_row(blk + 8 * ws), 1);
	}
	transpose8x2(Z, out);
	__m512i sum = _mm512_setzero_si512();
	const __m512i ones = _mm512_set1_epi8(1);
	for (int q = 0; q < 8; q++) {
		_mm512_storeu_si512((void *)(u + q * 64), out[q]);
		sum = _mm512_dpbusd_epi32(sum, ones, out[q]);
	}
	_mm512_storeu_si512((void *)(u + P_OFF), _mm512_slli_epi32(sum, 7));
	float *d = (float *)(u + P_D);
	for (int r = 0; r < 16; r++)
		d[r] = ld_fp16(w + (size_t)r * ws + b * Q40_BYTES);
}

/* block b of rows m .. m + mr - 1 into acc[r] (the block's chain) */
static inline __attribute__((always_inline)) void q40_step(int mr, const uint8_t *un, const struct act_q8_0 *a0,
							   size_t astride, int64_t m, int64_t b, __m512 *acc)
{
	const uint8_t *u = un + (size_t)b * P_BYTES;
	const struct act_q8_0 *a[4];
	__m512i t[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
		a[r] = (const struct act_q8_0 *)((const uint8_t *)a0 + (size_t)(m + r) * astride) + b;
		t[r] = _mm512_setzero_si512();
	}
	_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
		__m512i wz = _mm512_loadu_si512((const void *)(u + q * 64));
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
			uint32_t x;
			memcpy(&x, a[r]->q + 4 * q, 4);
			/* activations + 128 as u8 against the signed weights */
			t[r] = _mm512_dpbusd_epi32(t[r], _mm512_set1_epi32((int)(x ^ 0x80808080u)), wz);
		}
	}
	__m512i off = _mm512_loadu_si512((const void *)(u + P_OFF));
	__m512 d = _mm512_loadu_ps((const float *)(u + P_D));
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++)
		acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[r]->d)),
					 _mm512_cvtepi32_ps(_mm512_sub_epi32(t[r], off)), acc[r]);
}

static inline __attribute__((always_inline)) void q40_tile(int mr, int64_t nb, const uint8_t *un,
							   const struct act_q8_0 *a0, size_t astride, int64_t m,
							   uint8_t *out, size_t os_n, size_t os_m)
{
	__m512 acc[4][4]; /* [chain][row] */
	_Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) acc[c][r] = _mm512_setzero_ps();
	int64_t b = 0;
	for (; b + 4 <= nb; b += 4) {
		q40_step(mr, un, a0, astride, m, b, acc[0]);
		q40_step(mr, un, a0, astride, m, b + 1, acc[1]);
		q40_step(mr, un, a0, astride, m, b + 2, acc[2]);
		q40_step(mr, un, a0, astride, m, b + 3, acc[3]);
	}
	if (b < nb)
		q40_step(mr, un, a0, astride, m, b, acc[0]);
	if (b + 1 < nb)
		q40_step(mr, un, a0, astride, m, b + 1, acc[1]);
	if (b + 2 < nb)
		q40_step(mr, un, a0, astride, m, b + 2, acc[2]);
	for (int r = 0; r < mr; r++) {
		__m512 res = _mm512_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]), _mm512_add_ps(acc[2][r], acc[3][r]));
		uint8_t *o = out + (size_t)(m + r) * os_m;
		if (os_n == 4) {
			_mm512_storeu_ps(o, res);
			continue;
		}
		float v[16];
		_mm512_storeu_ps(v, res);
		for (int n = 0; n < 16; n++)
			memcpy(o + n * os_n, &v[n], 4);
	}
}

static void g_gemm_q4_0(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	int64_t nb = k / QK8;
	uint8_t *un = scratch;
	for (int64_t b = 0; b < nb; b++)
		unpack16_q40(w, ws, b, un + (size_t)b * P_BYTES);
	size_t astride = (size_t)nb * sizeof(struct act_q8_0);
	int64_t m = 0;
	for (; m + 4 <= M; m += 4)
		q40_tile(4, nb, un, act, astride, m, out, os_n, os_m);
	for (; m < M; m++)
		q40_tile(1, nb, un, act, astride, m, out, os_n, os_m);
}

/* the exact S_b of one block: (a + 128) . (q - 8) - 128 sum(q - 8) */
static inline int32_t q40_block_sum(const uint8_t *blk, const struct act_q8_0 *a)
{
	__m256i au = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)a->q), _mm256_set1_epi8((char)0x80));
	__m256i wv = q40_row(blk);
	__m256i t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), au, wv);
	t = _mm256_sub_epi32(t, _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), wv), 7));
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	return _mm_cvtsi128_si32(s);
}

/* one row in the same order (rows left over by the GEMM tiles) */
static void g_dot_q4_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int64_t b = 0; b < k / QK8; b++, wb += Q40_BYTES, a++) {
		prefetch_ahead(wb, Q40_BYTES);
		acc[b & 3] = fmaf(ld_fp16(wb) * a->d, (float)q40_block_sum(wb, a), acc[b & 3]);
	}
	*out = q40_chains(acc);
}

/* Decode, one row at a time (a row read start to end streams from DRAM
 * better here than 4 rows side by side: K=2048 N=65536, 1 thread, ~6.5 vs
 * ~8 ms CPU; two rows side by side: 17 ms), the same per-block chain. Four
 * blocks per zmm (one per 128-bit chunk): the raw nibbles (u8) against the
 * signed activations, started from -8 * sum(a) spread over the chunk's
 * lanes, so each chunk sums to the exact S_b; the activations laid out once
 * per call, the row's quant bytes and 4 d_w by word permutes of the
 * group's 72 bytes (the gather and 4 inserts they replace cost ~15%), the
 * 4 sums then taken in order. */
struct q40_a4 {
	__m512i alo, ahi, c;
	__m128 da;
};

static inline __attribute__((always_inline)) void q40_rows(const int nr, int64_t ng, int64_t nb, const uint8_t *w,
							    size_t ws, const struct q40_a4 *A, const struct act_q8_0 *a,
							    float *out)
{
	const __m512i m4 = _mm512_set1_epi8(0xf);
	const __m512i pick = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
	const __m512i didx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					      0, 0, 0, 0, 27, 18, 9, 0);
	const __m512i qidx = _mm512_set_epi16(35, 34, 33, 32, 31, 30, 29, 28, 26, 25, 24, 23, 22, 21, 20, 19, 17, 16, 15, 14,
					      13, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2, 1);
	__m128 acc[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
	for (int64_t g = 0; g < ng; g++) {
#pragma GCC unroll 2
		for (int r = 0; r < nr; r++) {
			const uint8_t *blk = w + (size_t)r * ws + g * 4 * Q40_BYTES;
			prefetch_ahead(blk, 4 * Q40_BYTES);
			/* the 4 blocks' 16 quant bytes (words 1..8, 10..17, 19..26, 28..35 of
			 * the group's 72 bytes) into the 4 chunks by one word permute */
			__m512i z0 = _mm512_loadu_si512((const void *)blk);
			__m512i v = _mm512_permutex2var_epi16(z0, qidx, _mm512_maskz_loadu_epi16(0xf, blk + 64)); /* 8 bytes: never past the group */
			__m512i t = _mm512_dpbusd_epi32(A[g].c, _mm512_and_si512(v, m4), A[g].alo);
			t = _mm512_dpbusd_epi32(t, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), A[g].ahi);
			t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
			t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
			__m128 S = _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(pick, t)));
			/* the 4 d at bytes 0, 18, 36, 54: words 0, 9, 18, 27 of the group's first 64 bytes */
			__m512i hd = _mm512_permutexvar_epi16(didx, z0);
			__m128 P = _mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(hd)), A[g].da);
			acc[r] = _mm_fmadd_ps(P, S, acc[r]); /* lane j: chain j */
		}
	}
	for (int r = 0; r < nr; r++) {
		float v[4];
		_mm_storeu_ps(v, acc[r]);
		const uint8_t *blk = w + (size_t)r * ws + 4 * ng * Q40_BYTES;
		for (int64_t c = 4 * ng; c < nb; c++, blk += Q40_BYTES) /* the last nb % 4 blocks */
			v[c & 3] = fmaf(ld_fp16(blk) * a[c].d, (float)q40_block_sum(blk, a + c), v[c & 3]);
		out[r] = q40_chains(v);
	}
}

static void q40_layout(const struct act_q8_0 *a, int64_t ng, struct q40_a4 *A);

/* decode: n rows one after another, the activation side laid out once */
static void g_dotn_q4_0(int64_t k, const void *w, size_t ws, int64_t n, const void *act, uint8_t *out, size_t os)
{
	const struct act_q8_0 *a = act;
	int64_t nb = k / QK8, ng = nb / 4;
	if (ng > 64) {
		for (int64_t r = 0; r < n; r++) {
			float v;
			g_dot_q4_0(k, (const uint8_t *)w + (size_t)r * ws, act, &v);
			memcpy(out + (size_t)r * os, &v, 4);
		}
		return;
	}
	struct q40_a4 A[64];
	q40_layout(a, ng, A);
	for (int64_t r = 0; r < n; r++) {
		float v;
		q40_rows(1, ng, nb, (const uint8_t *)w + (size_t)r * ws, ws, A, a, &v);
		memcpy(out + (size_t)r * os, &v, 4);
	}
}

static void g_dotr4s_q4_0(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const struct act_q8_0 *a = act;
	int64_t nb = k / QK8, ng = nb / 4;
	if (ng > 64) { /* over 8192 inputs: not laid out, the single-row steps */
		for (int r = 0; r < 4; r++)
			g_dot_q4_0(k, (const uint8_t *)w + (size_t)r * ws, act, out + r);
		return;
	}
	struct q40_a4 A[64];
	q40_layout(a, ng, A);
	for (int r = 0; r < 4; r++)
		q40_rows(1, ng, nb, (const uint8_t *)w + (size_t)r * ws, ws, A, a, out + r);
}

/* the activation side of 4-block groups, once per call */
static void q40_layout(const struct act_q8_0 *a, int64_t ng, struct q40_a4 *A)
{
	const __m512i ones = _mm512_set1_epi8(1);
	for (int64_t g = 0; g < ng; g++) {
		const struct act_q8_0 *ab = a + 4 * g;
		__m512i alo = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)ab[0].q));
		__m512i ahi = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(ab[0].q + 16)));
		for (int j = 1; j < 4; j++) {
			alo = _mm512_inserti32x4(alo, _mm_loadu_si128((const __m128i *)ab[j].q), j);
			ahi = _mm512_inserti32x4(ahi, _mm_loadu_si128((const __m128i *)(ab[j].q + 16)), j);
		}
		__m512i sa = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, alo), ones, ahi);
		A[g].alo = alo;
		A[g].ahi = ahi;
		A[g].c = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sa, 3));
		A[g].da = _mm_setr_ps(ab[0].d, ab[1].d, ab[2].d, ab[3].d);
	}
}

void cpu_kernels_kgemm512(struct cpu_kernels *k, bool exact)
{
	if (exact) /* llama.cpp's grouped gemm order needs the row's place */
		return;
	k->gemm[ALICE_TYPE_Q4_K] = g_gemm_q4_k;
	k->gemm_rows[ALICE_TYPE_Q4_K] = true;
	k->dot[ALICE_TYPE_Q4_0] = g_dot_q4_0;
	k->dot4[ALICE_TYPE_Q4_0] = NULL;
	k->dotr4[ALICE_TYPE_Q4_0] = g_dotr4s_q4_0;
	k->dotn[ALICE_TYPE_Q4_0] = g_dotn_q4_0;
	k->gemm[ALICE_TYPE_Q4_0] = g_gemm_q4_0;
	k->gemm_rows[ALICE_TYPE_Q4_0] = true;
}
#endif
