/* vec_kgemm2.c — Q4_K on AVX2 (the ALICE_CPU_ISA=avx2 table, no VNNI) in
 * vec_kseq.h's order: per superblock the exact integer sums S_b (scales x
 * sub-block dots) and M_b (mins x bsums), acc = fma(d_w d_a, S_b, acc),
 * accm = fma(dmin_w d_a, M_b, accm), result acc - accm. A mat-vec and a
 * prefill GEMM with that arithmetic, so a row's bits do not depend on the
 * launch; registered for the default mode only (ALICE_CPU_EXACT takes
 * vec_llorder.c's Q4_K: llama.cpp's gemm order for grouped rows).
 *
 * The GEMM takes its 16 weight rows as two halves of 8: each half is
 * unpacked once into the thread's scratch with 4 nibbles of each row per
 * 32-bit lane (lanes = rows), then every activation row takes, per 32-input
 * sub-block, 8 vpmaddubsw against broadcasts of its own 4-byte groups, summed
 * in int16 (8 x 2 x 15 x 127 < 2^15) and scaled by one vpmaddwd. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "vec_x86.h"

#define Q4K_BYTES 144
/* per superblock of 8 rows: nibbles [64 quads][8 rows][4], scales [8][8]
 * (i16 pair sc, sc), min pairs [4][8] (i16 mn[2p], mn[2p + 1]), d [8], dmin [8] */
#define V_Q 2048
#define V_SC (V_Q + 8 * 32)
#define V_MN (V_SC + 4 * 32)
#define V_D (V_MN + 32)
#define V_BYTES (V_D + 32)
_Static_assert(2 * V_BYTES <= 32 * QKK, "cpu_gemm_scratch(k) >= k * 32");

/* the superblock's scales and mins as 8-bit values: [0..7] scales, [8..15] mins */
static inline void sc_mn(const uint8_t *blk, uint8_t *s8)
{
	uint32_t v[4];
	k4_scales_mins(blk + 4, v);
	memcpy(s8, v, 16);
}

/* S_b and M_b of one weight superblock and one activation block */
static inline void sums_1(const uint8_t *blk, const struct act_q8_k *a, int32_t *S, int32_t *Mb)
{
	const __m256i m4 = _mm256_set1_epi8(0xf);
	uint8_t s8[16];
	sc_mn(blk, s8);
	__m256i acc = _mm256_setzero_si256();
	for (int p = 0; p < 4; p++) {
		__m256i q4 = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * p));
		__m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q4, m4),
						  _mm256_loadu_si256((const __m256i *)(a->q + 64 * p)));
		__m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q4, 4), m4),
						  _mm256_loadu_si256((const __m256i *)(a->q + 64 * p + 32)));
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(lo, _mm256_set1_epi16((short)s8[2 * p])));
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(hi, _mm256_set1_epi16((short)s8[2 * p + 1])));
	}
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	*S = _mm_cvtsi128_si32(s);
	int32_t m = 0;
	for (int j = 0; j < 8; j++)
		m += (int32_t)s8[8 + j] * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
	*Mb = m;
}

/* One superblock's integers: v[p] (8 lanes) sums sub-blocks 2p and 2p + 1
 * times their scales; the return holds M_p, the pairs' mins x bsums */
static inline __attribute__((always_inline)) __m128i q4k_pairs(const uint8_t *wb, const struct act_q8_k *a, __m256i v[4])
{
	const __m256i m4 = _mm256_set1_epi8(0xf);
	__m256i ms = _mm256_cvtepu8_epi16(k4_scales_mins_v(wb + 4));
	__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
				    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
	__m128i sc128 = _mm256_castsi256_si128(ms);
	__m256i sc = _mm256_set_m128i(sc128, sc128);
	for (int j = 0; j < 4; j++) {
		__m256i q4 = _mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * j));
		__m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q4, m4), _mm256_loadu_si256((const __m256i *)(a->q + 64 * j)));
		__m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q4, 4), m4),
						  _mm256_loadu_si256((const __m256i *)(a->q + 64 * j + 32)));
		__m256i sl = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(((4 * j + 1) << 8) | (4 * j))));
		__m256i sh = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(((4 * j + 3) << 8) | (4 * j + 2))));
		v[j] = _mm256_add_epi32(_mm256_madd_epi16(lo, sl), _mm256_madd_epi16(hi, sh));
	}
	return _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), bs);
}

/* decode: S_b and M_b as sums_1 forms them (exact integers, so the same
 * values), the scales broadcast by one vpshufb each and M_b by one madd */
void cpu_q4k_gemv_avx2(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	float acc = 0.0f, accm = 0.0f;
	for (int64_t b = 0; b < k / QKK; b++, wb += Q4K_BYTES, a++) {
		prefetch_ahead(wb, Q4K_BYTES);
		__m256i v[4];
		__m128i pm = q4k_pairs(wb, a, v);
		__m256i s8 = _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
		__m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
		__m128i t = _mm_hadd_epi32(s, pm); /* S_b pairs, then M_b pairs */
		t = _mm_hadd_epi32(t, t);
		acc = fmaf(ld_fp16(wb) * a->d, (float)_mm_cvtsi128_si32(t), acc);
		accm = fmaf(ld_fp16(wb + 2) * a->d, (float)_mm_extract_epi32(t, 1), accm);
	}
	*out = acc - accm;
}

