#version 450
// getrows.comp — GET_ROWS: dst[:, i] = dequant(src0[:, ids[i]]). One
// workgroup per output row; ids with a bad value are reported, not read.
#extension GL_GOOGLE_include_directive : require
#define WG 128u
layout(local_size_x = 128) in;
#include "common.glsl"
#include "dequant.glsl"

layout(push_constant) uniform PC {
	uint ne0, n_rows, src_nrows, n_wg;
	uint s_off, s_nb0, s_nb1, row0;
	uint i_off, i_ne0, i_ne1, i_nb0;
	uint i_nb1, i_nb2, d_off, d_nb0;
	uint d_nb1, d_nb2, d_nb3, total_rows;
} p;

void main()
{
	uint r = wg_flat();
	if (r >= p.n_rows)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint i0 = r % p.i_ne0, i1 = (r / p.i_ne0) % p.i_ne1, i2 = r / (p.i_ne0 * p.i_ne1);
	int id = b_i(p.i_off + i0 * p.i_nb0 + i1 * p.i_nb1 + i2 * p.i_nb2);
	if (id < 0 || uint(id) >= p.total_rows) {
		if (tid == 0u)
			report(ST_RANGE, uint(id));
		return;
	}
	// this dispatch holds source rows [row0, row0 + src_nrows)
	if (uint(id) < p.row0 || uint(id) - p.row0 >= p.src_nrows)
		return;
	uint row = p.s_off + (uint(id) - p.row0) * p.s_nb1;
	uint db = p.d_off + i0 * p.d_nb1 + i1 * p.d_nb2 + i2 * p.d_nb3;
#if PLAIN
	for (uint k = tid; k < p.ne0; k += WG)
		d_stf(db + k * p.d_nb0, a_ld(row + k * p.s_nb0, WTYPE));
#else
	for (uint g = tid; g < p.ne0 / 16u; g += WG) {
		float v[16];
		dq16(row, g, v);
		[[unroll]] for (uint i = 0u; i < 16u; i++)
			d_stf(db + (g * 16u + i) * p.d_nb0, v[i]);
	}
#endif
}
