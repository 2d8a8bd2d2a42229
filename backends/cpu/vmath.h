/* vmath.h — scalar emulations of llama.cpp's CPU vector math, lane by lane,
 * where its rounding differs from libm and the parity references depend on
 * it (see tests/core/test_parity.c). Header-only; callers compile these into
 * FMA-enabled clones where speed matters (fmaf is an instruction there). */
#ifndef ALICE_CPU_VMATH_H
#define ALICE_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ggml's AVX-512 vector expf (a polynomial after the ARM optimized-routines
 * method: max error ~1.5 ulp). Used by llama.cpp's tiled flash-attention
 * softmax and by its vectorized SiLU. 0 below -104 (where the result
 * underflows anyway), +inf above the float range. */
static inline __attribute__((always_inline)) float v_expf(float x)
{
	if (!(x > -104.0f))
		return 0.0f;
	float z = fmaf(x, 0x1.715476p+0f, 0x1.8p23f);
	float n = z - 0x1.8p23f;
	float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
	float u = b * b;
	float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
		       fmaf(0x1.ffffecp-1f, b, 1.0f));
	int ni = (int)n;
	if (ni < -126 || ni > 127)
		return ldexpf(j, ni);
	uint32_t bits = (uint32_t)(ni + 127) << 23; /* 2^n exactly: one rounding, as scalef */
	float p2;
	memcpy(&p2, &bits, 4);
	return j * p2;
}

/* SiLU as ggml's vector kernel computes it: x / (1 + v_expf(-x)). */
static inline __attribute__((always_inline)) float v_silu(float x)
{
	return x / (1.0f + v_expf(0.0f - x));
}

#endif
