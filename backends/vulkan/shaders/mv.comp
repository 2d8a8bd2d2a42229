#version 450
// mv.comp — decode MUL_MAT (at most 8 activation columns) for Q4_K, Q6_K
// and Q8_0 (the last two also in vk_pack.c's packed layouts): 32-thread teams, 4 per 128-thread workgroup, each team on RW
// weight rows (and, with KS > 1, on every KS-th run of items of them).
// Lane l takes items l, l + 32 KS, ... of its rows, an item being 16 bytes of
// Q4_K quants (both nibbles: 32 values of two sub-blocks), a quarter of a
// Q6_K super-block (64 values) or one Q8_0 block; every weight byte loaded
// is used once, Q4_K quants and the activations as 16-byte vectors, each
// activation load serving the team's RW rows. Per
// column each lane keeps one float chain over its items (d * sc * sum(q x)
// - dmin * m * sum(x) per sub-block), then the row's 32 lanes are summed
// (subgroupAdd on 32-wide subgroups, else a shared-memory tree). A column's
// result does not depend on how many columns the launch has (MT 1, 4 or 8).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#ifndef MT
#define MT 8u
#endif
#include "common.glsl"
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// the same bindings seen as 16-byte vectors (Q4_K rows and the rounded
// activations are 16-byte aligned; the host checks)
layout(std430, set = 0, binding = 1) readonly buffer BufA4 { uvec4 a4_[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufB4 { vec4 b4_[]; };

#if defined(MULTI) || defined(GLU)
// MULTI: up to three products of one x (Q/K/V), row groups rg1 and rg2
// starting the second and third matrix; GLU: gate and up (matrices 0, 1),
// each team taking RW/2 rows of both, and act(gate) * up into output 2.
// Weights and outputs are each one binding spanning the tensors (offsets).
layout(push_constant) uniform PC {
	uint K, M, mtiles, n_wg;
	uint nrg, x_off, x_nb1, w_nb1;
	uint act, rg1, rg2, pad;
	uvec4 N, w_off, d_off, d_nb1;
	uint q_off, c_off; // GQ: the rounded copy (binding 3), the block counters (binding 8)
} p;
#else
layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, mtiles, n_wg;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, tpr_log2, nrg;
	uint s_off;
} p;
#endif

// rows per team (RW): 4 where the rows' raw words fit in registers beside
// the activations; Q6_K's three 16-byte words per row keep one (on the H200
// its 4-row form took 0.67 ms a 1B token against 0.41). KS teams share a
// row group, each taking every KS-th run of 32 items (more warps in flight
// for short matrices), their sums added in a fixed order; U2: two items'
// loads issued before either is used (the per-lane order is unchanged).
// (the host's mv_geom in vk_ops_mm.c holds the same table)
#if defined(WT_Q6_K)
#define RW_DEF 1u
#define KS_DEF 1
#define U2_DEF 0
#elif defined(WT_Q6_KP)
// packed: one item at a time (H100, 1B Q4_K_M tg128: 614.8 t/s against 608.3
// with two in flight, 607.0 at 2,2,1, 556.0 at 4,2,1)
#define RW_DEF 1u
#define KS_DEF 1
#define U2_DEF 0
#else
// (H200, 2048 x 2048 / 2048 x 8192 / 8192 x 2048, cold: Q4_K 8 / 13 / 37 us
// with one team a row group and one item at a time, 7 / 15 / 14 as here;
// Q8_0 12 / 33 / 61 -> 10 / 23 / 29)
#define RW_DEF 4u
#define KS_DEF 2
#define U2_DEF 1
#endif
#ifndef RW
#define RW RW_DEF
#endif
#ifndef KS
#define KS KS_DEF // (a plain integer: the preprocessor tests it)
#endif
#ifndef U2
#define U2 U2_DEF
#endif
const uint KSU = uint(KS), RGW = 4u / KSU; // row groups per workgroup
#if KS > 1
shared float ksum[4u * RW * MT];
#endif
shared float red[MT * RW * 128u];
#ifdef GLU
#include "act.glsl"
#endif
#ifdef GQ
// GQ (with GLU): the GLU output also rounded for the Q8_K product that
// reads it next (gq.glsl), without an actq dispatch of its own
#define GQ_STORE(w, v) c_[w] = floatBitsToUint(v)
#include "gq.glsl"
shared uint gq_last[MT];
#endif

uint byte_of(uint w, uint i) { return (w >> (8u * i)) & 0xffu; }
vec4 u4(uint w) { return vec4(float(w & 0xffu), float((w >> 8) & 0xffu), float((w >> 16) & 0xffu), float(w >> 24)); }
vec4 s4(uint w)
{
	return vec4(float(int(w << 24) >> 24), float(int(w << 16) >> 24), float(int(w << 8) >> 24), float(int(w) >> 24));
}
#ifndef AV
#define AV 0
#endif
#if AV
// AV: Q6_K / Q8_0 blocks (2-byte aligned) read as 16-byte vectors of a
// 16-byte aligned row (the host checks): the 16 bytes at even offset s of x|y
uvec4 ext16(uvec4 x, uvec4 y, uint s)
{
	uint w = s >> 2;
	uvec4 lo = w == 0u ? x : (w == 1u ? uvec4(x.yzw, y.x) : (w == 2u ? uvec4(x.zw, y.xy) : uvec4(x.w, y.xyz)));
	if ((s & 2u) == 0u)
		return lo;
	uvec4 hi = w == 0u ? uvec4(x.yzw, y.x) : (w == 1u ? uvec4(x.zw, y.xy) : (w == 2u ? uvec4(x.w, y.xyz) : y));
	return (lo >> 16) | (hi << 16);
}
uvec4 a_v16(uint b) { uint v = b >> 4; return ext16(a4_[v], a4_[v + 1u], b & 15u); }
#endif
// the 16 activations from word-aligned byte offset xb (16-byte aligned)
void ld_x16(uint xb, out vec4 x[4])
{
	uint v = xb >> 4;
	x[0] = b4_[v];
	x[1] = b4_[v + 1u];
	x[2] = b4_[v + 2u];
	x[3] = b4_[v + 3u];
}
float sum16(vec4 x[4]) { return ((x[0].x + x[0].y) + (x[0].z + x[0].w)) + ((x[1].x + x[1].y) + (x[1].z + x[1].w)) +
				 ((x[2].x + x[2].y) + (x[2].z + x[2].w)) + ((x[3].x + x[3].y) + (x[3].z + x[3].w)); }

#ifndef XR
#define XR 0
#endif
#if XR
// XR (Q8_0 weights): the activations come unrounded and each item (one
// block of 32) rounds its own as actq.comp would (same block maximum, same
// arithmetic: equal values), saving the actq dispatch before the product.
// (Q8_K's 256-blocks the same way, their 8 lanes' maxima combined by
// shuffles, made Q4_K_M decode 4% slower on the H100: not built.)
#define ACTQ_NO_BLK 1
#include "actq.glsl"
void xr_round(inout vec4 x0[4], inout vec4 x1[4])
{
	float a = 0.0;
	[[unroll]] for (uint t = 0u; t < 4u; t++)
		[[unroll]] for (uint c = 0u; c < 4u; c++) {
			float a0 = abs(x0[t][c]), a1 = abs(x1[t][c]);
			a = max(a, max(a0 > 0.0 ? a0 : 0.0, a1 > 0.0 ? a1 : 0.0)); // (NaN never becomes the maximum)
		}
	float d, id;
	q8_scales(3u, a, a, d, id);
	[[unroll]] for (uint t = 0u; t < 4u; t++)
		[[unroll]] for (uint c = 0u; c < 4u; c++) {
			x0[t][c] = q8_val(3u, x0[t][c], a, d, id);
			x1[t][c] = q8_val(3u, x1[t][c], a, d, id);
		}
}
#define XR_Q80(x0, x1) xr_round(x0, x1);
#else
#define XR_Q80(x0, x1)
#endif

float q4k_item(uvec4 q, vec2 dm, uint s0, uint s1, uint s2, uint c, vec4 xl[4], vec4 xh[4])
{
	// scale and min of sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles)
	float sc[2], mn[2];
	[[unroll]] for (uint e = 0u; e < 2u; e++) {
		uint jj = 2u * c + e;
		if (jj < 4u) {
			sc[e] = float(byte_of(s0, jj) & 63u);
			mn[e] = float(byte_of(s1, jj) & 63u);
		} else {
			uint b2 = byte_of(s2, jj - 4u);
			sc[e] = float((b2 & 15u) | ((byte_of(s0, jj - 4u) >> 6) << 4));
			mn[e] = float((b2 >> 4) | ((byte_of(s1, jj - 4u) >> 6) << 4));
		}
	}
	float ql = (dot(u4(q.x & 0x0f0f0f0fu), xl[0]) + dot(u4(q.y & 0x0f0f0f0fu), xl[1])) +
		   (dot(u4(q.z & 0x0f0f0f0fu), xl[2]) + dot(u4(q.w & 0x0f0f0f0fu), xl[3]));
	float qh = (dot(u4((q.x >> 4) & 0x0f0f0f0fu), xh[0]) + dot(u4((q.y >> 4) & 0x0f0f0f0fu), xh[1])) +
		   (dot(u4((q.z >> 4) & 0x0f0f0f0fu), xh[2]) + dot(u4((q.w >> 4) & 0x0f0f0f0fu), xh[3]));
	return (dm.x * sc[0] * ql - dm.y * mn[0] * sum16(xl)) + (dm.x * sc[1] * qh - dm.y * mn[1] * sum16(xh));
}

// one group of 16 Q6_K values (low nibbles a, 2 high bits at shift sh of hh) - 32, dotted with x
float q6k_g(uvec4 a, uint ash, uvec4 hh, uint sh, vec4 x[4])
{
	float s = 0.0;
	[[unroll]] for (uint t = 0u; t < 4u; t++)
		s += dot(u4(((a[t] >> ash) & 0x0f0f0f0fu) | (((hh[t] >> sh) & 0x03030303u) << 4)) - 32.0, x[t]);
	return s;
}

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x, lane = tid & 31u, team = tid >> 5, ks = team % KSU, rgi = team / KSU;
#if defined(MULTI) || defined(GLU)
	uint rg = wg % p.nrg, mt = wg / p.nrg;
#ifdef GLU
	// rows k < RW/2 of the gate, the rest the same rows of up
	const uint RH = RW / 2u;
	uint n0 = rg * (RGW * RH) + rgi * RH, N = p.N[0];
	uint wrow[RW];
	[[unroll]] for (uint k = 0u; k < RW; k++)
		wrow[k] = p.w_off[k < RH ? 0u : 1u] + min(n0 + k % RH, N - 1u) * p.w_nb1;
#else
	uint mj = rg < p.rg1 ? 0u : (rg < p.rg2 ? 1u : 2u);
	uint n0 = (rg - (mj == 0u ? 0u : (mj == 1u ? p.rg1 : p.rg2))) * (RGW * RW) + rgi * RW, N = p.N[mj];
	uint wrow[RW];
	[[unroll]] for (uint k = 0u; k < RW; k++)
		wrow[k] = p.w_off[mj] + min(n0 + k, N - 1u) * p.w_nb1;
#endif
	uint m0 = mt * MT, mc = min(MT, p.M - m0);
	uint xb0 = p.x_off + m0 * p.x_nb1;
#else
	uint rg = wg % p.nrg, rest = wg / p.nrg;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	uint n0 = rg * (RGW * RW) + rgi * RW;
	uint m0 = mt * MT, mc = min(MT, p.M - m0);
	uint wbase = p.w_off + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint wrow[RW];
	[[unroll]] for (uint k = 0u; k < RW; k++)
		wrow[k] = wbase + min(n0 + k, p.N - 1u) * p.w_nb1;
	uint xb0 = p.x_off + m0 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
#endif
	float acc[RW][MT];
	[[unroll]] for (uint k = 0u; k < RW; k++)
		[[unroll]] for (uint j = 0u; j < MT; j++)
			acc[k][j] = 0.0;
#if defined(WT_Q4_K)
	// an item: 16 bytes of quants (32 values of sub-blocks 2c, 2c + 1) and
	// its super-block's d/dmin and 12 scale bytes
	uint nit = p.K / 32u;
#define ITEM_DECL uvec4 q[RW], hd[RW];
#define ITEM_LOAD(R, IT) { uint sb_ = (IT) >> 3, o_ = 16u + (((IT) >> 1) & 3u) * 32u + ((IT) & 1u) * 16u; \
		[[unroll]] for (uint k = 0u; k < RW; k++) { uint bb = wrow[k] + sb_ * 144u; \
			R.hd[k] = a4_[bb >> 4]; R.q[k] = a4_[(bb + o_) >> 4]; } }
