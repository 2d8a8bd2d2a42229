/* vexp.h — e^x for x <= 0 in plain float arithmetic, branch-free so that
 * loops over a vocabulary vectorise. The same operations in the same order
 * whether the compiler vectorises or not (no FMA contraction is asked for),
 * so a result never depends on the loop's shape. Relative error ~2e-7. */
#ifndef ALICE_VEXP_H
#define ALICE_VEXP_H

#include <stdint.h>
#include <string.h>

/* c ? a : b without a branch (vectorises where a float ?: does not) */
static inline float alice_fsel(int c, float a, float b)
{
	uint32_t ua, ub, m = (uint32_t)0 - (uint32_t)(c != 0);
	memcpy(&ua, &a, 4);
	memcpy(&ub, &b, 4);
	ua = (ua & m) | (ub & ~m);
	memcpy(&a, &ua, 4);
	return a;
}

static inline float alice_exp_neg(float x)
{
	const float lo = -87.0f;
	float xc = alice_fsel(x < lo, lo, x);
	xc = alice_fsel(xc > 0.0f, 0.0f, xc);
	/* n = round(x / ln 2) by the 1.5 * 2^23 trick (round to nearest even) */
	float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;
	float r = xc - n * 0.693145752f; /* ln 2, high part (exact product) */
	r = r - n * 1.42860677e-6f;      /* ln 2, low part */
	/* e^r on [-ln2/2, ln2/2]: degree-6 Taylor, Horner */
	float p = 1.3888889e-3f;
	p = p * r + 8.3333333e-3f;
	p = p * r + 4.1666667e-2f;
	p = p * r + 1.6666667e-1f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	int32_t e = ((int32_t)n + 127) * (1 << 23); /* n in [-126, 0] */
	float sc;
	memcpy(&sc, &e, sizeof sc);
	return alice_fsel(x < lo, 0.0f, p * sc);
}

#endif
