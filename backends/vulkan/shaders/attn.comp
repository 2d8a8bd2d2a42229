#version 450
// attn.comp — fused ATTENTION over the KV cache: one workgroup per
// (head, token); cells of the token's range [c0, c1) go in blocks of WG,
// one score per thread, online softmax across blocks; each thread owns
// output dims tid, tid + WG, ... (d_v <= 4 * WG). With an F16 K cache, q is
// rounded to F16 first (as the CPU reference does).
// Paged cache (src4 = f_, tbl_n > 0): the ranges and the order of cells are
// virtual (n_cells = the virtual extent); each cell's K/V row is at its
// physical cell tbl[c >> bs_sh] << bs_sh | c & (2^bs_sh - 1); an entry
// outside the pool is reported (ST_RANGE) and read as block 0.
#extension GL_GOOGLE_include_directive : require
#define WG 128u
#define DMAX 512u
layout(local_size_x = 128) in;
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
	uint dk, dv, nh, nt;
	uint group, q_off, q_nb1, q_nb2;
	uint k_off, k_nb1, k_nb2, k_type;
	uint v_off, v_nb1, v_nb2, v_type;
	uint r_off, r_nb0, r_nb1, d_off;
	uint d_nb0, d_nb1, d_nb2, n_cells;
	float scale, cap;
	uint t_off, tbl_n, bs_sh, n_blk; // block table: byte offset in f_, entries (0: none), log2 block, blocks
	uint fa; // fa.comp takes the tokens of long runs (RUN_LEN >= 16); GQ: the rounded copy's offset (binding 6)
	uint c_off; // GQ (where not ~0): the block counters' (binding 8)
} p;

shared float qs[DMAX];
shared float ps[WG];
shared uint pcs[WG]; // the block's physical cells
shared bool rc[32];  // which of the neighbouring tokens continue a run (p.fa)

// K row dot q (K in b_)
float kdot(uint kr)
{
	float s = 0.0;
	if (p.k_type == T_F32) {
		uint w = kr >> 2;
		for (uint i = 0u; i < p.dk; i++)
			s += uintBitsToFloat(b_[w + i]) * qs[i];
	} else if ((kr & 3u) == 0u && (p.dk & 1u) == 0u) {
		// eight words loaded before their adds (a row is all latency);
		// the adds stay in order
		uint w = kr >> 2, i = 0u;
		for (; i + 16u <= p.dk; i += 16u) {
			uint kw[8];
			[[unroll]] for (uint u = 0u; u < 8u; u++)
				kw[u] = b_[w + (i >> 1) + u];
			[[unroll]] for (uint u = 0u; u < 8u; u++) {
				vec2 kv = unpackHalf2x16(kw[u]);
				s += kv.x * qs[i + 2u * u] + kv.y * qs[i + 2u * u + 1u];
			}
		}
		for (; i < p.dk; i += 2u) {
			vec2 kv = unpackHalf2x16(b_[w + (i >> 1)]);
			s += kv.x * qs[i] + kv.y * qs[i + 1u];
		}
	} else {
		for (uint i = 0u; i < p.dk; i++)
			s += b_ld(kr + i * 2u, T_F16) * qs[i];
	}
	return s;
}

#include "attn.glsl"
// GQ (c_off not ~0): each token's output row [nh * dv] (packed: the host
// checks) also rounded for the Q8_K product that reads it next (gq.glsl).
// One shader either way, so the attention's own arithmetic is the same
// code with it or without.
#define GQ_STORE(w, v) g_[w] = floatBitsToUint(v)
#include "gq.glsl"
shared uint gq_last[3];