/* llama.cpp's repacked gemm order (a sequence's rows in groups of 4,
 * ALICE_CPU_EXACT): the same integers per pair of sub-blocks p, S_p and M_p,
 * one fma each per pair instead of per superblock */
void cpu_q4k_gemm_row_avx2(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	float acc = 0.0f, accm = 0.0f;
	for (int64_t b = 0; b < k / QKK; b++, wb += Q4K_BYTES, a++) {
		__m256i v[4];
		__m128i pm = q4k_pairs(wb, a, v); /* M_p */
		__m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
		__m128i sp = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)); /* S_p */
		int32_t S[4], M[4];
		_mm_storeu_si128((__m128i *)S, sp);
		_mm_storeu_si128((__m128i *)M, pm);
		const float dd = ld_fp16(wb) * a->d, dm = ld_fp16(wb + 2) * a->d;
		for (int p = 0; p < 4; p++) {
			acc = fmaf((float)S[p], dd, acc);
			accm = fmaf((float)M[p], dm, accm);
		}
	}
	*out = acc - accm;
}

/* The same sums, 4 superblocks' integer reductions done together and their
 * 8 float terms formed in two vectors (the same fmas in the same order);
 * the activation side (bsum pairs, d) laid out once per run of rows. */
#define V4K_SB 64
struct v4k_act {
	__m128i bs[V4K_SB];
	__m256 da2[V4K_SB / 4];
	int8_t q[V4K_SB][QKK]; /* v4k_sb's order: per pair of 64-value chunks, 16-byte quarters interleaved */
};

static void v4k_fill(struct v4k_act *A, const struct act_q8_k *a, int64_t nsb)
{
	for (int64_t b = 0; b < nsb; b++)
		A->bs[b] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[b].bsums),
					  _mm_loadu_si128((const __m128i *)(a[b].bsums + 8)));
	/* chunks j, j + 1 (64 values each): quarter t of j, then quarter t of j + 1 */
	for (int64_t b = 0; b < nsb; b++)
		for (int jp = 0; jp < 2; jp++)
			for (int t = 0; t < 4; t++)
				for (int h = 0; h < 2; h++)
					memcpy(A->q[b] + 128 * jp + 32 * t + 16 * h, a[b].q + 128 * jp + 64 * h + 16 * t, 16);
	for (int64_t b = 0; b + 4 <= nsb; b += 4)
		A->da2[b / 4] = _mm256_setr_ps(a[b].d, a[b].d, a[b + 1].d, a[b + 1].d, a[b + 2].d, a[b + 2].d, a[b + 3].d,
					       a[b + 3].d);
}

/* S_b (8 partial lanes) and M_b (4 pair lanes) of one superblock. Chunks j
 * and j + 1 (64 values each: the low nibbles sub-block 2j, the high ones
 * 2j + 1) share two vectors, a half of each per lane, so the two vectors'
 * products of a lane's sub-block add as int16 (at most 2 x 2 x 15 x 128)
 * before one madd with its scale: half the scale shuffles and madds. */
static inline __attribute__((always_inline)) __m256i v4k_sb(const uint8_t *wb, const int8_t *q8, __m128i bs, __m128i *pm)
{
	const __m256i m4 = _mm256_set1_epi8(0xf);
	prefetch_ahead(wb, Q4K_BYTES);
	__m256i ms = _mm256_cvtepu8_epi16(k4_scales_mins_v(wb + 4));
	*pm = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), bs);
	__m256i sc = _mm256_permute4x64_epi64(ms, 0x44);
	__m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
#pragma GCC unroll 2
	for (int jp = 0; jp < 2; jp++) {
		const uint8_t *q = wb + 16 + 64 * jp;
		const int8_t *x = q8 + 128 * jp;
		__m256i va = _mm256_loadu2_m128i((const __m128i *)(q + 32), (const __m128i *)q);
		__m256i vb = _mm256_loadu2_m128i((const __m128i *)(q + 48), (const __m128i *)(q + 16));
		__m256i lo = _mm256_add_epi16(
			_mm256_maddubs_epi16(_mm256_and_si256(va, m4), _mm256_loadu_si256((const __m256i *)x)),
			_mm256_maddubs_epi16(_mm256_and_si256(vb, m4), _mm256_loadu_si256((const __m256i *)(x + 32))));
		__m256i hi = _mm256_add_epi16(
			_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(va, 4), m4), _mm256_loadu_si256((const __m256i *)(x + 64))),
			_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(vb, 4), m4), _mm256_loadu_si256((const __m256i *)(x + 96))));
		/* low lane: scale of sub-block 4jp (lo) / 4jp + 1 (hi); high lane: 4jp + 2 / 4jp + 3 */
		const char l0 = (char)(8 * jp), l1 = (char)(8 * jp + 2), h0 = (char)(8 * jp + 4), h1 = (char)(8 * jp + 6);
		__m256i sl = _mm256_shuffle_epi8(sc, _mm256_setr_epi8(l0, l0 + 1, l0, l0 + 1, l0, l0 + 1, l0, l0 + 1, l0, l0 + 1, l0, l0 + 1,
								      l0, l0 + 1, l0, l0 + 1, h0, h0 + 1, h0, h0 + 1, h0, h0 + 1, h0, h0 + 1,
								      h0, h0 + 1, h0, h0 + 1, h0, h0 + 1, h0, h0 + 1));
		__m256i sh = _mm256_shuffle_epi8(sc, _mm256_setr_epi8(l1, l1 + 1, l1, l1 + 1, l1, l1 + 1, l1, l1 + 1, l1, l1 + 1, l1, l1 + 1,
								      l1, l1 + 1, l1, l1 + 1, h1, h1 + 1, h1, h1 + 1, h1, h1 + 1, h1, h1 + 1,
								      h1, h1 + 1, h1, h1 + 1, h1, h1 + 1, h1, h1 + 1));
		s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(lo, sl));
		s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(hi, sh));
	}
	return _mm256_add_epi32(s0, s1);
}

