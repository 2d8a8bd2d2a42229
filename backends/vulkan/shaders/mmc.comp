#version 450
// mmc.comp — MUL_MAT for many activation columns (prefill) on cooperative
// matrices (VK_NV_cooperative_matrix: 16 x 16 x 16, F16 operands, F32
// accumulators), where the device has them. A workgroup of 4 subgroups of
// 32 computes 64 weight rows x 64 columns; per 32-wide K step the weight
// tile is dequantized to F16 and the activation tile converted to F16 in
// shared memory (as the CUDA backend's F16 GEMM rounds them), and each
// subgroup multiplies a 32 x 32 block as 2 x 2 tiles. The tiles are double
// buffered: step s + 1's global loads are issued before step s's products
// and stored after them, one barrier a step (a step was ~2 us of load
// latency on the H100 with 2 workgroups an SM). The activations come as F16
// rows converted once (tof16.comp) where K % 8 == 0. A column's results do not
// depend on the other columns of the launch (batch invariance): every
// output takes the same products in the same K order, whatever the tiling.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// The tile: WN x WM subgroups, each FN x FM 16 x 16 fragments: 2 x 2 of
// 2 x 2 (64 x 64, 128 threads); comparison variants (ALICE_VK_MMC=L / W):
// MMC_L 2 x 2 of 4 x 2 (128 weight rows x 64 columns), MMC_W 2 x 2 of
// 2 x 4 (64 x 128: each weight dequantized half as often).
#if defined(MMC_L) || defined(MMC_W)
#extension GL_KHR_shader_subgroup_basic : require
#define STAGE_FRAG 1
#define WN 2u
#define WM 2u
#ifdef MMC_L
#define FN 4u
#define FM 2u
#else
#define FN 2u
#define FM 4u
#endif
#else
#define WN 2u
#define WM 2u
#define FN 2u
#define FM 2u
#endif
#define NT (32u * WN * WM)
#define BN (WN * FN * 16u)
#define BM (WM * FM * 16u)
#define BK 32u
#define LDS8 5u // row stride of the F16 tiles in 16-byte vectors (40 halves: pads the banks)
#define LDC 68u // row stride of the staged output
#define SCOPE 3 // gl_ScopeSubgroup
layout(local_size_x = NT) in;
#include "common.glsl"
#include "dequant.glsl"
// the activations as packed F16 rows (xvec 2: tof16.comp's scratch, rows
// 16-byte aligned), else F32 read one element at a time
layout(std430, set = 0, binding = 2) readonly buffer BufBH { uvec4 bh4_[]; };

layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, ntiles, mtiles;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, n_wg, s_off;
	uint xvec;
} p;

// the tiles as 16-byte vectors of 8 halves (one store a vector; the
// cooperative loads count elements and strides in vectors)
#ifndef MMC_H
shared uvec4 ws[2][BN * LDS8]; // [n][k]
shared uvec4 xs[2][BM * LDS8]; // [m][k]
#define TILE_EL(i) ((i) / 8u) // a fragment's first element and stride, in the arrays' units
#else
// MMC_H (comparison): the tiles as halves, stored one at a time
shared float16_t ws[2][BN * LDS8 * 8u];
shared float16_t xs[2][BM * LDS8 * 8u];
#define TILE_EL(i) (i)
#endif
// the output staged whole (64 x 64), or (the larger tiles, where that would
// pass the 48 KB of shared memory) a fragment at a time per subgroup
#ifndef STAGE_FRAG
shared float cs[BN * LDC]; // [n][m]
#else
#define LDW 20u
shared float cs[WN * WM * 16u * LDW]; // [subgroup][n][m] (16 x 16)
#endif

// one step's share of a thread, converted to F16 as loaded: WPT weight
// groups of 16 (row, half), XPT activation vectors of 8 (column, quarter)
#define WPT (BN * 2u / NT)
#define XPT (BM * 4u / NT)
struct Stage {
	uvec4 w[2u * WPT];
	uvec4 x[XPT];
};

uint h2(float a, float b) { return packFloat2x16(f16vec2(float16_t(a), float16_t(b))); }
uvec4 h8(float v[16], uint o)
{
	return uvec4(h2(v[o], v[o + 1u]), h2(v[o + 2u], v[o + 3u]), h2(v[o + 4u], v[o + 5u]), h2(v[o + 6u], v[o + 7u]));
}

void fetch(uint k0, uint wbase, uint xbase, uint n0, uint m0, uint tid, out Stage s)
{
	[[unroll]] for (uint u = 0u; u < WPT; u++) {
		uint idx = tid + u * NT, r = idx >> 1, g = idx & 1u;
		float v[16];
#if PLAIN
		[[unroll]] for (uint i = 0u; i < 16u; i++) {
			uint k = k0 + g * 16u + i;
			v[i] = n0 + r < p.N && k < p.K ? a_ld(wbase + (n0 + r) * p.w_nb1 + k * WSIZE, WTYPE) : 0.0;
		}
#else
		// a row past N reads row N - 1 (its products land outside the output)
		dq16(wbase + min(n0 + r, p.N - 1u) * p.w_nb1, (k0 >> 4) + g, v);
#endif
		s.w[2u * u] = h8(v, 0u);
		s.w[2u * u + 1u] = h8(v, 8u);
	}
	[[unroll]] for (uint e = 0u; e < XPT; e++) {
		uint idx = tid + e * NT, c = idx >> 2, k = k0 + (idx & 3u) * 8u;
		if (p.xvec == 2u) {
			// a column past M reads column M - 1 (its results are not stored)
			uint b = xbase + min(m0 + c, p.M - 1u) * p.x_nb1 + k * 2u;
			s.x[e] = k < p.K ? bh4_[b >> 4] : uvec4(0u);
		} else {
			float v[16];
			[[unroll]] for (uint i = 0u; i < 8u; i++)
				v[i] = m0 + c < p.M && k + i < p.K ? b_f(xbase + (m0 + c) * p.x_nb1 + (k + i) * p.x_nb0) : 0.0;
			s.x[e] = h8(v, 0u);
		}
	}
}