#define ITEM_ACC(R, IT) { uint c_ = ((IT) >> 1) & 3u, k0_ = ((IT) >> 3) * 256u + c_ * 64u + ((IT) & 1u) * 16u; \
		[[unroll]] for (uint j = 0u; j < MT; j++) if (j < mc) { vec4 xl[4], xh[4]; \
			ld_x16(xb0 + j * p.x_nb1 + k0_ * 4u, xl); ld_x16(xb0 + j * p.x_nb1 + (k0_ + 32u) * 4u, xh); \
			[[unroll]] for (uint k = 0u; k < RW; k++) \
				acc[k][j] += q4k_item(R.q[k], unpackHalf2x16(R.hd[k].x), R.hd[k].y, R.hd[k].z, R.hd[k].w, c_, xl, xh); } }
#elif defined(WT_Q6_K) || defined(WT_Q6_KP)
	// an item: a quarter of a super-block (64 values), its scales and d
	uint nit = p.K / 64u;
#define ITEM_DECL uvec4 qa[RW], qb2[RW], qh[RW]; vec4 ds[RW];
	// Q6_RAW: super-block sb of the row at wr_, quarter (hn, h): its two 16-byte
	// words of low nibbles, one of high bits, its 8 scale bytes and d
#if defined(WT_Q6_KP)
	// packed (vk_pack.c): super-block j of a run of 8 has its quants at 192 j,
	// its scales at 1536 + 16 j, its d at 1664 + 2 j: every load aligned
