/* vec_amx.c — AVX-512 + AMX (Sapphire Rapids and later) kernels for the
 * weight types that dominate real models: Q8_0, Q4_K and Q6_K.
 *
 * One accumulation order, shared by the decode mat-vec and the prefill GEMM
 * so that a sequence's logits do not depend on the batch it sits in: per
 * output, the exact integer sum of each block (for K-quants: the block's
 * scaled sub-block sums, and for Q4_K separately the mins term) is converted
 * to float and added in block order, acc = fma(dw * da, (float)S_b, acc),
 * starting from 0 (Q4_K: result = acc - accm, accm the same chain of the mins
 * term). The integer sums are exact however they are formed (VNNI lanes in
 * the mat-vec, AMX tiles in the GEMM), so both paths give the same bits.
 *
 * The GEMM reads weights in their file layout (16 rows x one block per A
 * tile, rows `wstride` apart; K-quants are first widened to int8 per group of
 * 16 rows into thread scratch) and activations from a packed copy made once
 * per op (cpu_internal.h: struct apack_*): 16 activation rows per group,
 * 4 consecutive k of each row side by side, the layout AMX's B operand wants.
 *
 * Built with -mamx-tile -mamx-int8 (+ AVX-512); only called when cpuid says
 * so and the OS granted the tile state (vec_scalar.c). */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) && defined(__AMX_INT8__)
#include <immintrin.h>

#include "vec_x86.h"

/* ---- prefill: AMX GEMM, 16 weight rows x 16 activation rows per tile ---- */

/* GCC 12's _tile_loadd has no memory clobber and its _tile_loadconfig tells
 * the compiler it reads 8 bytes (so the zeroing of the rest was dropped):
 * our own statements, ordered with the stores that fill what they read. */
#define TILE_LOADD(t, base, stride)                                                                  \
	__asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)), "r"((long)(stride)) \
			 : "memory")

struct tilecfg {
	uint8_t palette, start_row;
	uint8_t rsv[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* ALICE_CPU_EXACT=1: Q4_K prefill rows of a sequence in groups of 4 take
 * llama.cpp's repacked-gemm order (one fma per pair of sub-blocks: 4 tile
 * stores per superblock instead of 1; Q4_K prefill ~1.3x slower). Default:
 * every row its gemv order (exact for decode and for llama.cpp's last
 * count % 4 rows; other prefill rows differ from it in the last bits). */
static bool x_q4k_exact;

/* Write a 16 x 16 float tile acc[n] (lanes = activation rows) to out. */
static void tile_out(const __m512 *acc, int64_t mvalid, uint8_t *out, size_t os_n, size_t os_m)
{
	float t[16][16];
	for (int n = 0; n < 16; n++)
		_mm512_storeu_ps(t[n], acc[n]);
	if (os_n == 4) {
		for (int64_t m = 0; m < mvalid; m++) {
			float *o = (float *)(out + (size_t)m * os_m);
			for (int n = 0; n < 16; n++)
				o[n] = t[n][m];
		}
		return;
	}
	for (int64_t m = 0; m < mvalid; m++)
		for (int n = 0; n < 16; n++)
			memcpy(out + (size_t)n * os_n + (size_t)m * os_m, &t[n][m], 4);
}

/* K-quant weights of 16 rows widened to int8 [nq][16][k] (Q4_K: two scaled
 * copies, Q6_K: q - 32) plus per superblock and row: scales as int32 [sb][sub][16],
 * d (and dmin, Q4_K mins as int16 pairs) as [sb][16]. */
struct kq_scratch {
	int8_t *q;
	int32_t *sc, *mp;
	float *d, *dmin;
	int32_t *cb;
};

static struct kq_scratch kq_layout(void *scratch, int64_t k, int nq, int nsub)
{
	struct kq_scratch s;
	int64_t nsb = k / QKK;
	uint8_t *p = scratch;
	s.q = (int8_t *)p;
	p += (size_t)nq * 16 * (size_t)k;
	s.sc = (int32_t *)p;
	p += (size_t)nsb * nsub * 64;
	s.mp = (int32_t *)p;
	p += (size_t)nsb * 4 * 64;
	s.d = (float *)p;
	p += (size_t)nsb * 64;
	s.dmin = (float *)p;
	p += (size_t)nsb * 64;
	s.cb = (int32_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
	return s;
}

/* Q4_K: q (0..15) times its 6-bit sub-block scale does not fit in int8, but
 * q * (scale & 7) and q * (scale >> 3) do (<= 105): two int8 copies of the
 * 16 rows, each one AMX product over the whole superblock (K = 64 steps),
 * S = lo + 8 hi, the same integer as the sum over sub-blocks of scale * dot. */
static void x_gemm_q4_k(int64_t k, const void *w, size_t ws, const void *apack, int64_t M, uint8_t *out,
			size_t os_n, size_t os_m, void *scratch, const uint8_t *grp)
{
	int64_t nsb = k / QKK;
	struct kq_scratch s = kq_layout(scratch, k, 2, 0);
	int8_t *qlo = s.q, *qhi = s.q + 16 * k;
	const __m512i m4 = _mm512_set1_epi8(0xf);
	static const int8_t mul_tab[8][16] = {
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
		{0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45},
		{0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60},
		{0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75},
		{0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90},
		{0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 84, 91, 98, 105},
	};
	for (int n = 0; n < 16; n++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)n * ws;
		for (int64_t b = 0; b < nsb; b++) {
			const uint8_t *wb = row + b * 144;
			s.d[b * 16 + n] = ld_fp16(wb);
			s.dmin[b * 16 + n] = ld_fp16(wb + 2);
			uint32_t u[4];
			k4_scales_mins(wb + 4, u);
			const uint8_t *sm = (const uint8_t *)u;
			for (int p = 0; p < 4; p++)
				s.mp[(b * 4 + p) * 16 + n] = (int32_t)((uint32_t)sm[8 + 2 * p] | ((uint32_t)sm[9 + 2 * p] << 16));
			size_t off = (size_t)n * k + b * 256;
			for (int h = 0; h < 2; h++) {
				__m512i q4 = _mm512_loadu_si512((const void *)(wb + 16 + 64 * h));
				__m512i lo = _mm512_and_si512(q4, m4);
				__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
				/* natural order: sub-blocks 4h, 4h+1 then 4h+2, 4h+3 */
				__m512i x[2] = {_mm512_shuffle_i64x2(lo, hi, 0x44), _mm512_shuffle_i64x2(lo, hi, 0xee)};
				for (int e = 0; e < 2; e++) {
					int j = 4 * h + 2 * e;
					int s0 = sm[j], s1 = sm[j + 1];
#define TAB2(a, b)                                                                                          \
	_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mul_tab[a]))), \
			   _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mul_tab[b])), 1)
					__m512i tl = TAB2(s0 & 7, s1 & 7), th = TAB2(s0 >> 3, s1 >> 3);