static inline __attribute__((always_inline)) float v4k_row(int64_t nsb, const uint8_t *wb, const struct act_q8_k *a,
							    const struct v4k_act *A)
{
	__m128 am = _mm_setzero_ps(); /* lane 0: acc, lane 1: accm */
	int64_t b = 0;
	for (; b + 4 <= nsb; b += 4) {
		__m256i s8[4];
		__m128i pm[4];
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
			s8[i] = v4k_sb(wb + (b + i) * Q4K_BYTES, A->q[b + i], A->bs[b + i], &pm[i]);
		__m128 S = _mm_cvtepi32_ps(red4_256(s8[0], s8[1], s8[2], s8[3]));
		__m128 M = _mm_cvtepi32_ps(red4_128(pm[0], pm[1], pm[2], pm[3]));
		uint32_t dw[4];
		for (int i = 0; i < 4; i++)
			memcpy(&dw[i], wb + (b + i) * Q4K_BYTES, 4);
		__m256 P = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dw)), A->da2[b / 4]);
		__m128 P01 = _mm256_castps256_ps128(P), P23 = _mm256_extractf128_ps(P, 1);
		__m128 SM01 = _mm_unpacklo_ps(S, M), SM23 = _mm_unpackhi_ps(S, M);
		am = _mm_fmadd_ps(P01, SM01, am);
		am = _mm_fmadd_ps(_mm_movehl_ps(P01, P01), _mm_movehl_ps(SM01, SM01), am);
		am = _mm_fmadd_ps(P23, SM23, am);
		am = _mm_fmadd_ps(_mm_movehl_ps(P23, P23), _mm_movehl_ps(SM23, SM23), am);
	}
	for (; b < nsb; b++) {
		__m128i pm;
		__m256i s8 = v4k_sb(wb + b * Q4K_BYTES, A->q[b], A->bs[b], &pm);
		__m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
		__m128i t = _mm_hadd_epi32(s, pm);
		t = _mm_hadd_epi32(t, t);
		const uint8_t *w = wb + b * Q4K_BYTES;
		__m128 P = _mm_mul_ps(_mm_setr_ps(ld_fp16(w), ld_fp16(w + 2), 0.0f, 0.0f), _mm_set1_ps(a[b].d));
		am = _mm_fmadd_ps(P, _mm_cvtepi32_ps(t), am);
	}
	return _mm_cvtss_f32(am) - _mm_cvtss_f32(_mm_movehdup_ps(am));
}

static void v_dotn_q4_k(int64_t k, const void *w, size_t ws, int64_t n, const void *act, uint8_t *out, size_t os)
{
	const int64_t nsb = k / QKK;
	struct v4k_act A;
	if (nsb <= V4K_SB)
		v4k_fill(&A, act, nsb);
	for (int64_t r = 0; r < n; r++) {
		float v;
		if (nsb <= V4K_SB)
			v = v4k_row(nsb, (const uint8_t *)w + (size_t)r * ws, act, &A);
		else
			cpu_q4k_gemv_avx2(k, (const uint8_t *)w + (size_t)r * ws, act, &v);
		memcpy(out + (size_t)r * os, &v, 4);
	}
}

/* 8 x 8 dwords: in[r] = row r -> out[q] = dword q of rows 0..7 */
static inline void transpose8(const __m256i *in, __m256i *out)
{
	__m256i t[8], u[8];
	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
		t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
	}
	for (int h = 0; h < 2; h++) {
		const __m256i *a = t + 4 * h;
		u[4 * h + 0] = _mm256_unpacklo_epi64(a[0], a[2]);
		u[4 * h + 1] = _mm256_unpackhi_epi64(a[0], a[2]);
		u[4 * h + 2] = _mm256_unpacklo_epi64(a[1], a[3]);
		u[4 * h + 3] = _mm256_unpackhi_epi64(a[1], a[3]);
	}
	for (int q = 0; q < 4; q++) {
		out[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
		out[q + 4] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
	}
}

