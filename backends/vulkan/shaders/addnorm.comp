#version 450
// addnorm.comp — a residual ADD (optional), the RMS_NORM of its sum (times
// a weight) and the rounding of the norm's output for the mat-vecs that read
// it next (actq.comp's formats 1-4), in one dispatch.
// Per element the same operations as ew.comp, norm.comp and actq.comp in the
// same order (the squares summed by 128 threads as in norm.comp, then one
// element a thread in blocks as in actq.comp), so the results equal the
// three dispatches' bit for bit.
// Bindings: 0 norm output, 1 a, 2 b (ADD's sources), 3 the sum (in/out),
// 4 the weight, 5 the rounded copy (scratch, [ne0, rows] floats). A row
// takes ceil(ne0 / 256) workgroups.
#extension GL_GOOGLE_include_directive : require
#define WG 256u
#define NT 128u // threads of the sum, as in norm.comp
#define SRC2_RW 1
#define SRC4_RW 1
layout(local_size_x = 256) in;
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
	uint ne0, n_rows, has_add, fmt; // fmt 0: no rounded copy
	uint a_off, a_nb1, b_off, b_nb1;
	uint s_off, s_nb1, d_off, d_nb1;
	uint w_off, has_w, q_off, bs;
	float eps;
} p;

shared float s_av[256];
shared uint s_ix[256];
#include "actq.glsl"

float e_f(uint b) { return uintBitsToFloat(e_[b >> 2]); }

void main()
{
	// a workgroup per 256-element chunk of a row: each sums the whole row's
	// squares (the same order, so the same scale) and writes its own chunk,
	// so a decode row's chunks run side by side
	uint nch = (p.ne0 + 255u) / 256u, wg = wg_flat(), r = wg / nch, c0 = (wg % nch) * 256u;
	if (r >= p.n_rows)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint ar = p.a_off + r * p.a_nb1, br = p.b_off + r * p.b_nb1, sr = p.s_off + r * p.s_nb1;
	uint dr = p.d_off + r * p.d_nb1;
	// this thread's element of the chunk, its sum and weight loaded first
	// (off the path after the reduction)
	uint e = c0 + tid;
	bool ok = e < p.ne0;
	float ve = 0.0, we = 1.0;
	if (ok) {
		ve = a_f(ar + e * 4u);
		if (p.has_add != 0u)
			ve = ve + b_f(br + e * 4u);
		if (p.has_w != 0u)
			we = e_f(p.w_off + e * 4u);
	}
	// pass 1 (threads 0..127, norm.comp's order): the sum's squares; the
	// other threads add zeros, which leaves the total alone
	precise float s = 0.0; // no fused multiply-add (one summation order on any compiler)
	if (tid < NT) {
		uint i = tid;
		for (; i + 3u * NT < p.ne0; i += 4u * NT) {
			float v[4];
			[[unroll]] for (uint k = 0u; k < 4u; k++)
				v[k] = a_f(ar + (i + k * NT) * 4u);
			if (p.has_add != 0u)
				[[unroll]] for (uint k = 0u; k < 4u; k++)
					v[k] = v[k] + b_f(br + (i + k * NT) * 4u);
			s += v[0] * v[0];
			s += v[1] * v[1];
			s += v[2] * v[2];
			s += v[3] * v[3];
		}
		for (; i < p.ne0; i += NT) {
			float v = a_f(ar + i * 4u);
			if (p.has_add != 0u)
				v = v + b_f(br + i * 4u);
			s += v * v;
		}
	}
	s = wg_sum(s); // (its barriers: every read of the row is done before the writes below)
	float scale = 1.0 / sqrt(s / float(p.ne0) + p.eps);
	// pass 2, one element of this chunk a thread: the norm's output and its
	// rounding (actq.comp's blocks of bs threads)
	uint qr = p.q_off + r * p.ne0 * 4u, bi = tid % p.bs;
	{
		float v = 0.0;
		if (ok) {
			if (p.has_add != 0u)
				c_[(sr + e * 4u) >> 2] = floatBitsToUint(ve);
			v = ve * scale;
			if (p.has_w != 0u)
				v *= we;
			d_stf(dr + e * 4u, v);
			if (p.fmt == 1u)
				f_[(qr + e * 4u) >> 2] = floatBitsToUint(round_f16(v));
			else if (p.fmt == 2u)
				f_[(qr + e * 4u) >> 2] = f32_to_bf16(v) << 16;
		}
		if (p.fmt < 3u)
			return;
		float amax, mx;
		blk_amax(tid, bi, p.bs, v, amax, mx);
		if (ok)
			f_[(qr + e * 4u) >> 2] = floatBitsToUint(actq_q8(p.fmt, v, amax, mx));
		barrier();
	}
}
