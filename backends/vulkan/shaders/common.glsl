// common.glsl — bindings shared by every pipeline and byte-level access.
// Binding 0 is dst, 1..6 are src0..src5, 7 a small status buffer where a
// shader reports bad input (an out-of-range row id ...) instead of faulting,
// 8 the block counters of gq.glsl.
// Every buffer is a uint array: any tensor type is read by byte offset, and
// 16-bit stores go through atomics on their word (no 8/16-bit storage needed).
#extension GL_EXT_control_flow_attributes : enable

#ifndef DST_COHERENT
layout(std430, set = 0, binding = 0) buffer BufD { uint d_[]; };
#else
// other workgroups of the same dispatch read what this one writes (mv.comp's GQ)
layout(std430, set = 0, binding = 0) coherent buffer BufD { uint d_[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer BufA { uint a_[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufB { uint b_[]; };
#ifndef SRC2_RW
layout(std430, set = 0, binding = 3) readonly buffer BufC { uint c_[]; };
#else
layout(std430, set = 0, binding = 3) buffer BufC { uint c_[]; }; // SSM_CONV state, in place
#endif
layout(std430, set = 0, binding = 4) readonly buffer BufE { uint e_[]; };
#ifndef SRC4_RW
layout(std430, set = 0, binding = 5) readonly buffer BufF { uint f_[]; };
#else
layout(std430, set = 0, binding = 5) buffer BufF { uint f_[]; }; // GATED_DELTA_NET state, in place
#endif
#ifndef SRC5_RW
layout(std430, set = 0, binding = 6) readonly buffer BufG { uint g_[]; };
#else
layout(std430, set = 0, binding = 6) buffer BufG { uint g_[]; }; // attn.comp's GQ: the rounded copy
#endif
layout(std430, set = 0, binding = 7) buffer BufS { uint st_[]; };

#define T_F32 0u
#define T_F16 1u
#define T_BF16 30u
#define T_I32 26u

// status codes (st_[0]); st_[1] holds a detail (the bad value)
#define ST_RANGE 1u

void report(uint code, uint detail)
{
	if (atomicCompSwap(st_[0], 0u, code) == 0u)
		st_[1] = detail;
}

uint wg_flat() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// ---- reads from src0 (a_) by byte offset ----
uint a_u8(uint b) { return (a_[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint a_u32(uint b)
{
	uint s = (b & 3u) * 8u, w = b >> 2;
	if (s == 0u)
		return a_[w];
	return (a_[w] >> s) | (a_[w + 1u] << (32u - s));
}
uint a_u16(uint b) { return (b & 3u) == 3u ? (a_u8(b) | (a_u8(b + 1u) << 8)) : ((a_[b >> 2] >> ((b & 3u) * 8u)) & 0xffffu); }
float a_h(uint b) { return unpackHalf2x16(a_u16(b)).x; }
uvec4 a_u128(uint b)
{
	uint s = (b & 3u) * 8u, w = b >> 2;
	if (s == 0u)
		return uvec4(a_[w], a_[w + 1u], a_[w + 2u], a_[w + 3u]);
	uint w0 = a_[w], w1 = a_[w + 1u], w2 = a_[w + 2u], w3 = a_[w + 3u], w4 = a_[w + 4u];
	uint r = 32u - s;
	return uvec4((w0 >> s) | (w1 << r), (w1 >> s) | (w2 << r), (w2 >> s) | (w3 << r), (w3 >> s) | (w4 << r));
}

// plain float types (F32 / F16 / BF16) at a byte offset
float a_ld(uint b, uint t)
{
	if (t == T_F32)
		return uintBitsToFloat(a_[b >> 2]);
	uint h = (a_[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu;
	return t == T_F16 ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16);
}
float b_ld(uint b, uint t)
{
	if (t == T_F32)
		return uintBitsToFloat(b_[b >> 2]);
	uint h = (b_[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu;
	return t == T_F16 ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16);
}
float c_ld(uint b, uint t)
{
	if (t == T_F32)
		return uintBitsToFloat(c_[b >> 2]);
	uint h = (c_[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu;
	return t == T_F16 ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16);
}
float b_f(uint b) { return uintBitsToFloat(b_[b >> 2]); }
float a_f(uint b) { return uintBitsToFloat(a_[b >> 2]); }
float c_f(uint b) { return uintBitsToFloat(c_[b >> 2]); }
int a_i(uint b) { return int(a_[b >> 2]); }
int b_i(uint b) { return int(b_[b >> 2]); }
int e_i(uint b) { return int(e_[b >> 2]); }

// fp32 -> fp16 / bf16 bits, round to nearest even (as core/quant.c does)
uint f32_to_f16(float f)
{
	uint x = floatBitsToUint(f);
	uint sign = (x >> 16) & 0x8000u;
	uint a = x & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
	if (a >= 0x477ff000u)
		return sign | 0x7c00u;
	if (a < 0x38800000u) {
		float s = uintBitsToFloat(a) + 0.5;
		return sign | ((floatBitsToUint(s) - 0x3f000000u) & 0xffffu);
	}
	uint r = (a + 0xfffu + ((a >> 13) & 1u)) >> 13;
	return sign | ((r - 0x1c000u) & 0xffffu);
}
uint f32_to_bf16(float f)
{
	uint x = floatBitsToUint(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return ((x >> 16) | 0x40u) & 0xffffu;
	return ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16) & 0xffffu;
}

// store one element of type t at byte offset b of dst
void d_st(uint b, uint t, float v)
{
	if (t == T_F32) {
		d_[b >> 2] = floatBitsToUint(v);
		return;
	}
	uint h = t == T_F16 ? f32_to_f16(v) : f32_to_bf16(v);
	uint sh = (b & 2u) * 8u;
	atomicAnd(d_[b >> 2], ~(0xffffu << sh));
	atomicOr(d_[b >> 2], h << sh);
}
void d_stf(uint b, float v) { d_[b >> 2] = floatBitsToUint(v); }