static void unpack8(const uint8_t *w, size_t ws, int64_t b, uint8_t *u)
{
	const __m256i m4 = _mm256_set1_epi8(0xf);
	for (int p = 0; p < 4; p++) {
		__m256i lo[8], hi[8], out[8];
		for (int r = 0; r < 8; r++) {
			__m256i z = _mm256_loadu_si256((const __m256i *)(w + (size_t)r * ws + b * Q4K_BYTES + 16 + 32 * p));
			lo[r] = _mm256_and_si256(z, m4);
			hi[r] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
		}
		transpose8(lo, out);
		for (int q = 0; q < 8; q++)
			_mm256_storeu_si256((__m256i *)(u + (16 * p + q) * 32), out[q]);
		transpose8(hi, out);
		for (int q = 0; q < 8; q++)
			_mm256_storeu_si256((__m256i *)(u + (16 * p + 8 + q) * 32), out[q]);
	}
	int32_t *sc = (int32_t *)(u + V_Q), *mn = (int32_t *)(u + V_SC);
	float *d = (float *)(u + V_MN), *dm = (float *)(u + V_D);
	for (int r = 0; r < 8; r++) {
		const uint8_t *blk = w + (size_t)r * ws + b * Q4K_BYTES;
		uint8_t s8[16];
		sc_mn(blk, s8);
		for (int j = 0; j < 8; j++)
			sc[j * 8 + r] = (int32_t)((uint32_t)s8[j] | (uint32_t)s8[j] << 16);
		for (int p = 0; p < 4; p++)
			mn[p * 8 + r] = (int32_t)((uint32_t)s8[8 + 2 * p] | (uint32_t)s8[9 + 2 * p] << 16);
		d[r] = ld_fp16(blk);
		dm[r] = ld_fp16(blk + 2);
	}
}

static inline __attribute__((always_inline)) void rows_block8(int mr, const uint8_t *u, const struct act_q8_k *const *a,
							      __m256 *acc, __m256 *accm)
{
	__m256i S[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) S[r] = _mm256_setzero_si256();
	for (int j = 0; j < 8; j++) {
		__m256i t[4];
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) t[r] = _mm256_setzero_si256();
		_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
			__m256i wz = _mm256_loadu_si256((const __m256i *)(u + (8 * j + q) * 32));
			_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
				int32_t x;
				memcpy(&x, a[r]->q + 32 * j + 4 * q, 4);
				t[r] = _mm256_add_epi16(t[r], _mm256_maddubs_epi16(wz, _mm256_set1_epi32(x)));
			}
		}
		__m256i sc = _mm256_loadu_si256((const __m256i *)(u + V_Q + 32 * j));
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(t[r], sc));
	}
	__m256 d = _mm256_loadu_ps((const float *)(u + V_MN)), dm = _mm256_loadu_ps((const float *)(u + V_D));
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[r]->bsums),
					    _mm_loadu_si128((const __m128i *)(a[r]->bsums + 8)));
		int32_t bp[4];
		_mm_storeu_si128((__m128i *)bp, bs);
		__m256i Mi = _mm256_setzero_si256();
		for (int p = 0; p < 4; p++)
			Mi = _mm256_add_epi32(Mi, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(u + V_SC + 32 * p)),
								    _mm256_set1_epi32(bp[p])));
		__m256 da = _mm256_set1_ps(a[r]->d);
		acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(S[r]), acc[r]);
		accm[r] = _mm256_fmadd_ps(_mm256_mul_ps(dm, da), _mm256_cvtepi32_ps(Mi), accm[r]);
	}
}

static inline __attribute__((always_inline)) void rows_tile8(int mr, int64_t nb, const uint8_t *un,
							     const struct act_q8_k *a0, size_t astride, int64_t m,
							     uint8_t *out, size_t os_n, size_t os_m)
{
	const struct act_q8_k *a[4];
	__m256 acc[4], accm[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
		acc[r] = _mm256_setzero_ps();
		accm[r] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++) {
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++)
			a[r] = (const struct act_q8_k *)((const uint8_t *)a0 + (size_t)(m + r) * astride) + b;
		rows_block8(mr, un + (size_t)b * V_BYTES, a, acc, accm);
	}
	for (int r = 0; r < mr; r++) {
		float v[8];
		_mm256_storeu_ps(v, _mm256_sub_ps(acc[r], accm[r]));
		uint8_t *o = out + (size_t)(m + r) * os_m;
		for (int n = 0; n < 8; n++)
			memcpy(o + n * os_n, &v[n], 4);
	}
}

static void v_gemm_q4_k(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	int64_t nb = k / QKK;
	size_t astride = (size_t)nb * sizeof(struct act_q8_k);
	uint8_t *un = scratch;
	for (int h = 0; h < 2; h++) {
		const uint8_t *wh = (const uint8_t *)w + (size_t)(8 * h) * ws;
		uint8_t *oh = out + (size_t)(8 * h) * os_n;
		for (int64_t b = 0; b < nb; b++)
			unpack8(wh, ws, b, un + (size_t)b * V_BYTES);
		int64_t m = 0;
		for (; m + 4 <= M; m += 4)
			rows_tile8(4, nb, un, act, astride, m, oh, os_n, os_m);
		for (; m < M; m++)
			rows_tile8(1, nb, un, act, astride, m, oh, os_n, os_m);
	}
}

/* ---- Q6_K in the same shape: S_b = sum_j sc_j (dot_j - 32 bsum_j) over
 * its 16-element sub-blocks (exact), acc = fma(d_w d_a, S_b, acc). ---- */
#define Q6K_BYTES 210
/* per superblock of 8 rows: 6-bit values [64 quads][8 rows][4], scales
 * [16][8] (i16 pair sc, sc), scale pairs [8][8] (sc[2p], sc[2p + 1]), d [8] */
