#version 450
// ew.comp — element-wise ops, one thread per dst element: ADD, MUL (src1
// broadcast by index modulo its ne), SCALE, SOFTCAP, GLU, UNARY, COPY
// (F32/F16/BF16 either side; src and dst unravelled by their own shapes).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint dne0, dne1, dne2, dne3;
	uint dnb0, dnb1, dnb2, dnb3;
	uint ane0, ane1, ane2, ane3;
	uint anb0, anb1, anb2, anb3;
	uint bne0, bne1, bne2, bne3;
	uint bnb0, bnb1, bnb2, bnb3;
	uint d_off, a_off, b_off, code; // code: op | act << 8 | atype << 16 | dtype << 24
	float f0, f1;
} p;

#define OP_ADD 3u
#define OP_MUL 4u
#define OP_SCALE 5u
#define OP_GLU 11u
#define OP_UNARY 12u
#define OP_SOFTCAP 13u
#define OP_COPY 14u

#include "act.glsl"

void main()
{
	uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
	uint n = p.dne0 * p.dne1 * p.dne2 * p.dne3;
	if (i >= n)
		return;
	uint op = p.code & 0xffu, ac = (p.code >> 8) & 0xffu;
	uint at = (p.code >> 16) & 0xffu, dt = p.code >> 24;
	uint d0 = i % p.dne0, d1 = (i / p.dne0) % p.dne1, d2 = (i / (p.dne0 * p.dne1)) % p.dne2,
	     d3 = i / (p.dne0 * p.dne1 * p.dne2);
	uint db = p.d_off + d0 * p.dnb0 + d1 * p.dnb1 + d2 * p.dnb2 + d3 * p.dnb3;
	uint ab;
	if (op == OP_COPY) {
		uint a0 = i % p.ane0, a1 = (i / p.ane0) % p.ane1, a2 = (i / (p.ane0 * p.ane1)) % p.ane2,
		     a3 = i / (p.ane0 * p.ane1 * p.ane2);
		ab = p.a_off + a0 * p.anb0 + a1 * p.anb1 + a2 * p.anb2 + a3 * p.anb3;
		d_st(db, dt, a_ld(ab, at));
		return;
	}
	ab = p.a_off + d0 * p.anb0 + d1 * p.anb1 + d2 * p.anb2 + d3 * p.anb3;
	float x = a_f(ab), y;
	float bv = 0.0;
	if (op == OP_ADD || op == OP_MUL || op == OP_GLU) {
		uint bb = p.b_off + (d0 % p.bne0) * p.bnb0 + (d1 % p.bne1) * p.bnb1 + (d2 % p.bne2) * p.bnb2 +
			  (d3 % p.bne3) * p.bnb3;
		bv = b_f(bb);
	}
	switch (op) {
	case OP_ADD: y = x + bv; break;
	case OP_MUL: y = x * bv; break;
	case OP_SCALE: y = x * p.f0 + p.f1; break;
	case OP_SOFTCAP: y = p.f0 * tanh_s(x / p.f0); break;
	case OP_GLU: y = act(ac, x) * bv; break;
	default: y = act(ac, x); break;
	}
	d_stf(db, y);
}