void main()
{
	uint wg = wg_flat();
	if (wg >= p.nh * p.nt)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint h = wg % p.nh, t = wg / p.nh, hk = h / p.group;
	bool gq = p.c_off != ~0u;
	if (!gq && p.fa != 0u) { // (GQ runs where fa.comp does not)
		// fa.comp's tokens are left to it
		if (tid < 30u)
			rc[tid] = rg_cont(int(t) - 14 + int(tid));
		barrier();
		uint len;
		RUN_LEN(rc, 0u, len)
		if (len >= 16u)
			return;
	}
	uint qr = p.q_off + h * p.q_nb1 + t * p.q_nb2;
	for (uint i = tid; i < p.dk; i += WG) {
		float q = a_f(qr + i * 4u);
		if (p.k_type == T_F16)
			q = unpackHalf2x16(f32_to_f16(q)).x;
		qs[i] = q;
	}
	barrier();
	int c0 = e_i(p.r_off + t * p.r_nb1), c1 = e_i(p.r_off + p.r_nb0 + t * p.r_nb1);
	if (c0 < 0 || c1 < c0 || uint(c1) > p.n_cells) {
		if (tid == 0u)
			report(ST_RANGE, uint(c0));
		c0 = c1 = 0; // (the step fails; the row is written, zeros, and completes its GQ blocks)
	}
	uint kb = p.k_off + hk * p.k_nb1, vb = p.v_off + hk * p.v_nb1;
	uint vsz = p.v_type == T_F32 ? 4u : 2u;
	float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
	float m = -1.0 / 0.0, l = 0.0;
	for (int cb = c0; cb < c1; cb += int(WG)) {
		int c = cb + int(tid);
		float s = -1.0 / 0.0;
		uint pc = c < c1 ? pcell(uint(c)) : 0u;
		if (c < c1) {
			s = kdot(kb + pc * p.k_nb2) * p.scale;
			if (p.cap != 0.0)
				s = p.cap * tanh_s(s / p.cap);
		}
		float bm = wg_max(s);
		float nm = max(m, bm);
		if (nm == -1.0 / 0.0)
			continue; // uniform: every score of the block is -inf
		float pv = s == -1.0 / 0.0 ? 0.0 : exp(s - nm);
		ps[tid] = pv;
		pcs[tid] = pc;
		float bs = wg_sum(pv); // its barriers also publish ps[] and pcs[]
		float f = m == -1.0 / 0.0 ? 0.0 : exp(m - nm);
		l = l * f + bs;
		m = nm;
		uint nc = min(WG, uint(c1 - cb));
		[[unroll]] for (uint j = 0u; j < 4u; j++) {
			uint dcol = tid + j * WG;
			if (dcol < p.dv) {
				float a = acc[j] * f;
				uint vr = vb + dcol * vsz, cc = 0u;
				// eight cells' values loaded before their adds, added in order
				for (; cc + 8u <= nc; cc += 8u) {
					float vv[8];
					[[unroll]] for (uint u = 0u; u < 8u; u++)
						vv[u] = c_ld(vr + pcs[cc + u] * p.v_nb2, p.v_type);
					[[unroll]] for (uint u = 0u; u < 8u; u++) {
						float w = ps[cc + u];
						if (w != 0.0)
							a += w * vv[u];
					}
				}
				for (; cc < nc; cc++) {
					float w = ps[cc];
					if (w != 0.0)
						a += w * c_ld(vr + pcs[cc] * p.v_nb2, p.v_type);
				}
				acc[j] = a;
			}
		}
		barrier();
	}
	float inv = l > 0.0 ? 1.0 / l : 0.0;
	uint dr = p.d_off + h * p.d_nb1 + t * p.d_nb2;
	[[unroll]] for (uint j = 0u; j < 4u; j++) {
		uint dcol = tid + j * WG;
		if (dcol < p.dv)
			d_stf(dr + dcol * p.d_nb0, acc[j] * inv);
	}
	if (!gq)
		return;
	// the blocks of the row this head's [h dv, (h + 1) dv) touches (dv <= 512: at most 3)
	uint nblk = p.nh * p.dv / 256u, e0 = h * p.dv, e1 = e0 + p.dv;
	memoryBarrierBuffer(); // this invocation's outputs before the count
	barrier();
	if (tid == 0u)
		for (uint k = 0u; k < 3u; k++) {
			uint b = e0 / 256u + k, lo = max(e0, b * 256u), hi = min(e1, b * 256u + 256u);
			gq_last[k] = lo < hi && gq_count((p.c_off >> 2) + t * nblk + b, hi - lo) ? 1u : 0u;
		}
	barrier();
	for (uint k = 0u; k < 3u; k++)
		if (gq_last[k] != 0u) { // (uniform: shared, after the barrier)
			uint b = e0 / 256u + k;
			gq_round(tid, (p.c_off >> 2) + t * nblk + b, ((p.d_off + t * p.d_nb2) >> 2) + b * 256u,
				 (p.fa >> 2) + t * nblk * 256u + b * 256u);
		}
}