#define W_SC 2048
#define W_SP (W_SC + 16 * 32)
#define W_D (W_SP + 8 * 32)
#define W_BYTES (W_D + 32)
_Static_assert(W_BYTES <= 32 * QKK, "cpu_gemm_scratch(k) >= k * 32");

/* the superblock's 256 values 0..63 in element order, 32 per vector */
static inline void q6_values(const uint8_t *blk, __m256i *v)
{
	const __m256i m4 = _mm256_set1_epi8(0xf), m2 = _mm256_set1_epi8(3);
	for (int n = 0; n < 2; n++) {
		__m256i l0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * n));
		__m256i l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * n + 32));
		__m256i h = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
		v[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
		v[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
		v[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
		v[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
	}
}

static void v_dot_q6_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	float acc = 0.0f;
	for (int64_t b = 0; b < k / QKK; b++, wb += Q6K_BYTES, a++) {
		prefetch_ahead(wb, Q6K_BYTES);
		/* the 16 scales as words; the offset 32 sum sc_j bsum_j in 8 lanes */
		__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wb + 192)));
		__m256i s = _mm256_sub_epi32(_mm256_setzero_si256(),
					     _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bsums)), 5));
		const __m256i half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
		__m256i v[8];
		q6_values(wb, v);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++) { /* 32 values: sub-blocks 2c, 2c + 1 */
			__m256i p = _mm256_maddubs_epi16(v[c], _mm256_loadu_si256((const __m256i *)(a->q + 32 * c)));
			/* low lane: word 2c of the scales, high lane: word 2c + 1 */
			const char w0 = (char)(4 * (c % 4)), w1 = (char)(4 * (c % 4) + 2);
			__m256i scv = _mm256_shuffle_epi8(half[c / 4], _mm256_setr_epi8(w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w0, w0 + 1,
									  w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w0, w0 + 1,
									  w1, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1, w1 + 1,
									  w1, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1, w1 + 1));
			s = _mm256_add_epi32(s, _mm256_madd_epi16(p, scv));
		}
		__m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
		r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
		int32_t S = _mm_cvtsi128_si32(r);
		acc = fmaf(ld_fp16(wb + 208) * a->d, (float)S, acc);
	}
	*out = acc;
}

static void unpack8_q6(const uint8_t *w, size_t ws, int64_t b, uint8_t *u)
{
	__m256i v[8][8], in[8], out[8];
	for (int r = 0; r < 8; r++)
		q6_values(w + (size_t)r * ws + b * Q6K_BYTES, v[r]);
	for (int c = 0; c < 8; c++) {
		for (int r = 0; r < 8; r++)
			in[r] = v[r][c];
		transpose8(in, out);
		for (int q = 0; q < 8; q++)
			_mm256_storeu_si256((__m256i *)(u + (8 * c + q) * 32), out[q]);
	}
	int32_t *sc = (int32_t *)(u + W_SC), *sp = (int32_t *)(u + W_SP);
	float *d = (float *)(u + W_D);
	for (int r = 0; r < 8; r++) {
		const uint8_t *blk = w + (size_t)r * ws + b * Q6K_BYTES;
		const int8_t *s8 = (const int8_t *)(blk + 192);
		for (int j = 0; j < 16; j++)
			sc[j * 8 + r] = (int32_t)((uint32_t)(uint16_t)s8[j] | (uint32_t)(uint16_t)s8[j] << 16);
		for (int p = 0; p < 8; p++)
			sp[p * 8 + r] = (int32_t)((uint32_t)(uint16_t)s8[2 * p] | (uint32_t)(uint16_t)s8[2 * p + 1] << 16);
		d[r] = ld_fp16(blk + 208);
	}
}

static inline __attribute__((always_inline)) void q6_block8(int mr, const uint8_t *u, const struct act_q8_k *const *a,
							    __m256 *acc)
{
	__m256i S[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) S[r] = _mm256_setzero_si256();
	for (int j = 0; j < 16; j++) {
		__m256i sc = _mm256_loadu_si256((const __m256i *)(u + W_SC + 32 * j));
		_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) { /* quads 4j + 2h, 4j + 2h + 1: int16 sums fit */
			__m256i w0 = _mm256_loadu_si256((const __m256i *)(u + (4 * j + 2 * h) * 32));
			__m256i w1 = _mm256_loadu_si256((const __m256i *)(u + (4 * j + 2 * h + 1) * 32));
			_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
				int32_t x0, x1;
				memcpy(&x0, a[r]->q + 16 * j + 8 * h, 4);
				memcpy(&x1, a[r]->q + 16 * j + 8 * h + 4, 4);
				__m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(x0)),
							     _mm256_maddubs_epi16(w1, _mm256_set1_epi32(x1)));
				S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(t, sc));
			}
		}
	}
	__m256 d = _mm256_loadu_ps((const float *)(u + W_D));
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
		int32_t bp[8];
		memcpy(bp, a[r]->bsums, 32); /* pairs (bsum 2p, bsum 2p + 1) */
		__m256i o = _mm256_setzero_si256();
		for (int p = 0; p < 8; p++)
			o = _mm256_add_epi32(o, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(u + W_SP + 32 * p)),
								  _mm256_set1_epi32(bp[p])));
		__m256i St = _mm256_sub_epi32(S[r], _mm256_slli_epi32(o, 5));
		acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[r]->d)), _mm256_cvtepi32_ps(St), acc[r]);
	}
}

