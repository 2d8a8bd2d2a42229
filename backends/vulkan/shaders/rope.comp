#version 450
// rope.comp — ROPE, one thread per (pair or copied dim, head, token).
// Angles follow the CPU backend's recurrence: theta_i = pos * s^i computed
// by repeated float multiplication, so positions round the same way.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint ne0, ne1, ne2, ne3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, p_off, p_nb0;
	uint f_off, f_nb0, has_f, n_dims;
	uint mode, s0, s1, s2;
	uint s3, pad;
	float theta_scale, fscale;
} p;

#include "rope.glsl"

void main()
{
	// per row (head, token, i3): ne0 - n_dims/2 work items (pairs + copies)
	uint half_ = p.n_dims / 2u;
	uint per_row = p.ne0 - half_;
	uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 128u) + gl_GlobalInvocationID.x;
	uint n_rows = p.ne1 * p.ne2 * p.ne3;
	if (i >= per_row * n_rows)
		return;
	uint k = i % per_row, r = i / per_row;
	uint h = r % p.ne1, t = (r / p.ne1) % p.ne2, i3 = r / (p.ne1 * p.ne2);
	uint xr = p.x_off + h * p.x_nb1 + t * p.x_nb2 + i3 * p.x_nb3;
	uint dr = p.d_off + h * p.d_nb1 + t * p.d_nb2 + i3 * p.d_nb3;
	if (k >= half_) {
		uint e = k + half_; // copied dims n_dims .. ne0-1
		d_stf(dr + e * p.d_nb0, a_f(xr + e * p.x_nb0));
		return;
	}
	float th;
	if (p.mode == 40u) {
		uint sect = p.s0 + p.s1 + p.s2 + p.s3;
		uint sector = k % sect, which;
		if (sector % 3u == 1u && sector < 3u * p.s1)
			which = 1u;
		else if (sector % 3u == 2u && sector < 3u * p.s2)
			which = 2u;
		else if (sector % 3u == 0u && sector < 3u * p.s0)
			which = 0u;
		else
			which = 3u;
		th = float(b_i(p.p_off + (t + which * p.ne2) * p.p_nb0));
	} else {
		th = float(b_i(p.p_off + t * p.p_nb0));
	}
	float ff = p.has_f != 0u ? c_f(p.f_off + k * p.f_nb0) : 1.0;
	vec2 cs = rope_cs(th, k, p.theta_scale, ff, p.fscale);
	bool neox = p.mode != 0u;
	uint ia = neox ? k : 2u * k, ib = neox ? k + half_ : 2u * k + 1u;
	vec2 y = rope_rot(a_f(xr + ia * p.x_nb0), a_f(xr + ib * p.x_nb0), cs);
	d_stf(dr + ia * p.d_nb0, y.x);
	d_stf(dr + ib * p.d_nb0, y.y);
}