#undef TAB2
					_mm512_storeu_si512((void *)(qlo + off + 128 * h + 64 * e), _mm512_shuffle_epi8(tl, x[e]));
					_mm512_storeu_si512((void *)(qhi + off + 128 * h + 64 * e), _mm512_shuffle_epi8(th, x[e]));
				}
			}
		}
	}
	{
		struct tilecfg c;
		memset(&c, 0, sizeof(c));
		c.palette = 1;
		for (int t = 0; t < 8; t++) { /* C 0,3,5,6; A 1,4; B 2,7: all 16 x 64 bytes */
			c.rows[t] = 16;
			c.colsb[t] = 64;
		}
		__asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
	}
	for (int64_t g = 0; g * 16 < M; g++) {
		const struct apack_q8_k *pg = (const struct apack_q8_k *)apack + g * nsb;
		__m512 acc[16], accm[16];
		for (int n = 0; n < 16; n++)
			acc[n] = accm[n] = _mm512_setzero_ps();
		/* rows in llama.cpp's grouped regime take one fma per pair of
		 * sub-blocks (its gemm), the others one per superblock (its gemv) */
		__mmask16 gm = 0;
		for (int64_t m = 0; grp && x_q4k_exact && m < 16 && g * 16 + m < M; m++)
			if (grp[g * 16 + m])
				gm |= (__mmask16)(1u << m);
		/* software pipeline: the tiles of superblock b + 1 are multiplied
		 * and stored (into the other half of cb) while b is scaled */
#define Q4H(bb, buf, h, t0, t1, tb)                                              \
	do {                                                                     \
		TILE_LOADD(tb, pg[bb].q + 1024 * (h), 64);                       \
		_tile_zero(t0);                                                  \
		TILE_LOADD(1, qlo + (bb) * 256 + 64 * (h), (long)k);             \
		_tile_dpbssd(t0, 1, tb);                                         \
		_tile_zero(t1);                                                  \
		TILE_LOADD(4, qhi + (bb) * 256 + 64 * (h), (long)k);             \
		_tile_dpbssd(t1, 4, tb);                                         \
		_tile_stored(t0, (buf) + 512 * (h), 64);                         \
		_tile_stored(t1, (buf) + 512 * (h) + 256, 64);                   \
	} while (0)
#define Q4ISSUE(bb, buf)                   \
	do {                               \
		Q4H(bb, buf, 0, 0, 3, 2);  \
		Q4H(bb, buf, 1, 5, 6, 7);  \
		Q4H(bb, buf, 2, 0, 3, 2);  \
		Q4H(bb, buf, 3, 5, 6, 7);  \
	} while (0)
		if (!gm) { /* every row in gemv order: lo and hi summed in the tiles */
			for (int64_t b = 0; b < nsb; b++) {
				_tile_zero(0);
				_tile_zero(3);
				for (int h = 0; h < 4; h++) {
					TILE_LOADD(2, pg[b].q + 1024 * h, 64);
					TILE_LOADD(1, qlo + b * 256 + 64 * h, (long)k);
					_tile_dpbssd(0, 1, 2);
					TILE_LOADD(4, qhi + b * 256 + 64 * h, (long)k);
					_tile_dpbssd(3, 4, 2);
				}
				_tile_stored(0, s.cb, 64);
				_tile_stored(3, s.cb + 256, 64);
				__m512 da = _mm512_loadu_ps(pg[b].d);
				__m512i bsp[4];
				for (int p = 0; p < 4; p++)
					bsp[p] = _mm512_loadu_si512((const void *)pg[b].bsp[p]);
				for (int n = 0; n < 16; n++) {
					__m512i S = _mm512_add_epi32(_mm512_load_si512((const void *)(s.cb + 16 * n)),
								     _mm512_slli_epi32(_mm512_load_si512((const void *)(s.cb + 256 + 16 * n)), 3));
					acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s.d[b * 16 + n]), da),
								 _mm512_cvtepi32_ps(S), acc[n]);
					const int32_t *mp = s.mp + b * 4 * 16 + n;
					__m512i mt = _mm512_madd_epi16(bsp[0], _mm512_set1_epi32(mp[0]));
					mt = _mm512_add_epi32(mt, _mm512_madd_epi16(bsp[1], _mm512_set1_epi32(mp[16])));
					mt = _mm512_add_epi32(mt, _mm512_madd_epi16(bsp[2], _mm512_set1_epi32(mp[32])));
					mt = _mm512_add_epi32(mt, _mm512_madd_epi16(bsp[3], _mm512_set1_epi32(mp[48])));
					accm[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s.dmin[b * 16 + n]), da),
								  _mm512_cvtepi32_ps(mt), accm[n]);
				}
			}
			goto done;
		}
		Q4ISSUE(0, s.cb);
		for (int64_t b = 0; b < nsb; b++) {
			int32_t *cbb = s.cb + 2048 * (b & 1);
			if (b + 1 < nsb)
				Q4ISSUE(b + 1, s.cb + 2048 * ((b + 1) & 1));
			__m512 da = _mm512_loadu_ps(pg[b].d);
			__m512i bsp[4];
			for (int p = 0; p < 4; p++)
				bsp[p] = _mm512_loadu_si512((const void *)pg[b].bsp[p]);
			for (int n = 0; n < 16; n++) {
				__m512 d = _mm512_mul_ps(_mm512_set1_ps(s.d[b * 16 + n]), da);
				__m512 dm = _mm512_mul_ps(_mm512_set1_ps(s.dmin[b * 16 + n]), da);
				const int32_t *mp = s.mp + b * 4 * 16 + n;
				__m512i S[4], Mt[4];
				for (int h = 0; h < 4; h++) {
					S[h] = _mm512_add_epi32(_mm512_load_si512((const void *)(cbb + 512 * h + 16 * n)),
								_mm512_slli_epi32(_mm512_load_si512((const void *)(cbb + 512 * h + 256 + 16 * n)), 3));
					Mt[h] = _mm512_madd_epi16(bsp[h], _mm512_set1_epi32(mp[16 * h]));
				}
				if (gm != 0xffff) {
					__m512i st = _mm512_add_epi32(_mm512_add_epi32(S[0], S[1]), _mm512_add_epi32(S[2], S[3]));
					__m512i mt = _mm512_add_epi32(_mm512_add_epi32(Mt[0], Mt[1]), _mm512_add_epi32(Mt[2], Mt[3]));
					acc[n] = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(st), acc[n], (__mmask16)~gm);
					accm[n] = _mm512_mask3_fmadd_ps(dm, _mm512_cvtepi32_ps(mt), accm[n], (__mmask16)~gm);
				}
				if (gm)
					for (int h = 0; h < 4; h++) {
						acc[n] = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(S[h]), acc[n], gm);
						accm[n] = _mm512_mask3_fmadd_ps(dm, _mm512_cvtepi32_ps(Mt[h]), accm[n], gm);
					}
			}
		}
#undef Q4ISSUE
#undef Q4H
	done:		for (int n = 0; n < 16; n++)
			acc[n] = _mm512_sub_ps(acc[n], accm[n]);
		int64_t mv = M - g * 16 < 16 ? M - g * 16 : 16;
		tile_out(acc, mv, out + (size_t)(g * 16) * os_m, os_n, os_m);
	}
	_tile_release();
}

void cpu_kernels_amx(struct cpu_kernels *k)
{
	cpu_kernels_avx512(k); /* Q4_K/Q6_K mat-vecs (vec_kseq.h), Q8_0 (VNNI, llama.cpp's order) */
	const char *ex = getenv("ALICE_CPU_EXACT");
	x_q4k_exact = ex && *ex && strcmp(ex, "0") != 0;
	k->gemm[ALICE_TYPE_Q4_K] = x_gemm_q4_k;
	k->gemm_rows[ALICE_TYPE_Q4_K] = false; /* packed tiles, not vec_kgemm512.c's rows */
	k->isa = "avx512+amx";
}
#endif