static inline __attribute__((always_inline)) void q6_tile8(int mr, int64_t nb, const uint8_t *un,
							   const struct act_q8_k *a0, size_t astride, int64_t m,
							   uint8_t *out, size_t os_n, size_t os_m)
{
	const struct act_q8_k *a[4];
	__m256 acc[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) acc[r] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++)
			a[r] = (const struct act_q8_k *)((const uint8_t *)a0 + (size_t)(m + r) * astride) + b;
		q6_block8(mr, un + (size_t)b * W_BYTES, a, acc);
	}
	for (int r = 0; r < mr; r++) {
		float v[8];
		_mm256_storeu_ps(v, acc[r]);
		uint8_t *o = out + (size_t)(m + r) * os_m;
		for (int n = 0; n < 8; n++)
			memcpy(o + n * os_n, &v[n], 4);
	}
}

static void v_gemm_q6_k(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	int64_t nb = k / QKK;
	size_t astride = (size_t)nb * sizeof(struct act_q8_k);
	uint8_t *un = scratch;
	for (int h = 0; h < 2; h++) {
		const uint8_t *wh = (const uint8_t *)w + (size_t)(8 * h) * ws;
		uint8_t *oh = out + (size_t)(8 * h) * os_n;
		for (int64_t b = 0; b < nb; b++)
			unpack8_q6(wh, ws, b, un + (size_t)b * W_BYTES);
		int64_t m = 0;
		for (; m + 4 <= M; m += 4)
			q6_tile8(4, nb, un, act, astride, m, oh, os_n, os_m);
		for (; m < M; m++)
			q6_tile8(1, nb, un, act, astride, m, oh, os_n, os_m);
	}
}

/* ---- Q4_0: four chains per output, per block the exact S_b = sum (q - 8) a,
 * acc_{b%4} = fma(d_w d_a, S_b, acc_{b%4}) (vec_kgemm512.c's order) ---- */
#define Q40_BYTES 18
#define X_D 256 /* per block of 8 rows: nibbles [8 quads][8 rows][4], d [8] */
#define X_BYTES (X_D + 32)
_Static_assert(X_BYTES <= 32 * QK8, "cpu_gemm_scratch(k) >= k * 32");

static inline __m256i q40_nibbles(const uint8_t *blk)
{
	__m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
	const __m128i m4 = _mm_set1_epi8(0xf);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

/* sum of the 32 int8 of a block */
static inline int32_t q8_sum32(const int8_t *q)
{
	__m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)q)),
				      _mm256_set1_epi16(1));
	__m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
	r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
	return _mm_cvtsi128_si32(r);
}

/* 8 int32 lanes of one block's (q - 8) . a products (sign trick: |w| as u8
 * against a with w's sign) */
static inline __m256i q40_lanes(const uint8_t *blk, __m256i av)
{
	__m256i wv = _mm256_sub_epi8(q40_nibbles(blk), _mm256_set1_epi8(8));
	return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv)),
				 _mm256_set1_epi16(1));
}

static void v_dot_q4_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int64_t b = 0; b < k / QK8; b++, wb += Q40_BYTES, a++) {
		prefetch_ahead(wb, Q40_BYTES);
		__m256i p = q40_lanes(wb, _mm256_loadu_si256((const __m256i *)a->q));
		__m128i r = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
		r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
		r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
		acc[b & 3] = fmaf(ld_fp16(wb) * a->d, (float)_mm_cvtsi128_si32(r), acc[b & 3]);
	}
	*out = q40_chains(acc);
}

/* Decode, one row at a time (rows read one after another stream from DRAM
 * better than 4 side by side: K=2048 N=65536, 1 thread, ~8.8 vs ~12 ms
 * CPU), the same per-block chain: per group of 4 blocks the raw nibbles
 * (u8) against a, 8 x sum(a) subtracted after the 4 block sums are formed
 * together. Two blocks share a vector (block 2p's 16 bytes in the low lane,
 * 2p + 1's in the high one), so one mask and shift unpack both, and their
 * low- and high-nibble products add as int16 (at most 2 x 2 x 15 x 128)
 * before one madd; the activation side is laid out to match once per call. */
struct q40_g4 {
	__m128i sa8; /* 8 x sum(a) of each block */
	__m128 da;
	__m256i alo[2], ahi[2]; /* pair p: a[0..15] / a[16..31] of blocks 2p | 2p + 1 */
};

