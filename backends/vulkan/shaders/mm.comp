#version 450
// mm.comp — MUL_MAT: dst[n, m] = sum_k w[k, n] * x[k, m]. One workgroup
// per (weight row n, tile of MT activation columns, batch); its threads
// split K in 16-element groups, dequantizing each group once for all MT
// columns, then reduce. Activations stay F32 (no requantization).
#extension GL_GOOGLE_include_directive : require
#define WG 128u
#define MT 8u
layout(local_size_x = 128) in;
#include "common.glsl"
#include "dequant.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, mtiles, n_wg;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3;
} p;

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint n = wg % p.N, rest = wg / p.N;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	uint m0 = mt * MT, mc = min(MT, p.M - m0);
	uint wrow = p.w_off + n * p.w_nb1 + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint xb0 = p.x_off + m0 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
	float acc[MT];
	[[unroll]] for (uint j = 0u; j < MT; j++)
		acc[j] = 0.0;
#if PLAIN
	for (uint k = tid; k < p.K; k += WG) {
		float w = a_ld(wrow + k * WSIZE, WTYPE);
		uint xb = xb0 + k * p.x_nb0;
		[[unroll]] for (uint j = 0u; j < MT; j++)
			if (j < mc)
				acc[j] += w * b_f(xb + j * p.x_nb1);
	}
#else
	uint ng = p.K / 16u;
	for (uint g = tid; g < ng; g += WG) {
		float v[16];
		dq16(wrow, g, v);
		uint xb = xb0 + g * 16u * p.x_nb0;
		[[unroll]] for (uint j = 0u; j < MT; j++) {
			if (j < mc) {
				uint xj = xb + j * p.x_nb1;
				float s = 0.0;
				if (p.x_nb0 == 4u) {
					uint w = xj >> 2;
					[[unroll]] for (uint i = 0u; i < 16u; i++)
						s += v[i] * uintBitsToFloat(b_[w + i]);
				} else {
					[[unroll]] for (uint i = 0u; i < 16u; i++)
						s += v[i] * b_f(xj + i * p.x_nb0);
				}
				acc[j] += s;
			}
		}
	}
#endif
	uint db = p.d_off + n * p.d_nb0 + m0 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
	for (uint j = 0u; j < mc; j++) {
		float s = wg_sum(acc[j]);
		if (tid == 0u)
			d_stf(db + j * p.d_nb1, s);
	}
}
