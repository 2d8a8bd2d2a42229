#version 450
// fa.comp — ATTENTION for the prefill tokens of a step on cooperative
// matrices (16 x 16 x 16, F16 operands, F32 accumulators), over an F16 K/V
// cache with head dim D (64 or 128), no soft-cap; the CUDA backend's
// fattn.cu in Vulkan's terms. A workgroup of 4 subgroups owns one query
// head and 64 consecutive tokens (16 a subgroup) and walks the union of
// their cell ranges in blocks of 32 cells aligned to multiples of 32. The
// fragments of an accumulator cannot be scaled row by row, so the softmax
// takes two passes instead of an online rescale: the first finds each
// row's maximum, the second forms p = exp(s - max) (F32 sums), rounds P to
// F16 and accumulates P V on the matrices; two lanes share a row's 32
// scores of a block. q is rounded to F16 first, as
// attn.comp does for an F16 cache.
// Batch invariance: a token is taken here only when its sequence's run of
// tokens in the op has at least 16 (RUN_LEN, attn.glsl; attn.comp skips
// those tokens), and its blocks are aligned, so its sums do not depend on
// the other tokens of its workgroup (cells outside its range add exact
// zeros). Paged cache: each row is fetched through the block table; a cell
// of a block the table does not map is read as zeros, and reported where it
// lies in a token's range.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifndef D
#define D 64u
#endif
#define NW 4u
#define TOK (16u * NW)
#define CB 32u
#define ST8 (D / 8u + 1u) // row stride of the K / V / q tiles in 16-byte vectors (one of pad)
#define SS 36u		  // row stride of a subgroup's staged scores (floats)
#define PS8 5u		  // row stride of a subgroup's P (16-byte vectors: 32 halves + pad)
#define SCOPE 3		  // gl_ScopeSubgroup
layout(local_size_x = 128) in;
#include "common.glsl"
// K (src1) and V (src2) rows as 16-byte vectors (the host checks the alignment)
layout(std430, set = 0, binding = 2) readonly buffer BufK4 { uvec4 k4_[]; };
layout(std430, set = 0, binding = 3) readonly buffer BufV4 { uvec4 v4_[]; };

layout(push_constant) uniform PC {
	uint dk, dv, nh, nt;
	uint group, q_off, q_nb1, q_nb2;
	uint k_off, k_nb1, k_nb2, k_type;
	uint v_off, v_nb1, v_nb2, v_type;
	uint r_off, r_nb0, r_nb1, d_off;
	uint d_nb0, d_nb1, d_nb2, n_cells;
	float scale, cap;
	uint t_off, tbl_n, bs_sh, n_blk;
	uint fa;
} p;

#include "attn.glsl"

// K rows 0..CB-1 and V rows CB..2CB-1 of a block, first the 64 tokens' q;
// P: as 16-byte vectors (a fragment's element and stride counted in
// vectors; halves stored one at a time were slower on the H100)
shared uvec4 kv[2u * CB * ST8];
shared uvec4 ps[NW * 16u * PS8];
shared float ss[NW * 16u * SS];
shared int sr0[TOK], sr1[TOK];
shared bool cont[TOK + 29u]; // rg_cont of the tile's tokens and 14 / 15 neighbours
shared bool taken[TOK]; // the token's output is written here
shared bool mapped[CB];	// the block's cells the table maps
shared float sl[TOK];
shared int span[2];

// block c0's K rows (and V rows with both) into kv
void load_block(uint c0, uint hi, uint hk, bool both)
{
	const uint PER = D / 8u;
	for (uint i = gl_LocalInvocationID.x; i < CB * PER; i += 128u) {
		uint r = i / PER, part = i % PER, cell = c0 + r;
		int pc = cell < hi ? pcell_or_none(cell) : -1;
		uvec4 kq = uvec4(0u), vq = uvec4(0u);
		if (pc >= 0) {
			kq = k4_[(p.k_off + hk * p.k_nb1 + uint(pc) * p.k_nb2) / 16u + part];
			if (both)
				vq = v4_[(p.v_off + hk * p.v_nb1 + uint(pc) * p.v_nb2) / 16u + part];
		}
		kv[r * ST8 + part] = kq;
		if (part == 0u)
			mapped[r] = pc >= 0;
		if (both)
			kv[(CB + r) * ST8 + part] = vq;
	}
}

