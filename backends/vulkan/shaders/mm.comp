#version 450
// mm.comp — MUL_MAT: dst[n, m] = sum_k w[k, n] * x[k, m]. A workgroup
// holds R = WG / TPR weight rows x MT activation columns of one batch; the
// TPR threads of a row split K in 16-element groups (elements for F32/F16/
// BF16), dequantizing each group once for all MT columns, then reduce
// (subgroupAdd where the device has it and a row spans whole subgroups,
// else a shared-memory tree). Small K gets many rows per workgroup.
#extension GL_GOOGLE_include_directive : require
#define WG 128u
#ifndef MT
#define MT 8u
#endif
layout(local_size_x = 128) in;
#include "common.glsl"
#include "dequant.glsl"
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, mtiles, n_wg;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, tpr_log2, nrg;
	uint s_off; // Q4_1/Q5_1: Q8_1 block sums of the activations (fp16-rounded), per 32
} p;

shared float red[MT * WG];

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint tpr = 1u << p.tpr_log2;
	uint lane = tid & (tpr - 1u), r = tid >> p.tpr_log2;
	uint rg = wg % p.nrg, rest = wg / p.nrg;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	uint n = rg * (WG >> p.tpr_log2) + r;
	bool valid = n < p.N;
	uint m0 = mt * MT, mc = min(MT, p.M - m0);
	uint wrow = p.w_off + n * p.w_nb1 + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint xb0 = p.x_off + m0 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
	float acc[MT];
	[[unroll]] for (uint j = 0u; j < MT; j++)
		acc[j] = 0.0;
	if (valid) {
#if PLAIN
		for (uint k = lane; k < p.K; k += tpr) {
			float w = a_ld(wrow + k * WSIZE, WTYPE);
			uint xb = xb0 + k * p.x_nb0;
			[[unroll]] for (uint j = 0u; j < MT; j++)
				if (j < mc)
					acc[j] += w * b_f(xb + j * p.x_nb1);
		}
#else
		uint ng = p.K / 16u;
		for (uint g = lane; g < ng; g += tpr) {
			float v[16];
#if WMIN
			dq16_nomin(wrow, g, v);
			float wm = (g & 1u) == 0u ? dq16_min(wrow, g) : 0.0;
			uint srow = m0 + p.M * (i2 + p.ne12 * i3);
#else
			dq16(wrow, g, v);
#endif
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
#if WMIN
					if (wm != 0.0)
						s += wm * b_f(p.s_off + ((srow + j) * (p.K / 32u) + (g >> 1)) * 4u);
#endif
					acc[j] += s;
				}
			}
		}
#endif
	}
	uint db = p.d_off + n * p.d_nb0 + m0 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
	if (tpr == 1u) {
		if (valid)
			for (uint j = 0u; j < mc; j++)
				d_stf(db + j * p.d_nb1, acc[j]);
		return;
	}
#if USE_SUBGROUP
	if (tpr >= gl_SubgroupSize) {
		// rows span whole subgroups: one subgroupAdd per column, then the
		// tpr / SubgroupSize partial sums of a row through shared memory
		for (uint j = 0u; j < mc; j++) {
			float s = subgroupAdd(acc[j]);
			if (subgroupElect())
				red[j * WG + gl_SubgroupID] = s;
		}
		barrier();
		uint per = tpr / gl_SubgroupSize, first = (r * tpr) / gl_SubgroupSize;
		if (lane == 0u && valid)
			for (uint j = 0u; j < mc; j++) {
				float s = 0.0;
				for (uint k = 0u; k < per; k++)
					s += red[j * WG + first + k];
				d_stf(db + j * p.d_nb1, s);
			}
		return;
	}
#endif
	for (uint j = 0u; j < mc; j++)
		red[j * WG + tid] = acc[j];
	barrier();
	for (uint s = tpr >> 1; s > 0u; s >>= 1) {
		if (lane < s)
			for (uint j = 0u; j < mc; j++)
				red[j * WG + tid] += red[j * WG + tid + s];
		barrier();
	}
	if (lane == 0u && valid)
		for (uint j = 0u; j < mc; j++)
			d_stf(db + j * p.d_nb1, red[j * WG + tid]);
}
