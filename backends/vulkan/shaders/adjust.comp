#version 450
// adjust.comp — LOGIT_ADJUST (backend.h 1.5): a record per invocation
// (row, token, flags, bias, rp, pen), each editing its own logit in place
// with alice_ts_adjust's operations in its order; the division correctly
// rounded (div_cr), nothing contracted (precise).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#define ACTQ_NO_BLK 1
#include "actq.glsl"
#include "sample.glsl"

layout(push_constant) uniform PC {
	uint n, rows, x_off, x_nb1;
	uint r_off, cap;
} p;

void main()
{
	uint i = wg_flat() * 256u + gl_LocalInvocationID.x + 1u; // record i (0 holds the count)
	uint r0 = p.r_off / 4u;
	uint cnt = min(uint(max(int(a_[r0]), 0)), p.cap);
	if (i > cnt)
		return;
	uint e = r0 + 6u * i;
	int row = int(a_[e]), tok = int(a_[e + 1u]);
	if (row < 0 || uint(row) >= p.rows || tok < 0 || uint(tok) >= p.n)
		return;
	uint flags = a_[e + 2u];
	float bias = uintBitsToFloat(a_[e + 3u]), rp = uintBitsToFloat(a_[e + 4u]), pen = uintBitsToFloat(a_[e + 5u]);
	uint o = (p.x_off + uint(row) * p.x_nb1) / 4u + uint(tok);
	precise float x = clean_(uintBitsToFloat(d_[o]));
	if ((flags & 1u) != 0u) {
		precise float y = x + bias;
		x = clean_(y);
	}
	if ((flags & 2u) != 0u)
		x = NEG_INF;
	if ((flags & 4u) != 0u) {
		// div_cr's split overflows past ~8e34: large quotients are taken
		// scaled by 2^-32 (exact); an infinite or NaN quotient (rp 0,
		// overflow) is IEEE's
		precise float q = x / rp;
		precise float y = x * rp;
		if (x > 0.0)
			y = isinf(q) || isnan(q) ? q : abs(q) > 1e30 ? div_cr(x * 2.3283064e-10, rp) * 4294967296.0 : div_cr(x, rp);
		x = clean_(y);
	}
	if ((flags & 8u) != 0u) {
		precise float y = x - pen;
		x = clean_(y);
	}
	d_[o] = floatBitsToUint(x);
}
