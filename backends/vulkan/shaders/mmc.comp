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
// latency on the H100 with 2 workgroups an SM). A column's results do not
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
#define LDS 40u // row stride of the F16 tiles (pads the banks)
#define LDC 68u // row stride of the staged output
#define SCOPE 3 // gl_ScopeSubgroup
layout(local_size_x = NT) in;
#include "common.glsl"
#include "dequant.glsl"
// the activations as 16-byte vectors (xvec: rows 16-byte aligned)
layout(std430, set = 0, binding = 2) readonly buffer BufB4 { vec4 b4_[]; };

layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, ntiles, mtiles;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, n_wg, s_off;
	uint xvec;
} p;

shared float16_t ws[2][BN * LDS]; // [n][k]
shared float16_t xs[2][BM * LDS]; // [m][k]
// the output staged whole (64 x 64), or (the larger tiles, where that would
// pass the 48 KB of shared memory) a fragment at a time per subgroup
#ifndef STAGE_FRAG
shared float cs[BN * LDC]; // [n][m]
#else
#define LDW 20u
shared float cs[WN * WM * 16u * LDW]; // [subgroup][n][m] (16 x 16)
#endif

// one step's share of a thread: WPT weight groups of 16 (row, half) and
// XPT activation vectors (or 4 XPT scalars)
#define WPT (BN * 2u / NT)
#define XPT (BM * 8u / NT)
struct Stage {
	float w[16u * WPT];
	vec4 x[XPT];
};

void fetch(uint k0, uint wbase, uint xbase, uint n0, uint m0, uint tid, out Stage s)
{
#if PLAIN
	[[unroll]] for (uint e = 0u; e < 16u * WPT; e++) {
		uint idx = tid + e * NT, r = idx / BK, k = idx % BK;
		s.w[e] = n0 + r < p.N && k0 + k < p.K ? a_ld(wbase + (n0 + r) * p.w_nb1 + (k0 + k) * WSIZE, WTYPE) : 0.0;
	}
#else
	[[unroll]] for (uint u = 0u; u < WPT; u++) {
		uint idx = tid + u * NT, r = idx >> 1, g = idx & 1u;
		float v[16];
		// a row past N reads row N - 1 (its products land outside the output)
		dq16(wbase + min(n0 + r, p.N - 1u) * p.w_nb1, (k0 >> 4) + g, v);
		[[unroll]] for (uint i = 0u; i < 16u; i++)
			s.w[u * 16u + i] = v[i];
	}
#endif
	if (p.xvec != 0u) {
		[[unroll]] for (uint e = 0u; e < XPT; e++) {
			uint idx = tid + e * NT, c = idx >> 3, k = (idx & 7u) * 4u;
			uint b = xbase + min(m0 + c, p.M - 1u) * p.x_nb1 + (k0 + k) * 4u;
			s.x[e] = k0 + k < p.K ? b4_[b >> 4] : vec4(0.0);
		}
	} else {
		[[unroll]] for (uint e = 0u; e < 4u * XPT; e++) {
			uint idx = tid + e * NT, c = idx / BK, k = idx % BK;
			s.x[e >> 2][e & 3u] = m0 + c < p.M && k0 + k < p.K ? b_f(xbase + (m0 + c) * p.x_nb1 + (k0 + k) * p.x_nb0) : 0.0;
		}
	}
}

void put(uint buf, uint tid, Stage s)
{
#if PLAIN
	[[unroll]] for (uint e = 0u; e < 16u * WPT; e++) {
		uint idx = tid + e * NT;
		ws[buf][(idx / BK) * LDS + idx % BK] = float16_t(s.w[e]);
	}
#else
	[[unroll]] for (uint u = 0u; u < WPT; u++) {
		uint idx = tid + u * NT, r = idx >> 1, g = idx & 1u;
		[[unroll]] for (uint i = 0u; i < 16u; i++)
			ws[buf][r * LDS + g * 16u + i] = float16_t(s.w[u * 16u + i]);
	}
#endif
	if (p.xvec != 0u) {
		[[unroll]] for (uint e = 0u; e < XPT; e++) {
			uint idx = tid + e * NT, c = idx >> 3, k = (idx & 7u) * 4u;
			[[unroll]] for (uint i = 0u; i < 4u; i++)
				xs[buf][c * LDS + k + i] = float16_t(s.x[e][i]);
		}
	} else {
		[[unroll]] for (uint e = 0u; e < 4u * XPT; e++) {
			uint idx = tid + e * NT;
			xs[buf][(idx / BK) * LDS + idx % BK] = float16_t(s.x[e >> 2][e & 3u]);
		}
	}
}

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
				coopMatLoadNV(a[i], ws[cur], (sr + i * 16u) * LDS + kk, LDS, false);
			[[unroll]] for (uint j = 0u; j < FM; j++)
				coopMatLoadNV(bm[j], xs[cur], (sc + j * 16u) * LDS + kk, LDS, true);
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
