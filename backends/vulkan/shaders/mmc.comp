#version 450
// mmc.comp — MUL_MAT for many activation columns (prefill) on cooperative
// matrices (VK_NV_cooperative_matrix: 16 x 16 x 16, F16 operands, F32
// accumulators), where the device has them. A workgroup of WN x WM
// subgroups of 32 computes a BN (weight rows) x BM (columns) tile, each
// subgroup FN x FM fragments of 16 x 16. Per 32-wide K step the weight tile
// is dequantized to F16 and the activation tile converted to F16 in shared
// memory (as the CUDA backend's F16 GEMM rounds them). The tiles are double
// buffered and the step is software pipelined: step s + 1's global loads
// (raw words: mmw.glsl's 16-byte vector loads where the weight rows are
// aligned) are issued before step s's products and decoded and stored after
// them, one barrier a step (two steps in flight were no faster). A
// column's results do not depend on the other columns of the launch (batch
// invariance): every output takes the same products in the same K order,
// whatever the tiling.
#extension GL_GOOGLE_include_directive : require
#ifdef EMU_CM
#define PACK2H(a, b) packHalf2x16(vec2(a, b))
#else
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#define PACK2H(a, b) packFloat2x16(f16vec2(float16_t(a), float16_t(b)))
#endif
// the tile (CMakeLists.txt builds the variants vk_ops_mm.c chooses from)
#ifndef TWN
#define TWN 2u
#define TWM 2u
#define TFN 2u
#define TFM 2u
#endif
#define WN TWN
#define WM TWM
#define FN TFN
#define FM TFM
#define NT (32u * WN * WM)
#define BN (WN * FN * 16u)
#define BM (WM * FM * 16u)
#define BK 32u
#define LDV 5u // row stride of the F16 tiles in uvec4 (32 halves + 8 of padding: no bank conflicts)
#define LDW 20u // row stride of a subgroup's staged 16 x 16 output, in floats
#define SCOPE 3 // gl_ScopeSubgroup
layout(local_size_x = NT) in;
#include "common.glsl"
#include "dequant.glsl"
#include "mmw.glsl"
// the activations as 16-byte vectors: F32 (xvec: rows 16-byte aligned) or
// packed F16 (xh: tof16.comp's scratch)
layout(std430, set = 0, binding = 2) readonly buffer BufB4 { vec4 b4_[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBH { uvec4 bh_[]; };

#ifdef MULTI
// two or three products of one x in one dispatch (Q/K/V; vk_fuse.c): 2-D,
// F32 outputs with contiguous rows; weight j's n-tiles start at nt_j
layout(push_constant) uniform PC {
	uint K, M, mtiles, n_wg;
	uint x_off, x_nb1, w_nb1, flags; // flags: 1 xvec, 2 wvec, 4 xh
	uint nt1, nt2, ntiles, pad;
	uint N3[4], w_off3[4], d_off3[4], d_nb13[4];
} p;
#define P_XVEC ((p.flags & 1u) != 0u)
#define P_WVEC ((p.flags & 2u) != 0u)
#define P_XH ((p.flags & 4u) != 0u)
#define X_NB0 4u
#define D_NB0 4u
#else
layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, ntiles, mtiles;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, n_wg, s_off;
	uint xvec, wvec, xh;
} p;
#define P_XVEC (p.xvec != 0u)
#define P_WVEC (p.wvec != 0u)
#define P_XH (p.xh != 0u)
#define X_NB0 p.x_nb0
#define D_NB0 p.d_nb0
#endif
// this workgroup's product: weight rows and output column stride
uint gN, gDnb1;

// both buffers of both tiles ([n][k] weights, [m][k] activations), then
// (after the last step) each subgroup's staged output fragment
#define WS(b) ((b) * (BN + BM) * LDV)
#define XS(b) (WS(b) + BN * LDV)
#define SM_TILES (2u * (BN + BM) * LDV)
#define SM_STAGE (WN * WM * 16u * LDW / 4u)
shared uvec4 sm[SM_TILES > SM_STAGE ? SM_TILES : SM_STAGE];
#include "cmemu.glsl"

// a step's share of a thread: weight groups of 16 (row, half) — WPT each,
// or one for the first GW threads where there are fewer groups than
// threads — and CPT chunks of 8 activations (column, k / 8)
#define GW (BN * 2u)
#define WPT (GW > NT ? GW / NT : 1u)
#define CPT (BM * 4u / NT)
struct Stage {
	WRaw w[WPT];
	vec4 x[2u * CPT];
};

// group u's row and half
uint w_row(uint tid, uint u) { return (tid + u * NT) >> 1; }

void fetch(uint k0, uint wbase, uint xbase, uint n0, uint m0, uint tid, out Stage s)
{
	if (GW >= NT || tid < GW) {
		[[unroll]] for (uint u = 0u; u < WPT; u++) {
			uint r = w_row(tid, u), g = (tid + u * NT) & 1u;
			// a row past N reads row N - 1 (its products land outside the output)
			uint rb = wbase + min(n0 + r, gN - 1u) * p.w_nb1;
#ifdef MMW_VEC
			if (P_WVEC) {
				w_fetch(rb, (k0 >> 4) + g, s.w[u]);
				continue;
			}
#endif
			float v[16];
#if PLAIN
			[[unroll]] for (uint i = 0u; i < 16u; i++) {
				uint k = k0 + g * 16u + i;
				v[i] = n0 + r < gN && k < p.K ? a_ld(rb + k * WSIZE, WTYPE) : 0.0;
			}
#else
			dq16(rb, (k0 >> 4) + g, v);
#endif
			h16(v, s.w[u].a, s.w[u].b);
		}
	}
	[[unroll]] for (uint e = 0u; e < CPT; e++) {
		uint idx = tid + e * NT, c = idx >> 2, k = k0 + (idx & 3u) * 8u;
		if (P_XH) {
			// K % 8 == 0; the halves ride in x[2e]'s bits
			uint b = xbase + min(m0 + c, p.M - 1u) * p.x_nb1 + k * 2u;
			s.x[2u * e] = uintBitsToFloat(k < p.K ? bh_[b >> 4] : uvec4(0u));
		} else if (P_XVEC) {
			// K % 8 == 0: a chunk is in or out whole
			uint b = xbase + min(m0 + c, p.M - 1u) * p.x_nb1 + k * 4u;
			s.x[2u * e] = k < p.K ? b4_[b >> 4] : vec4(0.0);
			s.x[2u * e + 1u] = k < p.K ? b4_[(b >> 4) + 1u] : vec4(0.0);
		} else {
			[[unroll]] for (uint i = 0u; i < 8u; i++)
				s.x[2u * e + (i >> 2)][i & 3u] = m0 + c < p.M && k + i < p.K ?
					b_f(xbase + (m0 + c) * p.x_nb1 + (k + i) * X_NB0) : 0.0;
		}
	}
}

uint h2(vec2 v) { return PACK2H(v.x, v.y); }

void put(uint buf, uint k0, uint tid, Stage s)
{
	if (GW >= NT || tid < GW) {
		[[unroll]] for (uint u = 0u; u < WPT; u++) {
			uint r = w_row(tid, u), g = (tid + u * NT) & 1u;
			uvec4 h0 = s.w[u].a, h1 = s.w[u].b;
#ifdef MMW_VEC
			if (P_WVEC)
				w_decode(s.w[u], (k0 >> 4) + g, h0, h1);
#endif
			sm[WS(buf) + r * LDV + g * 2u] = h0;
			sm[WS(buf) + r * LDV + g * 2u + 1u] = h1;
		}
	}
	[[unroll]] for (uint e = 0u; e < CPT; e++) {
		uint idx = tid + e * NT;
		vec4 x0 = s.x[2u * e], x1 = s.x[2u * e + 1u];
		sm[XS(buf) + (idx >> 2) * LDV + (idx & 3u)] =
			P_XH ? floatBitsToUint(x0) : uvec4(h2(x0.xy), h2(x0.zw), h2(x1.xy), h2(x1.zw));
	}
}

// one step's products of this subgroup's block from tile buffer buf
void products(uint buf, uint sr, uint sc, inout CM_ACC acc[FN][FM])
{
	[[unroll]] for (uint kk = 0u; kk < BK / 8u; kk += 2u) {
		CM_OP a[FN], bm[FM];
		[[unroll]] for (uint i = 0u; i < FN; i++)
			CM_LOAD(a[i], WS(buf) + (sr + i * 16u) * LDV + kk, LDV, false);
		[[unroll]] for (uint j = 0u; j < FM; j++)
			CM_LOAD(bm[j], XS(buf) + (sc + j * 16u) * LDV + kk, LDV, true);
		[[unroll]] for (uint i = 0u; i < FN; i++)
			[[unroll]] for (uint j = 0u; j < FM; j++)
				acc[i][j] = cm_mad(a[i], bm[j], acc[i][j]);
	}
}

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x, sg = tid >> 5;
#ifdef MULTI
	uint nta = wg % p.ntiles, mt = wg / p.ntiles;
	uint j = nta >= p.nt2 ? 2u : nta >= p.nt1 ? 1u : 0u;
	uint nt = nta - (j == 2u ? p.nt2 : j == 1u ? p.nt1 : 0u);
	gN = p.N3[j];
	gDnb1 = p.d_nb13[j];
	uint wbase = p.w_off3[j], xbase = p.x_off, dbase = p.d_off3[j];
#else
	uint nt = wg % p.ntiles, rest = wg / p.ntiles;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	gN = p.N;
	gDnb1 = p.d_nb1;
	uint wbase = p.w_off + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint xbase = p.x_off + i2 * p.x_nb2 + i3 * p.x_nb3;
	uint dbase = p.d_off + i2 * p.d_nb2 + i3 * p.d_nb3;
#endif
	uint n0 = nt * BN, m0 = mt * BM;
	uint sr = (sg / WM) * (FN * 16u), sc = (sg % WM) * (FM * 16u); // this subgroup's block
	CM_ACC acc[FN][FM];
	[[unroll]] for (uint i = 0u; i < FN; i++)
		[[unroll]] for (uint j = 0u; j < FM; j++)
			cm_zero(acc[i][j]);
	Stage st;
	fetch(0u, wbase, xbase, n0, m0, tid, st);
	put(0u, 0u, tid, st);
	barrier();
	uint cur = 0u;
	for (uint k0 = 0u; k0 < p.K; k0 += BK) {
		bool more = k0 + BK < p.K;
		if (more)
			fetch(k0 + BK, wbase, xbase, n0, m0, tid, st);
		products(cur, sr, sc, acc);
		// the other buffer was last read a step ago, before this step's barrier
		if (more)
			put(cur ^ 1u, k0 + BK, tid, st);
		barrier();
		cur ^= 1u;
	}
	// the tiles are free (the last step ended with a barrier): each subgroup
	// stages its fragments there one at a time
	uint lane = tid & 31u, cb = sg * (16u * LDW / 4u);
	[[unroll]] for (uint i = 0u; i < FN; i++)
		[[unroll]] for (uint j = 0u; j < FM; j++) {
			cm_store(acc[i][j], cb, LDW / 4u);
#ifndef EMU_CM
			subgroupMemoryBarrierShared();
#endif
			CM_SYNC();
			for (uint e = lane; e < 256u; e += 32u) {
				uint n = sr + i * 16u + (e & 15u), m = sc + j * 16u + (e >> 4);
				uint f = (e & 15u) * LDW + (e >> 4);
				if (n0 + n < gN && m0 + m < p.M)
					d_stf(dbase + (n0 + n) * D_NB0 + (m0 + m) * gDnb1, uintBitsToFloat(sm[cb + (f >> 2)][f & 3u]));
			}
			CM_SYNC();
		}
}
