/* vec_x86.h — small inline helpers for the x86 kernel files (included only
 * by files compiled with at least AVX2 + FMA + F16C). */
#ifndef ALICE_CPU_VEC_X86_H
#define ALICE_CPU_VEC_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline float hsum256_ps(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* 4 int32 vectors -> one int32 sum per vector, in lanes 0..3 */
static inline __m128i red4_128(__m128i x0, __m128i x1, __m128i x2, __m128i x3)
{
	__m128i t0 = _mm_add_epi32(_mm_unpacklo_epi32(x0, x1), _mm_unpackhi_epi32(x0, x1));
	__m128i t1 = _mm_add_epi32(_mm_unpacklo_epi32(x2, x3), _mm_unpackhi_epi32(x2, x3));
	return _mm_add_epi32(_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1));
}

static inline __m128i red4_256(__m256i y0, __m256i y1, __m256i y2, __m256i y3)
{
	__m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(y0, y1), _mm256_unpackhi_epi32(y0, y1));
	__m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(y2, y3), _mm256_unpackhi_epi32(y2, y3));
	__m256i u = _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
	return _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

/* acc + the 4-byte dot of u8 u and s8 s per int32 lane (AVX-VNNI, the VEX
 * vpdpbusd: CPUs with AVX2 and no AVX-512, Alder Lake on, Zen 5). As asm so
 * that one always-inline kernel serves both tiers; call it only when
 * cpu_kernels_avx2 was told the CPU has it. */
static inline __m256i dpbusd_vex(__m256i acc, __m256i u, __m256i s)
{
	__asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
	return acc;
}

static inline float ld_fp16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

/* Weight rows stream from DRAM once per token: ask for the lines PF bytes
 * ahead of the block being read, enough to cover its size. */
#ifndef PREFETCH_DIST
#define PREFETCH_DIST 2048
#endif
/* 4-row decode kernels: the rows of a group lie one after another, so they
 * prefetch the same block DECODE_PF rows further on (the next groups). */
#ifndef DECODE_PF
#define DECODE_PF 4
#endif
static inline void prefetch_ahead(const uint8_t *p, int bytes)
{
	for (int o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *)p + PREFETCH_DIST + o, _MM_HINT_T0);
}

/* The 8 six-bit scales and mins of a Q4_K/Q5_K 12-byte field. */
static inline void k4_unpack(const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
	for (int j = 0; j < 4; j++) {
		sc[j] = q[j] & 63;
		mn[j] = q[j + 4] & 63;
		sc[j + 4] = (uint8_t)((q[j + 8] & 0xf) | ((q[j] >> 6) << 4));
		mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
	}
}

/* The same as 4 words: bytes 0..7 the scales, 8..15 the mins. */
static inline void k4_scales_mins(const uint8_t *q, uint32_t *u)
{
	memcpy(u, q, 12);
	const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
	uint32_t mins_hi = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
	uint32_t mins_lo = u[1] & m6;
	uint32_t sc_hi = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
	u[0] &= m6;
	u[1] = sc_hi;
	u[2] = mins_lo;
	u[3] = mins_hi;
}

/* k4_scales_mins in one xmm (lanes = its 4 words), from 16 bytes at q
 * (the 12-byte field and 4 bytes after it, which are not used) */
static inline __m128i k4_scales_mins_v(const uint8_t *q)
{
	__m128i raw = _mm_loadu_si128((const __m128i *)q);
	__m128i x = _mm_shuffle_epi32(raw, _MM_SHUFFLE(2, 1, 2, 0)); /* u0 u2 u1 u2 */
	__m128i y = _mm_shuffle_epi32(raw, _MM_SHUFFLE(1, 1, 0, 0)); /* u0 u0 u1 u1 */
	__m128i a = _mm_and_si128(_mm_srlv_epi32(x, _mm_setr_epi32(0, 0, 0, 4)),
				  _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
	__m128i b = _mm_and_si128(_mm_srlv_epi32(y, _mm_setr_epi32(0, 6, 0, 6)), _mm_setr_epi32(0, 0x03030303, 0, 0x03030303));
	return _mm_or_si128(a, _mm_slli_epi32(b, 4));
}

#endif