static inline __attribute__((always_inline)) float q40_row1(const bool vnni, int64_t ng, int64_t nb, const uint8_t *blk,
							    const struct q40_g4 *G, const struct act_q8_0 *a)
{
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0xf);
	const __m128i pick = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
	__m128 acc = _mm_setzero_ps();
	for (int64_t g = 0; g < ng; g++, blk += 4 * Q40_BYTES) {
		prefetch_ahead(blk, 4 * Q40_BYTES);
		__m256i x[2];
#pragma GCC unroll 2
		for (int p = 0; p < 2; p++) {
			__m256i v = _mm256_loadu2_m128i((const __m128i *)(blk + (2 * p + 1) * Q40_BYTES + 2),
							(const __m128i *)(blk + 2 * p * Q40_BYTES + 2));
			__m256i wl = _mm256_and_si256(v, m4), wh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
			if (vnni) {
				x[p] = dpbusd_vex(dpbusd_vex(_mm256_setzero_si256(), wl, G[g].alo[p]), wh, G[g].ahi[p]);
			} else {
				__m256i lo = _mm256_maddubs_epi16(wl, G[g].alo[p]), hi = _mm256_maddubs_epi16(wh, G[g].ahi[p]);
				x[p] = _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones);
			}
		}
		/* lanes: low [b0 b0 b2 b2], high [b1 b1 b3 b3] -> [b0 b2 . .], [b1 b3 . .] */
		__m256i h = _mm256_hadd_epi32(x[0], x[1]);
		h = _mm256_hadd_epi32(h, h);
		__m128i S = _mm_sub_epi32(_mm_unpacklo_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)), G[g].sa8);
		__m128 Sf = _mm_cvtepi32_ps(S);
		uint32_t dw[4];
		for (int j = 0; j < 4; j++)
			memcpy(&dw[j], blk + j * Q40_BYTES, 4);
		__m128i hw = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)dw), pick);
		__m128 P = _mm_mul_ps(_mm_cvtph_ps(hw), G[g].da);
		acc = _mm_fmadd_ps(P, Sf, acc); /* lane j: chain j */
	}
	float r[4];
	_mm_storeu_ps(r, acc);
	for (int64_t c = 4 * ng; c < nb; c++, blk += Q40_BYTES) { /* the last nb % 4 blocks */
		__m256i pv = q40_lanes(blk, _mm256_loadu_si256((const __m256i *)a[c].q));
		__m128i x = _mm_add_epi32(_mm256_castsi256_si128(pv), _mm256_extracti128_si256(pv, 1));
		x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
		x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 1));
		r[c & 3] = fmaf(ld_fp16(blk) * a[c].d, (float)_mm_cvtsi128_si32(x), r[c & 3]);
	}
	return q40_chains(r);
}

static void q40_g4_fill(const struct act_q8_0 *a, int64_t ng, struct q40_g4 *G)
{
	for (int64_t g = 0; g < ng; g++) {
		const struct act_q8_0 *ab = a + 4 * g;
		G[g].sa8 = _mm_slli_epi32(_mm_setr_epi32(q8_sum32(ab[0].q), q8_sum32(ab[1].q), q8_sum32(ab[2].q), q8_sum32(ab[3].q)), 3);
		G[g].da = _mm_setr_ps(ab[0].d, ab[1].d, ab[2].d, ab[3].d);
		for (int p = 0; p < 2; p++) {
			G[g].alo[p] = _mm256_loadu2_m128i((const __m128i *)ab[2 * p + 1].q, (const __m128i *)ab[2 * p].q);
			G[g].ahi[p] = _mm256_loadu2_m128i((const __m128i *)(ab[2 * p + 1].q + 16), (const __m128i *)(ab[2 * p].q + 16));
		}
	}
}

static inline __attribute__((always_inline)) void q40_dotr4s(const bool vnni, int64_t k, const void *w, size_t ws,
							      const void *act, float *out)
{
	const struct act_q8_0 *a = act;
	int64_t nb = k / QK8, ng = nb / 4;
	if (ng > 64) { /* over 8192 inputs: not laid out, the single-row steps */
		for (int r = 0; r < 4; r++)
			v_dot_q4_0(k, (const uint8_t *)w + (size_t)r * ws, act, out + r);
		return;
	}
	struct q40_g4 G[64];
	q40_g4_fill(a, ng, G);
	for (int r = 0; r < 4; r++)
		out[r] = q40_row1(vnni, ng, nb, (const uint8_t *)w + (size_t)r * ws, G, a);
}

/* decode: n rows one after another, the activation side laid out once */
static inline __attribute__((always_inline)) void q40_dotn(const bool vnni, int64_t k, const void *w, size_t ws, int64_t n,
							    const void *act, uint8_t *out, size_t os)
{
	const struct act_q8_0 *a = act;
	int64_t nb = k / QK8, ng = nb / 4;
	struct q40_g4 G[64];
	if (ng <= 64)
		q40_g4_fill(a, ng, G);
	for (int64_t r = 0; r < n; r++) {
		float v;
		if (ng <= 64)
			v = q40_row1(vnni, ng, nb, (const uint8_t *)w + (size_t)r * ws, G, a);
		else
			v_dot_q4_0(k, (const uint8_t *)w + (size_t)r * ws, act, &v);
		memcpy(out + (size_t)r * os, &v, 4);
	}
}

static void v_dotr4s_q4_0(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	q40_dotr4s(false, k, w, ws, act, out);
}

static void vn_dotr4s_q4_0(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	q40_dotr4s(true, k, w, ws, act, out);
}

static void v_dotn_q4_0(int64_t k, const void *w, size_t ws, int64_t n, const void *act, uint8_t *out, size_t os)
{
	q40_dotn(false, k, w, ws, n, act, out, os);
}

static void vn_dotn_q4_0(int64_t k, const void *w, size_t ws, int64_t n, const void *act, uint8_t *out, size_t os)
{
	q40_dotn(true, k, w, ws, n, act, out, os);
}