#define Q6_RAW(wr_, sb, hn_, h_, qa_, qb_, qh_, sw0, sw1, d_) { uint run_ = (wr_) + ((sb) >> 3) * 1680u, j8_ = (sb) & 7u, \
			bb = run_ + 192u * j8_; \
			qa_ = a4_[(bb + hn_ * 64u + h_ * 16u) >> 4]; qb_ = a4_[(bb + hn_ * 64u + 32u + h_ * 16u) >> 4]; \
			qh_ = a4_[(bb + 128u + hn_ * 32u + h_ * 16u) >> 4]; \
			uint sa_ = (run_ + 1536u + 16u * j8_ + hn_ * 8u) >> 2; sw0 = a_[sa_]; sw1 = a_[sa_ + 1u]; \
			d_ = unpackHalf2x16(a_[(run_ + 1664u + 2u * j8_) >> 2] >> ((j8_ & 1u) * 16u)).x; }
#elif AV
#define Q6_RAW(wr_, sb, hn_, h_, qa_, qb_, qh_, sw0, sw1, d_) { uint bb = (wr_) + (sb) * 210u; \
			qa_ = a_v16(bb + hn_ * 64u + h_ * 16u); \
			qb_ = a_v16(bb + hn_ * 64u + 32u + h_ * 16u); qh_ = a_v16(bb + 128u + hn_ * 32u + h_ * 16u); \
			uvec4 sc_ = a_v16(bb + 192u); sw0 = hn_ == 0u ? sc_.x : sc_.z; sw1 = hn_ == 0u ? sc_.y : sc_.w; \
			d_ = a_h(bb + 208u); }