#ifndef MMC_H
void put(uint buf, uint tid, Stage s)
{
	[[unroll]] for (uint u = 0u; u < WPT; u++) {
		uint idx = tid + u * NT, r = idx >> 1, g = idx & 1u;
		ws[buf][r * LDS8 + g * 2u] = s.w[2u * u];
		ws[buf][r * LDS8 + g * 2u + 1u] = s.w[2u * u + 1u];
	}
	[[unroll]] for (uint e = 0u; e < XPT; e++) {
		uint idx = tid + e * NT;
		xs[buf][(idx >> 2) * LDS8 + (idx & 3u)] = s.x[e];
	}
}
#else
void put8(uint buf, bool w, uint at, uvec4 v)
{
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		f16vec2 h = unpackFloat2x16(v[i]);
		if (w) {
			ws[buf][at + 2u * i] = h.x;
			ws[buf][at + 2u * i + 1u] = h.y;
		} else {
			xs[buf][at + 2u * i] = h.x;
			xs[buf][at + 2u * i + 1u] = h.y;
		}
	}
}
void put(uint buf, uint tid, Stage s)
{
	[[unroll]] for (uint u = 0u; u < WPT; u++) {
		uint idx = tid + u * NT, r = idx >> 1, g = idx & 1u;
		put8(buf, true, (r * LDS8 + g * 2u) * 8u, s.w[2u * u]);
		put8(buf, true, (r * LDS8 + g * 2u + 1u) * 8u, s.w[2u * u + 1u]);
	}
	[[unroll]] for (uint e = 0u; e < XPT; e++) {
		uint idx = tid + e * NT;
		put8(buf, false, ((idx >> 2) * LDS8 + (idx & 3u)) * 8u, s.x[e]);
	}
}
#endif

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x, sg = tid >> 5;
	uint nt = wg % p.ntiles, rest = wg / p.ntiles;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	uint n0 = nt * BN, m0 = mt * BM;
	uint wbase = p.w_off + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint xbase = p.x_off + i2 * p.x_nb2 + i3 * p.x_nb3;
	uint sr = (sg / WM) * (FN * 16u), sc = (sg % WM) * (FM * 16u); // this subgroup's block
	fcoopmatNV<32, SCOPE, 16, 16> acc[FN][FM];
	[[unroll]] for (uint i = 0u; i < FN; i++)
		[[unroll]] for (uint j = 0u; j < FM; j++)
			acc[i][j] = fcoopmatNV<32, SCOPE, 16, 16>(0.0);
	Stage st;
	fetch(0u, wbase, xbase, n0, m0, tid, st);
	put(0u, tid, st);
	barrier();
	uint cur = 0u;
	for (uint k0 = 0u; k0 < p.K; k0 += BK) {
		bool more = k0 + BK < p.K;
		if (more)
			fetch(k0 + BK, wbase, xbase, n0, m0, tid, st);
		[[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
			fcoopmatNV<16, SCOPE, 16, 16> a[FN], bm[FM];
			[[unroll]] for (uint i = 0u; i < FN; i++)
				coopMatLoadNV(a[i], ws[cur], TILE_EL(((sr + i * 16u) * LDS8 * 8u + kk)), TILE_EL(LDS8 * 8u), false);
			[[unroll]] for (uint j = 0u; j < FM; j++)
				coopMatLoadNV(bm[j], xs[cur], TILE_EL(((sc + j * 16u) * LDS8 * 8u + kk)), TILE_EL(LDS8 * 8u), true);
			[[unroll]] for (uint i = 0u; i < FN; i++)
				[[unroll]] for (uint j = 0u; j < FM; j++)
					acc[i][j] = coopMatMulAddNV(a[i], bm[j], acc[i][j]);
		}
		// the other buffer was last read a step ago, before this step's barrier
		if (more)
			put(cur ^ 1u, tid, st);
		barrier();
		cur ^= 1u;
	}
	uint dbase = p.d_off + i2 * p.d_nb2 + i3 * p.d_nb3;
#ifndef STAGE_FRAG
	[[unroll]] for (uint i = 0u; i < FN; i++)
		[[unroll]] for (uint j = 0u; j < FM; j++)
			coopMatStoreNV(acc[i][j], cs, (sr + i * 16u) * LDC + sc + j * 16u, LDC, false);
	barrier();
	for (uint e = tid; e < BN * BM; e += NT) {
		uint n = e % BN, m = e / BN;
		if (n0 + n < p.N && m0 + m < p.M)
			d_stf(dbase + (n0 + n) * p.d_nb0 + (m0 + m) * p.d_nb1, cs[n * LDC + m]);
	}
#else
	uint lane = tid & 31u, cb = sg * 16u * LDW;
	[[unroll]] for (uint i = 0u; i < FN; i++)
		[[unroll]] for (uint j = 0u; j < FM; j++) {
			coopMatStoreNV(acc[i][j], cs, cb, LDW, false);
			subgroupMemoryBarrierShared();
			subgroupBarrier();
			for (uint e = lane; e < 256u; e += 32u) {
				uint n = sr + i * 16u + (e & 15u), m = sc + j * 16u + (e >> 4);
				if (n0 + n < p.N && m0 + m < p.M)
					d_stf(dbase + (n0 + n) * p.d_nb0 + (m0 + m) * p.d_nb1, cs[cb + (e & 15u) * LDW + (e >> 4)]);
			}
			subgroupBarrier();
		}
#endif
}