static void unpack8_q40(const uint8_t *w, size_t ws, int64_t b, uint8_t *u)
{
	__m256i in[8], out[8];
	float *d = (float *)(u + X_D);
	for (int r = 0; r < 8; r++) {
		const uint8_t *blk = w + (size_t)r * ws + b * Q40_BYTES;
		in[r] = q40_nibbles(blk);
		d[r] = ld_fp16(blk);
	}
	transpose8(in, out);
	for (int q = 0; q < 8; q++)
		_mm256_storeu_si256((__m256i *)(u + q * 32), out[q]);
}

static inline __attribute__((always_inline)) void q40_tile8(int mr, const bool vnni, int64_t nb, const uint8_t *un,
							    const struct act_q8_0 *a0, size_t astride, int64_t m,
							    uint8_t *out, size_t os_n, size_t os_m)
{
	__m256 part[4][4];
	const __m256i one16 = _mm256_set1_epi16(1);
	for (int c = 0; c < 4; c++) {
	__m256 acc[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) acc[r] = _mm256_setzero_ps();
	for (int64_t b = c; b < nb; b += 4) {
		const uint8_t *u = un + (size_t)b * X_BYTES;
		const struct act_q8_0 *a[4];
		__m256i t[4];
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
			a[r] = (const struct act_q8_0 *)((const uint8_t *)a0 + (size_t)(m + r) * astride) + b;
			t[r] = _mm256_setzero_si256();
		}
		_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
			__m256i wz = _mm256_loadu_si256((const __m256i *)(u + q * 32));
			_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
				int32_t x;
				memcpy(&x, a[r]->q + 4 * q, 4);
				if (vnni) /* int32 lanes directly */
					t[r] = dpbusd_vex(t[r], wz, _mm256_set1_epi32(x));
				else
					t[r] = _mm256_add_epi16(t[r], _mm256_maddubs_epi16(wz, _mm256_set1_epi32(x)));
			}
		}
		__m256 d = _mm256_loadu_ps((const float *)(u + X_D));
		_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) {
			__m256i S = _mm256_sub_epi32(vnni ? t[r] : _mm256_madd_epi16(t[r], one16),
						     _mm256_set1_epi32(8 * q8_sum32(a[r]->q)));
			acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[r]->d)), _mm256_cvtepi32_ps(S), acc[r]);
		}
	}
	_Pragma("GCC unroll 4") for (int r = 0; r < mr; r++) part[c][r] = acc[r];
	}
	for (int r = 0; r < mr; r++) {
		float v[8];
		_mm256_storeu_ps(v, _mm256_add_ps(_mm256_add_ps(part[0][r], part[1][r]), _mm256_add_ps(part[2][r], part[3][r])));
		uint8_t *o = out + (size_t)(m + r) * os_m;
		for (int n = 0; n < 8; n++)
			memcpy(o + n * os_n, &v[n], 4);
	}
}

static inline __attribute__((always_inline)) void q40_gemm(const bool vnni, int64_t k, const void *w, size_t ws,
							   const void *act, int64_t M, uint8_t *out, size_t os_n,
							   size_t os_m, void *scratch)
{
	int64_t nb = k / QK8;
	size_t astride = (size_t)nb * sizeof(struct act_q8_0);
	uint8_t *un = scratch;
	for (int h = 0; h < 2; h++) {
		const uint8_t *wh = (const uint8_t *)w + (size_t)(8 * h) * ws;
		uint8_t *oh = out + (size_t)(8 * h) * os_n;
		for (int64_t b = 0; b < nb; b++)
			unpack8_q40(wh, ws, b, un + (size_t)b * X_BYTES);
		int64_t m = 0;
		for (; m + 4 <= M; m += 4)
			q40_tile8(4, vnni, nb, un, act, astride, m, oh, os_n, os_m);
		for (; m < M; m++)
			q40_tile8(1, vnni, nb, un, act, astride, m, oh, os_n, os_m);
	}
}

static void v_gemm_q4_0(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	q40_gemm(false, k, w, ws, act, M, out, os_n, os_m, scratch);
}

static void vn_gemm_q4_0(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			 size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	q40_gemm(true, k, w, ws, act, M, out, os_n, os_m, scratch);
}

void cpu_kernels_kgemm2(struct cpu_kernels *k, bool exact, bool vnni)
{
	if (exact)
		return;
	k->dot[ALICE_TYPE_Q4_0] = v_dot_q4_0;
	k->dotr4[ALICE_TYPE_Q4_0] = vnni ? vn_dotr4s_q4_0 : v_dotr4s_q4_0;
	k->dotn[ALICE_TYPE_Q4_0] = vnni ? vn_dotn_q4_0 : v_dotn_q4_0;
	k->gemm[ALICE_TYPE_Q4_0] = vnni ? vn_gemm_q4_0 : v_gemm_q4_0;
	k->gemm_rows[ALICE_TYPE_Q4_0] = true;
	k->dot[ALICE_TYPE_Q6_K] = v_dot_q6_k;
	k->gemm[ALICE_TYPE_Q6_K] = v_gemm_q6_k;
	k->gemm_rows[ALICE_TYPE_Q6_K] = true;
	k->dot[ALICE_TYPE_Q4_K] = cpu_q4k_gemv_avx2;
	k->dotn[ALICE_TYPE_Q4_K] = v_dotn_q4_k;
	k->gemm[ALICE_TYPE_Q4_K] = v_gemm_q4_k;
	k->gemm_rows[ALICE_TYPE_Q4_K] = true;
}
#endif