#else
#define Q6_RAW(wr_, sb, hn_, h_, qa_, qb_, qh_, sw0, sw1, d_) { uint bb = (wr_) + (sb) * 210u; \
			qa_ = a_u128(bb + hn_ * 64u + h_ * 16u); \
			qb_ = a_u128(bb + hn_ * 64u + 32u + h_ * 16u); qh_ = a_u128(bb + 128u + hn_ * 32u + h_ * 16u); \
			sw0 = a_u32(bb + 192u + hn_ * 8u); sw1 = a_u32(bb + 196u + hn_ * 8u); d_ = a_h(bb + 208u); }
#endif
#define ITEM_LOAD(R, IT) { uint sb_ = (IT) >> 2, hn_ = ((IT) >> 1) & 1u, h_ = (IT) & 1u; \
		[[unroll]] for (uint k = 0u; k < RW; k++) { \
			uint sw0, sw1; float d; Q6_RAW(wrow[k], sb_, hn_, h_, R.qa[k], R.qb2[k], R.qh[k], sw0, sw1, d) \
			R.ds[k] = d * vec4(float(int(byte_of(sw0, h_) << 24) >> 24), float(int(byte_of(sw0, h_ + 2u) << 24) >> 24), \
					 float(int(byte_of(sw1, h_) << 24) >> 24), float(int(byte_of(sw1, h_ + 2u) << 24) >> 24)); } }
