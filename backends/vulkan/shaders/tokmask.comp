#version 450
// tokmask.comp — TOKEN_MASK (backend.h 1.6): a grammar's allowed tokens, in
// place on the logits; one invocation per 32-token word of a record, each
// token whose bit is 0 set to -inf.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint n, rows, x_off, x_nb1;
	uint r_off, W, cap, wgroups; // W: words per record (1 + ceil(n / 32)); wgroups per record
} p;

void main()
{
	uint wg = wg_flat();
	uint k = 1u + wg / p.wgroups;
	uint w = (wg % p.wgroups) * 256u + gl_LocalInvocationID.x;
	uint rb = p.r_off / 4u;
	int cnt = int(a_[rb]);
	if (k > p.cap || int(k) > cnt || w >= p.W - 1u)
		return;
	uint e = rb + p.W * k;
	int row = int(a_[e]);
	if (row < 0 || uint(row) >= p.rows)
		return;
	uint bits = a_[e + 1u + w];
	if (bits == 0xffffffffu)
		return;
	uint base = (p.x_off + uint(row) * p.x_nb1) / 4u;
	for (uint b = 0u; b < 32u; b++) {
		uint t = 32u * w + b;
		if (t < p.n && ((bits >> b) & 1u) == 0u)
			d_[base + t] = 0xff800000u; // -inf
	}
}
