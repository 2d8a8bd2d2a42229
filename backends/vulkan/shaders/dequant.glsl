// dequant.glsl — weight types read from src0 (a_), one variant per type
// (-DWT_<type>=1). Plain types (F32/F16/BF16) define PLAIN and WTYPE; block
// types define dq16(row_byte, g, v): the 16 elements g*16 .. g*16+15 of the
// row starting at byte row_byte. Layouts and arithmetic follow core/quant.c.
#if defined(WT_F32)
#define PLAIN 1
#define WTYPE T_F32
#define WSIZE 4u
#elif defined(WT_F16)
#define PLAIN 1
#define WTYPE T_F16
#define WSIZE 2u
#elif defined(WT_BF16)
#define PLAIN 1
#define WTYPE T_BF16
#define WSIZE 2u
#else
#define PLAIN 0
#endif

#if !PLAIN
const float kv_iq4nl[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
				     1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
const float kv_mxfp4[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0,
				     0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

// byte i (0..15) of a uvec4
uint qb(uvec4 q, uint i) { return (q[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }

// 6-bit scale and min j of a Q4_K/Q5_K 12-byte scales field at byte s
void k4_scale_min(uint s, uint j, out float sc, out float m)
{
	if (j < 4u) {
		sc = float(a_u8(s + j) & 63u);
		m = float(a_u8(s + j + 4u) & 63u);
	} else {
		uint q = a_u8(s + j + 4u);
		sc = float((q & 0xfu) | ((a_u8(s + j - 4u) >> 6) << 4));
		m = float((q >> 4) | ((a_u8(s + j) >> 6) << 4));
	}
}
#endif

#if defined(WT_Q4_0)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 18u, sh = (g & 1u) * 4u;
	float d = a_h(bb);
	uvec4 q = a_u128(bb + 2u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = (float((qb(q, i) >> sh) & 15u) - 8.0) * d;
}
#elif defined(WT_Q4_1)
// The min term is kept apart for MUL_MAT: llama.cpp pairs Q4_1/Q5_1 with
// Q8_1 activations, whose per-block sum d*sum(q) is rounded to fp16.
#define WMIN 1
float dq16_min(uint rb, uint g) { return a_h(rb + (g >> 1) * 20u + 2u); }
void dq16_nomin(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 20u, sh = (g & 1u) * 4u;
	float d = a_h(bb);
	uvec4 q = a_u128(bb + 4u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = float((qb(q, i) >> sh) & 15u) * d;
}
#elif defined(WT_Q5_0)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 22u, h = g & 1u, sh = h * 4u;
	float d = a_h(bb);
	uint qh = a_u32(bb + 2u) >> (h * 16u);
	uvec4 q = a_u128(bb + 6u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = float(int(((qb(q, i) >> sh) & 15u) | (((qh >> i) & 1u) << 4)) - 16) * d;
}
#elif defined(WT_Q5_1)
#define WMIN 1
float dq16_min(uint rb, uint g) { return a_h(rb + (g >> 1) * 24u + 2u); }
void dq16_nomin(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 24u, h = g & 1u, sh = h * 4u;
	float d = a_h(bb);
	uint qh = a_u32(bb + 4u) >> (h * 16u);
	uvec4 q = a_u128(bb + 8u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = float(((qb(q, i) >> sh) & 15u) | (((qh >> i) & 1u) << 4)) * d;
}
#elif defined(WT_Q8_0)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 34u;
	float d = a_h(bb);
	uvec4 q = a_u128(bb + 2u + (g & 1u) * 16u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = float(int(qb(q, i) << 24) >> 24) * d;
}
#elif defined(WT_Q8_0P)
// packed (vk_pack.c): runs of 8 blocks, their 256 quants then 8 fp16 scales
void dq16(uint rb, uint g, out float v[16])
{
	uint b = g >> 1, run = rb + (b >> 3) * 272u, j = b & 7u;
	float d = a_h(run + 256u + 2u * j);
	uvec4 q = a_u128(run + 32u * j + (g & 1u) * 16u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = float(int(qb(q, i) << 24) >> 24) * d;
}
#elif defined(WT_IQ4_NL)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 18u, sh = (g & 1u) * 4u;
	float d = a_h(bb);
	uvec4 q = a_u128(bb + 2u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = d * kv_iq4nl[(qb(q, i) >> sh) & 15u];
}
#elif defined(WT_MXFP4)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 1) * 17u, sh = (g & 1u) * 4u;
	uint e = a_u8(bb);
	float d = uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
	uvec4 q = a_u128(bb + 1u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = kv_mxfp4[(qb(q, i) >> sh) & 15u] * d;
}
#elif defined(WT_Q1_0)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 3) * 18u;
	float d = a_h(bb);
	uint bits = a_u16(bb + 2u + (g & 7u) * 2u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = ((bits >> i) & 1u) != 0u ? d : -d;
}
#elif defined(WT_Q2_K)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 4) * 84u, j = (g & 15u) >> 1, l0 = (g & 1u) * 16u;
	float d = a_h(bb + 80u), dmin = a_h(bb + 82u);
	uint s = a_u8(bb + g % 16u);
	float dl = d * float(s & 15u), ml = dmin * float(s >> 4);
	uvec4 q = a_u128(bb + 16u + (j >> 2) * 32u + l0);
	uint sh = 2u * (j & 3u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = dl * float((qb(q, i) >> sh) & 3u) - ml;
}
#elif defined(WT_Q3_K)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 4) * 110u, j = (g & 15u) >> 1, l0 = (g & 1u) * 16u;
	uint idx = g & 15u;
	uint lo = idx < 8u ? (a_u8(bb + 96u + idx) & 15u) : (a_u8(bb + 96u + idx - 8u) >> 4);
	uint hi = (a_u8(bb + 104u + (idx & 3u)) >> (2u * (idx >> 2))) & 3u;
	float dl = a_h(bb + 108u) * float(int(lo | (hi << 4)) - 32);
	uvec4 q = a_u128(bb + 32u + (j >> 2) * 32u + l0);
	uvec4 hm = a_u128(bb + l0);
	uint sh = 2u * (j & 3u);
	[[unroll]] for (uint i = 0u; i < 16u; i++) {
		int qv = int((qb(q, i) >> sh) & 3u);
		if (((qb(hm, i) >> j) & 1u) == 0u)
			qv -= 4;
		v[i] = dl * float(qv);
	}
}
#elif defined(WT_Q4_K)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 4) * 144u, j = (g & 15u) >> 1, l0 = (g & 1u) * 16u;
	float d = a_h(bb), dmin = a_h(bb + 2u), sc, m;
	k4_scale_min(bb + 4u, j, sc, m);
	float d1 = d * sc, m1 = dmin * m;
	uvec4 q = a_u128(bb + 16u + (j >> 1) * 32u + l0);
	uint sh = (j & 1u) * 4u;
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = d1 * float((qb(q, i) >> sh) & 15u) - m1;
}
#elif defined(WT_Q5_K)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 4) * 176u, j = (g & 15u) >> 1, l0 = (g & 1u) * 16u;
	float d = a_h(bb), dmin = a_h(bb + 2u), sc, m;
	k4_scale_min(bb + 4u, j, sc, m);
	float d1 = d * sc, m1 = dmin * m;
	uvec4 qh = a_u128(bb + 16u + l0);
	uvec4 q = a_u128(bb + 48u + (j >> 1) * 32u + l0);
	uint sh = (j & 1u) * 4u;
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = d1 * float(((qb(q, i) >> sh) & 15u) | (((qb(qh, i) >> j) & 1u) << 4)) - m1;
}
#elif defined(WT_Q6_K) || defined(WT_Q6_KP)
// group g's 16 values of a super-block: its 192 quant bytes (ql, qh) at qs,
// its 16 scales at sc, its d at db
void q6k_dq16(uint qs, uint sc, uint db, uint g, out float v[16])
{
	uint j = (g & 15u) >> 1, l0 = (g & 1u) * 16u;
	uint n = j >> 2, gg = j & 3u;
	float dl = a_h(db) * float(int(a_u8(sc + (g & 15u)) << 24) >> 24);
	uvec4 ql = a_u128(qs + n * 64u + (gg & 1u) * 32u + l0);
	uvec4 qh = a_u128(qs + 128u + n * 32u + l0);
	uint sl = (gg >> 1) * 4u, shh = 2u * gg;
	[[unroll]] for (uint i = 0u; i < 16u; i++) {
		uint lo = (qb(ql, i) >> sl) & 15u, hi = (qb(qh, i) >> shh) & 3u;
		v[i] = dl * float(int(lo | (hi << 4)) - 32);
	}
}
#if defined(WT_Q6_KP)
// packed (vk_pack.c): runs of 8 super-blocks, 8 x 192 quant bytes (ql then
// qh), 8 x 16 scales, 8 fp16 d's
void dq16(uint rb, uint g, out float v[16])
{
	uint sb = g >> 4, run = rb + (sb >> 3) * 1680u, j8 = sb & 7u;
	q6k_dq16(run + 192u * j8, run + 1536u + 16u * j8, run + 1664u + 2u * j8, g, v);
}
#else
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 4) * 210u;
	q6k_dq16(bb, bb + 192u, bb + 208u, g, v);
}
#endif
#elif defined(WT_IQ4_XS)
void dq16(uint rb, uint g, out float v[16])
{
	uint bb = rb + (g >> 4) * 136u, ib = (g & 15u) >> 1, sh = (g & 1u) * 4u;
	float d = a_h(bb);
	uint shi = a_u16(bb + 2u);
	uint ls = ((a_u8(bb + 4u + ib / 2u) >> (4u * (ib & 1u))) & 15u) | (((shi >> (2u * ib)) & 3u) << 4);
	float dl = d * float(int(ls) - 32);
	uvec4 q = a_u128(bb + 8u + ib * 16u);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = dl * kv_iq4nl[(qb(q, i) >> sh) & 15u];
}
#elif !PLAIN
#error "no weight type defined"
#endif

#if defined(WMIN)
void dq16(uint rb, uint g, out float v[16])
{
	dq16_nomin(rb, g, v);
	float m = dq16_min(rb, g);
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] += m;
}
#else
#define WMIN 0
#endif
