// mmw.glsl — the prefill GEMM's (mmc.comp) weight groups read as 16-byte
// vectors: w_fetch loads the raw words of group g (16 values) of a row whose
// start is 16-byte aligned, w_decode turns them into 16 F16 values (two
// uvec4 of packed halves) with dequant.glsl's arithmetic, so the values are
// the same bits. The fetch only issues loads: mmc.comp decodes after the
// step's products, so the loads' latency is hidden behind them. Types
// with a vector form define MMW_VEC.
struct WRaw {
	uvec4 a, b;
	uvec2 c;
};

layout(std430, set = 0, binding = 1) readonly buffer BufA4 { uvec4 a4_[]; };

// 16 F32 values as 16 F16 (PACK2H: the conversion of float16_t(), as
// mmc.comp's other paths round)
void h16(float v[16], out uvec4 h0, out uvec4 h1)
{
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		h0[i] = PACK2H(v[2u * i], v[2u * i + 1u]);
		h1[i] = PACK2H(v[8u + 2u * i], v[8u + 2u * i + 1u]);
	}
}

#if defined(WT_Q4_K)
#define MMW_VEC 1
// the super-block's d/dmin and 12 scale bytes, and the 16 quant bytes whose
// low (even j) or high (odd j) nibbles are the group
void w_fetch(uint rb, uint g, out WRaw r)
{
	uint bb = rb + (g >> 4) * 144u, j = (g & 15u) >> 1;
	r.a = a4_[bb >> 4];
	r.b = a4_[(bb + 16u + (j >> 1) * 32u + (g & 1u) * 16u) >> 4];
	r.c = uvec2(0u);
}
void w_decode(WRaw r, uint g, out uvec4 h0, out uvec4 h1)
{
	uint j = (g & 15u) >> 1;
	float d = unpackHalf2x16(r.a.x).x, dmin = unpackHalf2x16(r.a.x >> 16).x, sc, m;
	// k4_scale_min on the scales held in r.a's bytes 4..15
	if (j < 4u) {
		sc = float(qb(r.a, 4u + j) & 63u);
		m = float(qb(r.a, 8u + j) & 63u);
	} else {
		uint q = qb(r.a, 8u + j);
		sc = float((q & 0xfu) | ((qb(r.a, j) >> 6) << 4));
		m = float((q >> 4) | ((qb(r.a, 4u + j) >> 6) << 4));
	}
	float d1 = d * sc, m1 = dmin * m, v[16];
	uint sh = (j & 1u) * 4u;
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = d1 * float((qb(r.b, i) >> sh) & 15u) - m1;
	h16(v, h0, h1);
}
#elif defined(WT_Q6_KP)
#define MMW_VEC 1
// packed runs of 8 super-blocks (vk_pack.c): the group's low-nibble and
// high-bit words, its scale's word and its d's word
void w_fetch(uint rb, uint g, out WRaw r)
{
	uint sb = g >> 4, run = rb + (sb >> 3) * 1680u, j8 = sb & 7u, qs = run + 192u * j8;
	uint j = (g & 15u) >> 1, l0 = (g & 1u) * 16u, n = j >> 2, gg = j & 3u;
	r.a = a4_[(qs + n * 64u + (gg & 1u) * 32u + l0) >> 4];
	r.b = a4_[(qs + 128u + n * 32u + l0) >> 4];
	r.c = uvec2(a_[(run + 1536u + 16u * j8 + (g & 15u)) >> 2], a_[(run + 1664u + 2u * j8) >> 2]);
}
void w_decode(WRaw r, uint g, out uvec4 h0, out uvec4 h1)
{
	uint j8 = (g >> 4) & 7u, j = (g & 15u) >> 1, gg = j & 3u;
	float dl = unpackHalf2x16(r.c.y >> ((j8 & 1u) * 16u)).x *
		   float(int(((r.c.x >> ((g & 3u) * 8u)) & 0xffu) << 24) >> 24);
	uint sl = (gg >> 1) * 4u, shh = 2u * gg;
	float v[16];
	[[unroll]] for (uint i = 0u; i < 16u; i++) {
		uint lo = (qb(r.a, i) >> sl) & 15u, hi = (qb(r.b, i) >> shh) & 3u;
		v[i] = dl * float(int(lo | (hi << 4)) - 32);
	}
	h16(v, h0, h1);
}
#elif defined(WT_Q8_0P)
#define MMW_VEC 1
// packed runs of 8 blocks (vk_pack.c): the group's 16 quants, its d's word
void w_fetch(uint rb, uint g, out WRaw r)
{
	uint b = g >> 1, run = rb + (b >> 3) * 272u, j = b & 7u;
	r.a = a4_[(run + 32u * j + (g & 1u) * 16u) >> 4];
	r.b = uvec4(0u);
	r.c = uvec2(a_[(run + 256u + 2u * j) >> 2], 0u);
}
void w_decode(WRaw r, uint g, out uvec4 h0, out uvec4 h1)
{
	uint j = (g >> 1) & 7u;
	float d = unpackHalf2x16(r.c.x >> ((j & 1u) * 16u)).x, v[16];
	[[unroll]] for (uint i = 0u; i < 16u; i++)
		v[i] = float(int(qb(r.a, i) << 24) >> 24) * d;
	h16(v, h0, h1);
}
#elif defined(WT_F16)
#define MMW_VEC 1
// the halves themselves
void w_fetch(uint rb, uint g, out WRaw r)
{
	uint v = (rb + g * 32u) >> 4;
	r.a = a4_[v];
	r.b = a4_[v + 1u];
	r.c = uvec2(0u);
}
void w_decode(WRaw r, uint g, out uvec4 h0, out uvec4 h1)
{
	h0 = r.a;
	h1 = r.b;
}
#endif
