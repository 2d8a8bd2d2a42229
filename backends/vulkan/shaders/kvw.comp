#version 450
// kvw.comp — KV_WRITE: element e of row i of src0 goes to cell ids[i] of
// dst (F16 or F32). One thread per source element; the host found the
// cell dims (see vk_ops_attn.c), the shader unravels the rest.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint sne0, sne1, sne2, sne3;
	uint snb0, snb1, snb2, snb3;
	uint dne0, dne1, dne2, dd;
	uint dnb0, dnb1, dnb2, dnb_cell;
	uint s_off, d_off, i_off, i_nb0;
	uint E, n, n_cells, dtype;
} p;

void main()
{
	uint f = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
	if (f >= p.E * p.n)
		return;
	uint row = f / p.E, e = f % p.E;
	int cell = b_i(p.i_off + row * p.i_nb0);
	if (cell < 0 || uint(cell) >= p.n_cells) {
		report(ST_RANGE, uint(cell));
		return;
	}
	uint s0 = f % p.sne0, s1 = (f / p.sne0) % p.sne1, s2 = (f / (p.sne0 * p.sne1)) % p.sne2,
	     s3 = f / (p.sne0 * p.sne1 * p.sne2);
	float v = a_f(p.s_off + s0 * p.snb0 + s1 * p.snb1 + s2 * p.snb2 + s3 * p.snb3);
	uint db = p.d_off + uint(cell) * p.dnb_cell;
	uint r = e;
	if (p.dd > 0u) { db += (r % p.dne0) * p.dnb0; r /= p.dne0; }
	if (p.dd > 1u) { db += (r % p.dne1) * p.dnb1; r /= p.dne1; }
	if (p.dd > 2u) { db += (r % p.dne2) * p.dnb2; }
	d_st(db, p.dtype, v);
}