#define ITEM_ACC(R, IT) { uint k0_ = ((IT) >> 2) * 256u + (((IT) >> 1) & 1u) * 128u + ((IT) & 1u) * 16u; \
		[[unroll]] for (uint j = 0u; j < MT; j++) if (j < mc) { vec4 x0[4], x1[4], x2[4], x3[4]; \
			uint xb = xb0 + j * p.x_nb1 + k0_ * 4u; \
			ld_x16(xb, x0); ld_x16(xb + 128u, x1); ld_x16(xb + 256u, x2); ld_x16(xb + 384u, x3); \
			[[unroll]] for (uint k = 0u; k < RW; k++) \
				acc[k][j] += ((R.ds[k].x * q6k_g(R.qa[k], 0u, R.qh[k], 0u, x0) + R.ds[k].y * q6k_g(R.qb2[k], 0u, R.qh[k], 2u, x1)) + \
					      (R.ds[k].z * q6k_g(R.qa[k], 4u, R.qh[k], 4u, x2) + R.ds[k].w * q6k_g(R.qb2[k], 4u, R.qh[k], 6u, x3))); } }
#elif defined(WT_Q8_0) || defined(WT_Q8_0P)
	// an item: one block of 32
	uint nit = p.K / 32u;
#define ITEM_DECL uvec4 q0[RW], q1[RW]; float d[RW];
#if defined(WT_Q8_0P)
	// packed (vk_pack.c): block j of a run of 8 has its 32 quants at 32 j,
	// its scale at 256 + 2 j
#define ITEM_LOAD(R, IT) { [[unroll]] for (uint k = 0u; k < RW; k++) { uint run_ = wrow[k] + ((IT) >> 3) * 272u, j_ = (IT) & 7u; \
			uint v_ = (run_ + 32u * j_) >> 4; R.q0[k] = a4_[v_]; R.q1[k] = a4_[v_ + 1u]; \
			R.d[k] = unpackHalf2x16(a_[(run_ + 256u + 2u * j_) >> 2] >> ((j_ & 1u) * 16u)).x; } }
#elif AV
#define ITEM_LOAD(R, IT) { [[unroll]] for (uint k = 0u; k < RW; k++) { uint bb = wrow[k] + (IT) * 34u, v_ = bb >> 4, s_ = bb & 15u; \
			uvec4 x0_ = a4_[v_], x1_ = a4_[v_ + 1u], x2_ = a4_[v_ + 2u]; \
			R.d[k] = unpackHalf2x16(x0_[s_ >> 2] >> ((s_ & 2u) * 8u)).x; \
			R.q0[k] = s_ + 2u < 16u ? ext16(x0_, x1_, s_ + 2u) : x1_; \
			R.q1[k] = s_ + 2u < 16u ? ext16(x1_, x2_, s_ + 2u) : x2_; } }
#else
#define ITEM_LOAD(R, IT) { [[unroll]] for (uint k = 0u; k < RW; k++) { uint bb = wrow[k] + (IT) * 34u; \
			R.d[k] = a_h(bb); R.q0[k] = a_u128(bb + 2u); R.q1[k] = a_u128(bb + 18u); } }
#endif
#define ITEM_ACC(R, IT) { uint k0_ = (IT) * 32u; \
		[[unroll]] for (uint j = 0u; j < MT; j++) if (j < mc) { vec4 x0[4], x1[4]; \
			ld_x16(xb0 + j * p.x_nb1 + k0_ * 4u, x0); ld_x16(xb0 + j * p.x_nb1 + (k0_ + 16u) * 4u, x1); \
			XR_Q80(x0, x1) \
			[[unroll]] for (uint k = 0u; k < RW; k++) { \
				float s = ((dot(s4(R.q0[k].x), x0[0]) + dot(s4(R.q0[k].y), x0[1])) + (dot(s4(R.q0[k].z), x0[2]) + dot(s4(R.q0[k].w), x0[3]))) + \
					  ((dot(s4(R.q1[k].x), x1[0]) + dot(s4(R.q1[k].y), x1[1])) + (dot(s4(R.q1[k].z), x1[2]) + dot(s4(R.q1[k].w), x1[3]))); \
				acc[k][j] += R.d[k] * s; } } }
#else
#error mv.comp: Q4_K, Q6_K or Q8_0 (packed or not) only
#endif
	// lane's items: it = lane + 32 ks, then every 32 KS
	const uint ST = 32u * KSU;
	struct Item { ITEM_DECL };
#if U2
	for (uint it = lane + 32u * ks; it < nit; it += 2u * ST) {
		uint it2 = it + ST;
		bool two = it2 < nit;
		Item A, B;
		ITEM_LOAD(A, it)
		ITEM_LOAD(B, two ? it2 : it)
		ITEM_ACC(A, it)
		if (two)
			ITEM_ACC(B, it2)
	}
