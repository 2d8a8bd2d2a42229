#version 450
// mv.comp — decode MUL_MAT (at most 8 activation columns) for Q4_K, Q6_K
// and Q8_0: 32 threads per weight row, 4 rows per 128-thread workgroup.
// Lane l takes items l, l + 32, ... of its row, an item being 16 bytes of
// Q4_K quants (both nibbles: 32 values of two sub-blocks), a quarter of a
// Q6_K super-block (64 values) or one Q8_0 block; every weight byte loaded
// is used once, Q4_K quants and the activations as 16-byte vectors. Per
// column each lane keeps one float chain over its items (d * sc * sum(q x)
// - dmin * m * sum(x) per sub-block), then the row's 32 lanes are summed
// (subgroupAdd on 32-wide subgroups, else a shared-memory tree). A column's
// result does not depend on how many columns the launch has (MT 1 or 8).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#ifndef MT
#define MT 8u
#endif
#include "common.glsl"
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// the same bindings seen as 16-byte vectors (Q4_K rows and the rounded
// activations are 16-byte aligned; the host checks)
layout(std430, set = 0, binding = 1) readonly buffer BufA4 { uvec4 a4_[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufB4 { vec4 b4_[]; };

layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, mtiles, n_wg;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, tpr_log2, nrg;
	uint s_off;
} p;

shared float red[MT * 128u];

uint byte_of(uint w, uint i) { return (w >> (8u * i)) & 0xffu; }
vec4 u4(uint w) { return vec4(float(w & 0xffu), float((w >> 8) & 0xffu), float((w >> 16) & 0xffu), float(w >> 24)); }
vec4 s4(uint w)
{
	return vec4(float(int(w << 24) >> 24), float(int(w << 16) >> 24), float(int(w << 8) >> 24), float(int(w) >> 24));
}
// the 16 activations from word-aligned byte offset xb (16-byte aligned)
void ld_x16(uint xb, out vec4 x[4])
{
	uint v = xb >> 4;
	x[0] = b4_[v];
	x[1] = b4_[v + 1u];
	x[2] = b4_[v + 2u];
	x[3] = b4_[v + 3u];
}
float sum16(vec4 x[4]) { return ((x[0].x + x[0].y) + (x[0].z + x[0].w)) + ((x[1].x + x[1].y) + (x[1].z + x[1].w)) +
				 ((x[2].x + x[2].y) + (x[2].z + x[2].w)) + ((x[3].x + x[3].y) + (x[3].z + x[3].w)); }

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x, lane = tid & 31u, r = tid >> 5;
	uint rg = wg % p.nrg, rest = wg / p.nrg;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	uint n = rg * 4u + r;
	bool valid = n < p.N;
	uint m0 = mt * MT, mc = min(MT, p.M - m0);
	uint wrow = p.w_off + min(n, p.N - 1u) * p.w_nb1 + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint xb0 = p.x_off + m0 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
	float acc[MT];
	[[unroll]] for (uint j = 0u; j < MT; j++)
		acc[j] = 0.0;
#if defined(WT_Q4_K)
	uint nit = p.K / 32u;
	for (uint it = lane; it < nit; it += 32u) {
		uint sb = it >> 3, c = (it >> 1) & 3u, h = it & 1u;
		uint bb = wrow + sb * 144u;
		vec2 dm = unpackHalf2x16(a_[bb >> 2]);
		uint s0 = a_[(bb >> 2) + 1u], s1 = a_[(bb >> 2) + 2u], s2 = a_[(bb >> 2) + 3u];
		// scale and min of sub-blocks 2c (low nibbles) and 2c + 1 (high)
		float sc[2], mn[2];
		[[unroll]] for (uint e = 0u; e < 2u; e++) {
			uint jj = 2u * c + e;
			if (jj < 4u) {
				sc[e] = float(byte_of(s0, jj) & 63u);
				mn[e] = float(byte_of(s1, jj) & 63u);
			} else {
				uint q = byte_of(s2, jj - 4u);
				sc[e] = float((q & 15u) | ((byte_of(s0, jj - 4u) >> 6) << 4));
				mn[e] = float((q >> 4) | ((byte_of(s1, jj - 4u) >> 6) << 4));
			}
		}
		uvec4 q = a4_[(bb + 16u + c * 32u + h * 16u) >> 4];
		vec4 lo[4], hi[4];
		[[unroll]] for (uint t = 0u; t < 4u; t++) {
			lo[t] = u4(q[t] & 0x0f0f0f0fu);
			hi[t] = u4((q[t] >> 4) & 0x0f0f0f0fu);
		}
		uint k0 = sb * 256u + c * 64u + h * 16u;
		float d0 = dm.x * sc[0], d1 = dm.x * sc[1], m0f = dm.y * mn[0], m1f = dm.y * mn[1];
		[[unroll]] for (uint j = 0u; j < MT; j++) {
			if (j < mc) {
				vec4 xl[4], xh[4];
				ld_x16(xb0 + j * p.x_nb1 + k0 * 4u, xl);
				ld_x16(xb0 + j * p.x_nb1 + (k0 + 32u) * 4u, xh);
				float ql = (dot(lo[0], xl[0]) + dot(lo[1], xl[1])) + (dot(lo[2], xl[2]) + dot(lo[3], xl[3]));
				float qh = (dot(hi[0], xh[0]) + dot(hi[1], xh[1])) + (dot(hi[2], xh[2]) + dot(hi[3], xh[3]));
				acc[j] += (d0 * ql - m0f * sum16(xl)) + (d1 * qh - m1f * sum16(xh));
			}
		}
	}
#elif defined(WT_Q6_K)
	uint nit = p.K / 64u;
	for (uint it = lane; it < nit; it += 32u) {
		uint sb = it >> 2, hn = (it >> 1) & 1u, h = it & 1u;
		uint bb = wrow + sb * 210u;
		uvec4 qa = a_u128(bb + hn * 64u + h * 16u);
		uvec4 qb2 = a_u128(bb + hn * 64u + 32u + h * 16u);
		uvec4 qh = a_u128(bb + 128u + hn * 32u + h * 16u);
		uint sw0 = a_u32(bb + 192u + hn * 8u), sw1 = a_u32(bb + 196u + hn * 8u);
		float d = a_h(bb + 208u);
		// scales h, h + 2, h + 4, h + 6 of this half's 8 (signed bytes)
		float ds[4];
		ds[0] = d * float(int(byte_of(sw0, h) << 24) >> 24);
		ds[1] = d * float(int(byte_of(sw0, h + 2u) << 24) >> 24);
		ds[2] = d * float(int(byte_of(sw1, h) << 24) >> 24);
		ds[3] = d * float(int(byte_of(sw1, h + 2u) << 24) >> 24);
		vec4 v[4][4]; // [group][word]: values - 32
		[[unroll]] for (uint t = 0u; t < 4u; t++) {
			uint a = qa[t], bq = qb2[t], hh = qh[t];
			v[0][t] = u4((a & 0x0f0f0f0fu) | ((hh & 0x03030303u) << 4)) - 32.0;
			v[1][t] = u4((bq & 0x0f0f0f0fu) | (((hh >> 2) & 0x03030303u) << 4)) - 32.0;
			v[2][t] = u4(((a >> 4) & 0x0f0f0f0fu) | (((hh >> 4) & 0x03030303u) << 4)) - 32.0;
			v[3][t] = u4(((bq >> 4) & 0x0f0f0f0fu) | (((hh >> 6) & 0x03030303u) << 4)) - 32.0;
		}
		uint k0 = sb * 256u + hn * 128u + h * 16u;
		[[unroll]] for (uint j = 0u; j < MT; j++) {
			if (j < mc) {
				float s = 0.0;
				[[unroll]] for (uint g = 0u; g < 4u; g++) {
					vec4 x[4];
					ld_x16(xb0 + j * p.x_nb1 + (k0 + 32u * g) * 4u, x);
					s += ds[g] * ((dot(v[g][0], x[0]) + dot(v[g][1], x[1])) + (dot(v[g][2], x[2]) + dot(v[g][3], x[3])));
				}
				acc[j] += s;
			}
		}
	}
#elif defined(WT_Q8_0)
	uint nit = p.K / 32u;
	for (uint it = lane; it < nit; it += 32u) {
		uint bb = wrow + it * 34u;
		float d = a_h(bb);
		uvec4 q0 = a_u128(bb + 2u), q1 = a_u128(bb + 18u);
		vec4 v0[4], v1[4];
		[[unroll]] for (uint t = 0u; t < 4u; t++) {
			v0[t] = s4(q0[t]);
			v1[t] = s4(q1[t]);
		}
		uint k0 = it * 32u;
		[[unroll]] for (uint j = 0u; j < MT; j++) {
			if (j < mc) {
				vec4 x0[4], x1[4];
				ld_x16(xb0 + j * p.x_nb1 + k0 * 4u, x0);
				ld_x16(xb0 + j * p.x_nb1 + (k0 + 16u) * 4u, x1);
				float s = ((dot(v0[0], x0[0]) + dot(v0[1], x0[1])) + (dot(v0[2], x0[2]) + dot(v0[3], x0[3]))) +
					  ((dot(v1[0], x1[0]) + dot(v1[1], x1[1])) + (dot(v1[2], x1[2]) + dot(v1[3], x1[3])));
				acc[j] += d * s;
			}
		}
	}
#else
#error mv.comp: Q4_K, Q6_K or Q8_0 only
#endif
	uint db = p.d_off + n * p.d_nb0 + m0 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
#if USE_SUBGROUP
	if (gl_SubgroupSize == 32u) {
		[[unroll]] for (uint j = 0u; j < MT; j++) {
			float s = subgroupAdd(acc[j]);
			if (j < mc && lane == 0u && valid)
				d_stf(db + j * p.d_nb1, s);
		}
		return;
	}
#endif
	[[unroll]] for (uint j = 0u; j < MT; j++)
		red[j * 128u + tid] = acc[j];
	barrier();
	for (uint s = 16u; s > 0u; s >>= 1) {
		if (lane < s)
			[[unroll]] for (uint j = 0u; j < MT; j++)
				red[j * 128u + tid] += red[j * 128u + tid + s];
		barrier();
	}
	if (lane == 0u && valid)
		for (uint j = 0u; j < mc; j++)
			d_stf(db + j * p.d_nb1, red[j * 128u + tid]);
}
