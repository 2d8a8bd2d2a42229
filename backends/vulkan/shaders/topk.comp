#version 450
// topk.comp — TOPK (backend.h 1.4): the best K entries of one row per
// workgroup, as the cpu and cuda backends give them: a 4-pass radix select
// (8 bits a pass, over order-preserving keys; -0 and +0 tie), the entries
// above the K-th key and the lowest-index ties at it gathered, then a
// bitonic sort on (key desc, index asc). dst: (index, cleaned value bits).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint n, k, rows, x_off;
	uint x_nb1, d_off;
} p;

#define TK_SORT 128u
#define FLT_MAX_ 3.402823466e+38

shared uint hist[256];
shared uint cnt[256];
shared uint s_prefix, s_want, s_above;
shared uint ek[TK_SORT], ei[TK_SORT]; // key, index

float clean_(float x)
{
	if (isnan(x))
		return uintBitsToFloat(0xff800000u); // -inf
	return x < FLT_MAX_ ? x : FLT_MAX_;
}

uint key_of(float x)
{
	float c = clean_(x);
	uint u = floatBitsToUint(c == 0.0 ? 0.0 : c);
	return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

float xat(uint row, uint i) { return uintBitsToFloat(a_[(p.x_off + row * p.x_nb1) / 4u + i]); }

bool better(uint ka, uint ia, uint kb, uint ib) { return ka > kb || (ka == kb && ia < ib); }

void main()
{
	uint row = wg_flat();
	if (row >= p.rows)
		return;
	uint tid = gl_LocalInvocationID.x, n = p.n, k = p.k;
	uint prefix = 0u, mask = 0u, want = k;
	for (int shift = 24; shift >= 0; shift -= 8) {
		hist[tid] = 0u;
		barrier();
		for (uint i = tid; i < n; i += 256u) {
			uint key = key_of(xat(row, i));
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
	// ties at kth in index order: each thread a contiguous range
	uint per = (n + 255u) / 256u, i0 = tid * per, i1 = min(i0 + per, n), ties = 0u;
	for (uint i = i0; i < i1; i++)
		ties += key_of(xat(row, i)) == kth ? 1u : 0u;
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
		uint key = key_of(xat(row, i));
		if (key > kth) {
			uint s = atomicAdd(s_above, 1u);
			ek[s] = key;
			ei[s] = i;
		} else if (key == kth) {
			if (rank < want) {
				ek[above + rank] = key;
				ei[above + rank] = i;
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
	if (tid < k) {
		uint id = ei[tid], o = p.d_off / 4u + row * 2u * k + 2u * tid;
		d_[o] = id;
		d_[o + 1u] = floatBitsToUint(clean_(xat(row, id)));
	}
}