#else
	for (uint it = lane + 32u * ks; it < nit; it += ST) {
		Item A;
		ITEM_LOAD(A, it)
		ITEM_ACC(A, it)
	}
#endif
	// the rows' sums (lane 0 holds them)
	float S[RW][MT];
#if USE_SUBGROUP
	if (gl_SubgroupSize == 32u) {
		[[unroll]] for (uint k = 0u; k < RW; k++)
			[[unroll]] for (uint j = 0u; j < MT; j++)
				S[k][j] = subgroupAdd(acc[k][j]);
	} else
#endif
	{
		[[unroll]] for (uint k = 0u; k < RW; k++)
			[[unroll]] for (uint j = 0u; j < MT; j++)
				red[(k * MT + j) * 128u + tid] = acc[k][j];
		barrier();
		for (uint s = 16u; s > 0u; s >>= 1) {
			if (lane < s)
				[[unroll]] for (uint i = 0u; i < RW * MT; i++)
					red[i * 128u + tid] += red[i * 128u + tid + s];
			barrier();
		}
		[[unroll]] for (uint k = 0u; k < RW; k++)
			[[unroll]] for (uint j = 0u; j < MT; j++)
				S[k][j] = red[(k * MT + j) * 128u + tid];
	}
#if KS > 1
	// the row group's KS partial sums, added in team order ((0 + 1) + (2 + 3))
	if (lane == 0u)
		[[unroll]] for (uint i = 0u; i < RW * MT; i++)
			ksum[team * RW * MT + i] = S[i / MT][i % MT];
	barrier();
	bool writer = lane == 0u && ks == 0u;
#ifndef GQ
	if (!writer)
		return;
#endif
	if (writer)
		[[unroll]] for (uint i = 0u; i < RW * MT; i++) {
			uint b = team * RW * MT + i, st = RW * MT;
#if KS == 2
			S[i / MT][i % MT] = ksum[b] + ksum[b + st];
#else
			S[i / MT][i % MT] = (ksum[b] + ksum[b + st]) + (ksum[b + 2u * st] + ksum[b + 3u * st]);
#endif
		}
#else
	bool writer = lane == 0u;
#ifndef GQ
	if (!writer)
		return;
#endif
#endif
#if defined(GLU)
	if (writer)
		[[unroll]] for (uint k = 0u; k < RH; k++)
			[[unroll]] for (uint j = 0u; j < MT; j++)
				if (j < mc && n0 + k < N) {
					uint o = (n0 + k) * 4u, c = m0 + j;
					float g = S[k][j], u = S[k + RH][j];
					d_stf(p.d_off[0] + o + c * p.d_nb1[0], g);
					d_stf(p.d_off[1] + o + c * p.d_nb1[1], u);
					d_stf(p.d_off[2] + o + c * p.d_nb1[2], act(p.act, g) * u);
				}
#ifdef GQ
	// (the host checks: N a multiple of 256, a workgroup's RGW * RH rows
	// inside one block; every invocation gets here)
	uint blk = rg * (RGW * RH) / 256u, nblk = N / 256u;
	memoryBarrierBuffer(); // this invocation's outputs before the count
	barrier();
	if (tid == 0u)
		[[unroll]] for (uint j = 0u; j < MT; j++)
			gq_last[j] = j < mc && gq_count((p.c_off >> 2) + (m0 + j) * nblk + blk, RGW * RH) ? 1u : 0u;
	barrier();
	[[unroll]] for (uint j = 0u; j < MT; j++)
		if (gq_last[j] != 0u) { // (uniform: shared, after the barrier)
			uint c = m0 + j;
			gq_round(tid, (p.c_off >> 2) + c * nblk + blk, ((p.d_off[2] + c * p.d_nb1[2]) >> 2) + blk * 256u,
				 (p.q_off >> 2) + c * N + blk * 256u);
		}
#endif
#elif defined(MULTI)
	[[unroll]] for (uint k = 0u; k < RW; k++)
		[[unroll]] for (uint j = 0u; j < MT; j++)
			if (j < mc && n0 + k < N)
				d_stf(p.d_off[mj] + (n0 + k) * 4u + (m0 + j) * p.d_nb1[mj], S[k][j]);
#else
	uint db = p.d_off + m0 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
	[[unroll]] for (uint k = 0u; k < RW; k++)
		[[unroll]] for (uint j = 0u; j < MT; j++)
			if (j < mc && n0 + k < p.N)
				d_stf(db + (n0 + k) * p.d_nb0 + j * p.d_nb1, S[k][j]);
#endif
}
