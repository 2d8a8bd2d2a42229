#version 450
// attnt.comp — ATTENTION over an F16 KV cache with d_k, d_v <= 128: one
// workgroup per head and run of up to QT tokens (qt, 1 for decode). Tokens
// whose cell ranges start at the same cell (one sequence's) share each block
// of WG cells: a thread holds its cell's K row in registers, the block's V
// rows sit in shared memory, and every token of the run takes the block in
// turn. Per token the arithmetic is attn.comp's, in its order (a thread a
// cell's score, the block's max and sum over WG threads, online softmax,
// each thread one output dim adding the block's cells in order), so what a
// token gets does not depend on how many tokens share its workgroup; the
// host picks attn.comp or this shader by shape alone.
#extension GL_GOOGLE_include_directive : require
#define WG 128u
#define QT 8u
#define DK2 64u // d_k / 2 words at most
layout(local_size_x = 128) in;
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
	uint dk, dv, nh, nt;
	uint group, q_off, q_nb1, q_nb2;
	uint k_off, k_nb1, k_nb2, qt; // (attn.comp's k_type: the cache is F16)
	uint v_off, v_nb1, v_nb2, v_type; // (F16)
	uint r_off, r_nb0, r_nb1, d_off;
	uint d_nb0, d_nb1, d_nb2, n_cells;
	float scale, cap;
	uint t_off, tbl_n, bs_sh, n_blk;
} p;

shared float qs[QT * 128u];  // the run's q rows (rounded to F16), d_k <= 128
shared uint vt[WG * 64u];    // the block's V rows (F16 pairs), d_v <= 128
shared float ps[WG];

#include "attn.glsl"

void main()
{
	uint wg = wg_flat();
	uint ntb = (p.nt + p.qt - 1u) / p.qt;
	if (wg >= p.nh * ntb)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint h = wg % p.nh, t0 = (wg / p.nh) * p.qt, hk = h / p.group;
	uint nq = min(p.qt, p.nt - t0);
	for (uint e = tid; e < nq * p.dk; e += WG) {
		uint j = e / p.dk, i = e % p.dk;
		qs[j * 128u + i] = unpackHalf2x16(f32_to_f16(a_f(p.q_off + h * p.q_nb1 + (t0 + j) * p.q_nb2 + i * 4u))).x;
	}
	barrier();
	uint kb = p.k_off + hk * p.k_nb1, vb = p.v_off + hk * p.v_nb1;
	uint dk2 = p.dk >> 1, dv2 = p.dv >> 1;
	// runs of tokens whose ranges start at the same cell share the blocks
	for (uint g0 = 0u; g0 < nq;) {
		int c0 = e_i(p.r_off + (t0 + g0) * p.r_nb1);
		uint g1 = g0;
		int cmax = c0;
		bool bad = false;
		for (; g1 < nq; g1++) {
			int a0 = e_i(p.r_off + (t0 + g1) * p.r_nb1), a1 = e_i(p.r_off + p.r_nb0 + (t0 + g1) * p.r_nb1);
			if (a0 != c0)
				break;
			if (a1 < a0 || uint(a1) > p.n_cells)
				bad = true;
			cmax = max(cmax, a1);
		}
		if (c0 < 0 || bad) {
			if (tid == 0u)
				report(ST_RANGE, uint(c0));
			return;
		}
		float acc[QT], m[QT], l[QT];
		[[unroll]] for (uint j = 0u; j < QT; j++) {
			acc[j] = 0.0;
			m[j] = -1.0 / 0.0;
			l[j] = 0.0;
		}
		for (int cb = c0; cb < cmax; cb += int(WG)) {
			// this thread's cell: its K row in registers, its V row to shared memory
			int c = cb + int(tid);
			uint kw[DK2];
			if (c < cmax) {
				uint pc = pcell(uint(c));
				uint kr = (kb + pc * p.k_nb2) >> 2, vr = (vb + pc * p.v_nb2) >> 2;
				[[unroll]] for (uint u = 0u; u < DK2; u++)
					kw[u] = u < dk2 ? b_[kr + u] : 0u;
				for (uint u = 0u; u < dv2; u++)
					vt[tid * 64u + u] = c_[vr + u];
			}
			barrier();
			// one copy of a token's code (not unrolled: a compiler may round
			// copies differently), whatever its place in the run
			[[dont_unroll]] for (uint j = 0u; j < QT; j++) {
				if (g0 + j >= g1)
					break;
				int c1 = e_i(p.r_off + p.r_nb0 + (t0 + g0 + j) * p.r_nb1);
				if (cb >= c1)
					continue; // uniform: past this token's range
				float s = -1.0 / 0.0;
				if (c < c1) {
					// attn.comp's kdot: 16 values a step, added in order
					float sd = 0.0;
					uint qo = (g0 + j) * 128u;
					[[unroll]] for (uint i = 0u; i < 2u * DK2; i += 16u) // (constant indices: kw stays in registers)
						if (i < p.dk)
							[[unroll]] for (uint u = 0u; u < 8u; u++) {
								vec2 kv = unpackHalf2x16(kw[(i >> 1) + u]);
								sd += kv.x * qs[qo + i + 2u * u] + kv.y * qs[qo + i + 2u * u + 1u];
							}
					s = sd * p.scale;
					if (p.cap != 0.0)
						s = p.cap * tanh_s(s / p.cap);
				}
				float bm = wg_max(s);
				float nm = max(m[j], bm);
				if (nm == -1.0 / 0.0)
					continue; // uniform: every score of the block is -inf
				float pv = s == -1.0 / 0.0 ? 0.0 : exp(s - nm);
				ps[tid] = pv;
				float bsum = wg_sum(pv); // its barriers also publish ps[]
				float f = m[j] == -1.0 / 0.0 ? 0.0 : exp(m[j] - nm);
				l[j] = l[j] * f + bsum;
				m[j] = nm;
				uint nc = min(WG, uint(c1 - cb));
				if (tid < p.dv) {
					float a = acc[j] * f;
					uint sh = (tid & 1u) * 16u, vo = tid >> 1;
					for (uint cc = 0u; cc < nc; cc++) {
						float w = ps[cc];
						if (w != 0.0)
							a += w * unpackHalf2x16(vt[cc * 64u + vo] >> sh).x;
					}
					acc[j] = a;
				}
				barrier(); // ps[] is rewritten by the next token
			}
			barrier(); // vt[] is rewritten by the next block
		}
		[[unroll]] for (uint j = 0u; j < QT; j++) {
			if (g0 + j >= g1)
				break;
			float inv = l[j] > 0.0 ? 1.0 / l[j] : 0.0;
			if (tid < p.dv)
				d_stf(p.d_off + h * p.d_nb1 + (t0 + g0 + j) * p.d_nb2 + tid * p.d_nb0, acc[j] * inv);
		}
		g0 = g1;
	}
}