void main()
{
	uint wg = wg_flat();
	uint ntile = (p.nt + TOK - 1u) / TOK;
	if (wg >= p.nh * ntile)
		return;
	uint tid = gl_LocalInvocationID.x, sg = tid >> 5, lane = tid & 31u;
	uint h = wg % p.nh, tb = (wg / p.nh) * TOK, hk = h / p.group;
	// which tokens continue a run, tb - 14 .. tb + 78, read at once
	if (tid < TOK + 29u)
		cont[tid] = rg_cont(int(tb) - 14 + int(tid));
	barrier();
	if (tid < TOK) {
		uint t = tb + tid, len;
		RUN_LEN(cont, tid, len)
		int r0 = 0, r1 = 0;
		bool tk = t < p.nt && len >= 16u;
		if (tk) {
			r0 = rg0(t);
			r1 = rg1(t);
			if (r0 < 0 || r1 < r0 || uint(r1) > p.n_cells) {
				if (h == 0u)
					report(ST_RANGE, uint(r0));
				r0 = r1 = 0;
			}
		}
		sr0[tid] = r0;
		sr1[tid] = r1;
		taken[tid] = tk;
	}
	// the 64 tokens' q, rounded to F16, as the rows of kv
	for (uint i = tid; i < TOK * (D / 8u); i += 128u) {
		uint r = i / (D / 8u), part = i % (D / 8u), t = tb + r;
		uint hq[8];
		[[unroll]] for (uint e = 0u; e < 8u; e++)
			hq[e] = t < p.nt ? f32_to_f16(a_f(p.q_off + h * p.q_nb1 + t * p.q_nb2 + (part * 8u + e) * 4u)) : 0u;
		kv[r * ST8 + part] = uvec4(hq[0] | (hq[1] << 16), hq[2] | (hq[3] << 16), hq[4] | (hq[5] << 16), hq[6] | (hq[7] << 16));
	}
	barrier();
	if (tid == 0u) {
		int lo = 0x7fffffff, hi = 0;
		for (uint i = 0u; i < TOK; i++)
			if (sr1[i] > sr0[i]) {
				lo = min(lo, sr0[i]);
				hi = max(hi, sr1[i]);
			}
		span[0] = lo == 0x7fffffff ? 0 : lo / int(CB) * int(CB);
		span[1] = hi;
	}
	fcoopmatNV<16, SCOPE, 16, 16> qf[D / 16u];
	[[unroll]] for (uint kc = 0u; kc < D / 16u; kc++)
		coopMatLoadNV(qf[kc], kv, sg * 16u * ST8 + kc * 2u, ST8, false);
	barrier();
	uint lo = uint(span[0]), hi = uint(span[1]);
	uint row = sg * 16u + (lane >> 1), hf = lane & 1u; // the row a lane shares with its neighbour
	int a0 = sr0[row], a1 = sr1[row];
	uint sb = sg * 16u * SS;
	float m = -1.0 / 0.0, l = 0.0;
	fcoopmatNV<32, SCOPE, 16, 16> of[D / 16u];
	[[unroll]] for (uint nd = 0u; nd < D / 16u; nd++)
		of[nd] = fcoopmatNV<32, SCOPE, 16, 16>(0.0);
	// pass 0: each row's maximum; pass 1: P and P V
	for (uint pass = 0u; pass < 2u; pass++) {
		for (uint c0 = lo; c0 < hi; c0 += CB) {
			load_block(c0, hi, hk, pass == 1u);
			barrier();
			// S = q K^T: 16 tokens x 32 cells, staged for the rows' lanes
			[[unroll]] for (uint j = 0u; j < 2u; j++) {
				fcoopmatNV<32, SCOPE, 16, 16> s = fcoopmatNV<32, SCOPE, 16, 16>(0.0);
				[[unroll]] for (uint kc = 0u; kc < D / 16u; kc++) {
					fcoopmatNV<16, SCOPE, 16, 16> kf;
					coopMatLoadNV(kf, kv, j * 16u * ST8 + kc * 2u, ST8, true);
					s = coopMatMulAddNV(qf[kc], kf, s);
				}
				coopMatStoreNV(s, ss, sb + j * 16u, SS, false);
			}
			subgroupMemoryBarrierShared();
			subgroupBarrier();
			{
				// two lanes a row: lane 2r + hf takes cells 16 hf .. 16 hf + 15
				uint rb = sb + (lane >> 1) * SS + hf * 16u;
				if (pass == 0u) {
					float mx = -1.0 / 0.0;
					bool bad = false;
					[[unroll]] for (uint c = 0u; c < 16u; c++) {
						int cell = int(c0 + hf * 16u + c);
						bool in_ = cell >= a0 && cell < a1;
						mx = in_ ? max(mx, ss[rb + c] * p.scale) : mx;
						bad = bad || (in_ && !mapped[hf * 16u + c]);
					}
					m = max(m, mx);
					if (bad) // a range over a block the table does not map
						report(ST_RANGE, c0);
				} else {
					uint hp[16];
					[[unroll]] for (uint c = 0u; c < 16u; c++) {
						int cell = int(c0 + hf * 16u + c);
						float pv = cell >= a0 && cell < a1 ? exp(ss[rb + c] * p.scale - m) : 0.0;
						l += pv;
						hp[c] = f32_to_f16(pv);
					}
					[[unroll]] for (uint v = 0u; v < 2u; v++) {
						uint o = 8u * v;
						ps[(sg * 16u + (lane >> 1)) * PS8 + hf * 2u + v] =
							uvec4(hp[o] | (hp[o + 1u] << 16), hp[o + 2u] | (hp[o + 3u] << 16),
							      hp[o + 4u] | (hp[o + 5u] << 16), hp[o + 6u] | (hp[o + 7u] << 16));
					}
				}
			}
			// the row's maximum from both halves (before pass 1 uses it)
			if (pass == 0u && c0 + CB >= hi)
				m = max(m, subgroupShuffleXor(m, 1u));
			subgroupMemoryBarrierShared();
			subgroupBarrier();
			if (pass == 1u) {
				// O += P V: P 16 tokens x 16 cells, V 16 cells x 16 dims
				[[unroll]] for (uint j = 0u; j < 2u; j++) {
					fcoopmatNV<16, SCOPE, 16, 16> pa;
					coopMatLoadNV(pa, ps, sg * 16u * PS8 + j * 2u, PS8, false);
					[[unroll]] for (uint nd = 0u; nd < D / 16u; nd++) {
						fcoopmatNV<16, SCOPE, 16, 16> vb;
						coopMatLoadNV(vb, kv, (CB + j * 16u) * ST8 + nd * 2u, ST8, false);
						of[nd] = coopMatMulAddNV(pa, vb, of[nd]);
					}
				}
			}
			barrier();
		}
	}
	// both halves' sums, added in a fixed order
	float l2 = subgroupShuffleXor(l, 1u);
	if (hf == 0u)
		sl[row] = l + l2;
	subgroupMemoryBarrierShared();
	subgroupBarrier();
	// out: each 16 x 16 fragment staged, then 8 values a lane
	[[unroll]] for (uint nd = 0u; nd < D / 16u; nd++) {
		coopMatStoreNV(of[nd], ss, sb, SS, false);
		subgroupMemoryBarrierShared();
		subgroupBarrier();
		for (uint e = lane; e < 256u; e += 32u) {
			uint r = e >> 4, c = e & 15u, t = tb + sg * 16u + r;
			float lr = sl[sg * 16u + r];
			if (taken[sg * 16u + r])
				d_stf(p.d_off + h * p.d_nb1 + t * p.d_nb2 + (nd * 16u + c) * p.d_nb0, lr > 0.0 ? ss[sb + r * SS + c] * (1.0 / lr) : 0.0);
		}
		subgroupMemoryBarrierShared();
		subgroupBarrier();
	}
}
