#version 450
// topk.comp — TOPK (backend.h 1.4): the best K entries of a row, as the cpu
// and cuda backends give them. A workgroup selects from a list of entries
// (key, index): a 4-pass radix select (8 bits a pass, over order-preserving
// keys; -0 and +0 tie), the entries above the K-th key and the first ties
// at it gathered, then a bitonic sort on (key desc, index asc).
// STAGE 0: one workgroup per row, the row's values are the entries.
// STAGE 1: a workgroup per chunk of a row writes the chunk's best
//   min(K, chunk) (key, index) pairs, sorted, to scratch (pads: key 0,
//   below every value's key, never chosen).
// STAGE 2: one workgroup per row takes the chunks' candidates as entries.
// The row's best K are among its chunks' best K, and equal keys appear in
// the candidate list in index order (chunks in order, each sorted with
// ties by index), so the result is the one-pass result. (One workgroup
// walking a 128k row six times took ~2.4 ms on an H100.)
// dst: (index, cleaned value bits).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#include "sample.glsl"
#ifndef STAGE
#define STAGE 0
#endif

layout(push_constant) uniform PC {
	uint n, k, rows, x_off;
	uint x_nb1, d_off, chunk, nch; // chunk: entries per chunk (stage 1), nch chunks a row
	uint s_off;		       // stage 2: the candidates, bytes into binding 2
} p;
// stage 1 writes its candidates as dst (binding 0, at d_off)

#define TK_SORT 128u

shared uint hist[256];
shared uint cnt[256];
shared uint s_prefix, s_want, s_above;
shared uint ek[TK_SORT], ei[TK_SORT]; // key, index

uint key_of(float x)
{
	float c = clean_(x);
	uint u = floatBitsToUint(c == 0.0 ? 0.0 : c);
	return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

float xat(uint row, uint i) { return uintBitsToFloat(a_[(p.x_off + row * p.x_nb1) / 4u + i]); }

bool better(uint ka, uint ia, uint kb, uint ib) { return ka > kb || (ka == kb && ia < ib); }

// the workgroup's entries: e0 (first value's index, stages 0 / 1) or the
// candidates from c0 (stage 2)
uint g_row, g_e0, g_c0;
uint ent_key(uint e)
{
#if STAGE == 2
	return b_[g_c0 + 2u * e];
#else
	return key_of(xat(g_row, g_e0 + e));
#endif
}
uint ent_idx(uint e)
{
#if STAGE == 2
	return b_[g_c0 + 2u * e + 1u];
#else
	return g_e0 + e;
#endif
}

void main()
{
	uint wg = wg_flat(), tid = gl_LocalInvocationID.x;
#if STAGE == 1
	if (wg >= p.rows * p.nch)
		return;
	uint ch = wg % p.nch;
	g_row = wg / p.nch;
	g_e0 = ch * p.chunk;
	uint n = min(p.chunk, p.n - g_e0);
#else
	if (wg >= p.rows)
		return;
	g_row = wg;
	g_e0 = 0u;
#if STAGE == 2
	uint n = p.nch * p.k;
	g_c0 = p.s_off / 4u + g_row * 2u * n;
#else
	uint n = p.n;
#endif
#endif
	uint k = min(p.k, n);
	uint prefix = 0u, mask = 0u, want = k;
	for (int shift = 24; shift >= 0; shift -= 8) {
		hist[tid] = 0u;
		barrier();
		for (uint i = tid; i < n; i += 256u) {
			uint key = ent_key(i);
			if ((key & mask) == prefix)
				atomicAdd(hist[(key >> uint(shift)) & 255u], 1u);
		}
		barrier();
		if (tid == 0u) {
			uint above = 0u;
			int d = 255;
			for (; d > 0 && above + hist[d] < want; d--)
				above += hist[d];
			s_prefix = prefix | (uint(d) << uint(shift));
			s_want = want - above;
		}
		barrier();
		prefix = s_prefix;
		want = s_want;
		mask |= 255u << uint(shift);
		barrier();
	}
	uint kth = prefix, above = k - want;
	for (uint i = tid; i < TK_SORT; i += 256u) {
		ek[i] = 0u;
		ei[i] = 0xffffffffu;
	}
	// ties at kth in entry order: each thread a contiguous range
	uint per = (n + 255u) / 256u, i0 = min(tid * per, n), i1 = min(i0 + per, n), ties = 0u;
	for (uint i = i0; i < i1; i++)
		ties += ent_key(i) == kth ? 1u : 0u;
	cnt[tid] = ties;
	if (tid == 0u)
		s_above = 0u;
	barrier();
	if (tid == 0u) {
		uint run = 0u;
		for (uint t = 0u; t < 256u; t++) {
			uint c = cnt[t];
			cnt[t] = run;
			run += c;
		}
	}
	barrier();
	uint rank = cnt[tid];
	for (uint i = i0; i < i1; i++) {
		uint key = ent_key(i);
		if (key > kth) {
			uint s = atomicAdd(s_above, 1u);
			ek[s] = key;
			ei[s] = ent_idx(i);
		} else if (key == kth) {
			if (rank < want) {
				ek[above + rank] = key;
				ei[above + rank] = ent_idx(i);
			}
			rank++;
		}
	}
	barrier();
	for (uint sz = 2u; sz <= TK_SORT; sz <<= 1)
		for (uint j = sz >> 1; j > 0u; j >>= 1) {
			if (tid < TK_SORT) {
				uint q = tid ^ j;
				if (q > tid) {
					bool desc = (tid & sz) == 0u;
					uint ka = ek[tid], ia = ei[tid], kb = ek[q], ib = ei[q];
					if (desc ? better(kb, ib, ka, ia) : better(ka, ia, kb, ib)) {
						ek[tid] = kb;
						ei[tid] = ib;
						ek[q] = ka;
						ei[q] = ia;
					}
				}
			}
			barrier();
		}
#if STAGE == 1
	if (tid < p.k) {
		uint o = p.d_off / 4u + (wg * p.k + tid) * 2u;
		d_[o] = tid < k ? ek[tid] : 0u;
		d_[o + 1u] = tid < k ? ei[tid] : 0xffffffffu;
	}
#else
	if (tid < k) {
		uint id = ei[tid], o = p.d_off / 4u + g_row * 2u * k + 2u * tid;
		d_[o] = id;
		d_[o + 1u] = floatBitsToUint(clean_(xat(g_row, id)));
	}
#endif
}
