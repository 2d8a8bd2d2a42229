#version 450
// norm.comp — RMS_NORM (optionally times a broadcast weight, src1) and
// L2_NORM over dim 0: one workgroup per row.
#extension GL_GOOGLE_include_directive : require
#define WG 128u
layout(local_size_x = 128) in;
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
	uint ne0, ne1, ne2, n_rows;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, w_off, w_nb0;
	uint w_ne1, w_ne2, w_ne3, w_nb1;
	uint w_nb2, w_nb3, mode, has_w; // mode 0 rms, 1 l2
	float eps;
} p;

void main()
{
	uint r = wg_flat();
	if (r >= p.n_rows)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint i1 = r % p.ne1, i2 = (r / p.ne1) % p.ne2, i3 = r / (p.ne1 * p.ne2);
	uint xr = p.x_off + i1 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
	uint dr = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
	// four loads in flight before their adds (a one-row norm is all
	// latency); the adds stay in element order, so the sum is the same
	precise float s = 0.0; // no fused multiply-add: norm.comp and addnorm.comp sum alike
	uint i = tid;
	for (; i + 3u * WG < p.ne0; i += 4u * WG) {
		float v0 = a_f(xr + i * p.x_nb0), v1 = a_f(xr + (i + WG) * p.x_nb0);
		float v2 = a_f(xr + (i + 2u * WG) * p.x_nb0), v3 = a_f(xr + (i + 3u * WG) * p.x_nb0);
		s += v0 * v0;
		s += v1 * v1;
		s += v2 * v2;
		s += v3 * v3;
	}
	for (; i < p.ne0; i += WG) {
		float v = a_f(xr + i * p.x_nb0);
		s += v * v;
	}
	s = wg_sum(s);
	float scale;
	if (p.mode == 1u)
		scale = 1.0 / max(sqrt(s), p.eps);
	else
		scale = 1.0 / sqrt(s / float(p.ne0) + p.eps);
	uint wr = p.w_off + (i1 % p.w_ne1) * p.w_nb1 + (i2 % p.w_ne2) * p.w_nb2 + (i3 % p.w_ne3) * p.w_nb3;
	for (i = tid; i < p.ne0; i += WG) {
		float v = a_f(xr + i * p.x_nb0) * scale;
		if (p.has_w != 0u)
			v *= b_f(wr + i * p.w_nb0);
		d_stf(dr + i * p.d_nb0, v);
	}
}
