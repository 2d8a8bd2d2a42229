#version 450
// ropekv.comp — a layer's ROPE of q and of k and its two KV_WRITEs (the
// rotated k and v into their cache cells) as one dispatch: one thread per
// q item, per k item (also storing into the K cache) and per v element.
// The rotation is rope.comp's (rope.glsl) and a cache element is the F32
// value kvw.comp would read back, converted the same way: the same bits.
// Rows are contiguous [hd, heads, tokens]; a cell's row is contiguous.
// Bindings: 0 the activations (q, k, v in; q, k out: one span), 1 the
// positions, 2 frequency factors, 3 the K cache, 4 the cell indices, 5 the
// V cache.
#extension GL_GOOGLE_include_directive : require
#define SRC2_RW 1
#define SRC4_RW 1
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rope.glsl"

layout(push_constant) uniform PC {
	uint hd, nhq, nhk, T;
	uint n_dims, mode, has_f, p_nb0;
	uint qx_off, qd_off, kx_off, kd_off;
	uint v_off, p_off, f_off, f_nb0;
	uint kc_off, kc_cell, kc_type, vc_off;
	uint vc_cell, vc_type, i_off, i_nb0;
	uint n_cells, n_q, n_k, n_v; // items: q, k, v
	float theta_scale, fscale;
} p;

float act_f(uint b) { return uintBitsToFloat(d_[b >> 2]); }

// element e (F32 value v) of a cell row: F32, or F16 by word atomics (no
// 16-bit storage needed; the other half-word is another thread's)
void kc_st(uint b, float v)
{
	if (p.kc_type == T_F32) {
		c_[b >> 2] = floatBitsToUint(v);
		return;
	}
	uint h = p.kc_type == T_F16 ? f32_to_f16(v) : f32_to_bf16(v), sh = (b & 2u) * 8u;
	atomicAnd(c_[b >> 2], ~(0xffffu << sh));
	atomicOr(c_[b >> 2], h << sh);
}
void vc_st(uint b, float v)
{
	if (p.vc_type == T_F32) {
		f_[b >> 2] = floatBitsToUint(v);
		return;
	}
	uint h = p.vc_type == T_F16 ? f32_to_f16(v) : f32_to_bf16(v), sh = (b & 2u) * 8u;
	atomicAnd(f_[b >> 2], ~(0xffffu << sh));
	atomicOr(f_[b >> 2], h << sh);
}

// the cache cell of token t, or report it and -1
int cell_of(uint t)
{
	int c = e_i(p.i_off + t * p.i_nb0);
	if (c < 0 || uint(c) >= p.n_cells) {
		report(ST_RANGE, uint(c));
		return -1;
	}
	return c;
}

uint type_bytes(uint t) { return t == T_F32 ? 4u : 2u; }

void main()
{
	uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 128u) + gl_GlobalInvocationID.x;
	uint half_ = p.n_dims / 2u, per_row = p.hd - half_;
	if (i >= p.n_q + p.n_k) {
		i -= p.n_q + p.n_k;
		if (i >= p.n_v)
			return;
		uint E = p.hd * p.nhk, t = i / E, e = i % E;
		int c = cell_of(t);
		if (c >= 0)
			vc_st(p.vc_off + uint(c) * p.vc_cell + e * type_bytes(p.vc_type), act_f(p.v_off + i * 4u));
		return;
	}
	bool isk = i >= p.n_q;
	if (isk)
		i -= p.n_q;
	uint nh = isk ? p.nhk : p.nhq;
	uint k = i % per_row, r = i / per_row, h = r % nh, t = r / nh;
	uint row = (t * nh + h) * p.hd;
	uint xr = (isk ? p.kx_off : p.qx_off) + row * 4u, dr = (isk ? p.kd_off : p.qd_off) + row * 4u;
	uint ia, ib;
	vec2 y;
	bool pair = k < half_;
	if (pair) {
		float th = float(a_i(p.p_off + t * p.p_nb0));
		float ff = p.has_f != 0u ? b_f(p.f_off + k * p.f_nb0) : 1.0;
		vec2 cs = rope_cs(th, k, p.theta_scale, ff, p.fscale);
		bool neox = p.mode != 0u;
		ia = neox ? k : 2u * k;
		ib = neox ? k + half_ : 2u * k + 1u;
		y = rope_rot(act_f(xr + ia * 4u), act_f(xr + ib * 4u), cs);
		d_stf(dr + ia * 4u, y.x);
		d_stf(dr + ib * 4u, y.y);
	} else {
		ia = k + half_; // copied dims n_dims .. hd-1
		y.x = act_f(xr + ia * 4u);
		d_stf(dr + ia * 4u, y.x);
	}
	if (!isk)
		return;
	int c = cell_of(t);
	if (c < 0)
		return;
	uint cb = p.kc_off + uint(c) * p.kc_cell, eb = type_bytes(p.kc_type);
	kc_st(cb + (h * p.hd + ia) * eb, y.x);
	if (pair)
		kc_st(cb + (h * p.hd + ib) * eb, y.y);
}
