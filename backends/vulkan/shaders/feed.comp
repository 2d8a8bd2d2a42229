#version 450
// feed.comp — FEED (backend.h 1.6): a step's tokens, each the host's
// (src1[i] < 0) or the previous step's pick src2[src1[i]]; an index past
// the picks is reported, as GET_ROWS reports a bad row id.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint n, m, d_off, h_off;
	uint i_off, p_off;
} p;

void main()
{
	uint i = wg_flat() * 256u + gl_LocalInvocationID.x;
	if (i >= p.n)
		return;
	int ix = b_i(p.i_off + 4u * i);
	if (ix >= int(p.m)) {
		report(ST_RANGE, uint(ix));
		return;
	}
	d_[p.d_off / 4u + i] = ix < 0 ? a_[p.h_off / 4u + i] : c_[p.p_off / 4u + uint(ix)];
}
