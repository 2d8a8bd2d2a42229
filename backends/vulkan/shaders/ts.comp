#version 450
// ts.comp — SAMPLE_TEMP (backend.h 1.4) and LOGSUMEXP (1.6): the draw and
// the logprobs normaliser of alice/temp_sample.h, the same float and
// double operations in the same order (precise: nothing contracted; the
// one division correctly rounded), so the token equals the host sampler's.
// Three dispatches, as the CUDA backend's topk.cu has them:
// STAGE 1: a workgroup per (row, 8 blocks of 1024): their max (exact in
//   any order) into scratch;
// STAGE 2: a workgroup per (row, block): the block's weights in shared
//   memory, 8 threads add the interleaved float chains (SAMPLE_TEMP; double
//   chains for LOGSUMEXP), thread 0 adds the 8 in double: the block sum
//   (and SAMPLE_TEMP's live count) into scratch;
// STAGE 3: SAMPLE_TEMP a workgroup per row: z over the blocks in order, the
//   walk to the drawn token (the entered block's weights recomputed);
//   LOGSUMEXP an invocation per row: mx, z and the named token's value.
// Needs shaderFloat64 (the op is not offered without it).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#define ACTQ_NO_BLK 1
#include "actq.glsl"
#include "sample.glsl"
#ifndef STAGE
#define STAGE 1
#endif
#ifndef LSE
#define LSE 0
#endif

layout(push_constant) uniform PC {
	uint n, rows, nblk, S;
	uint x_off, x_nb1, p_off, s_off; // p_off: SAMPLE_TEMP's parameters / LOGSUMEXP's tokens (has_p)
	uint d_off, has_p;
} p;

#define TS_BLOCK 1024u
#define TS_PER 8u
float xat(uint row, uint i) { return uintBitsToFloat(a_[(p.x_off + row * p.x_nb1) / 4u + i]); }

// alice/vexp.h's alice_exp_neg
float exp_neg(float x)
{
	const float lo = -87.0;
	float xc = x < lo ? lo : x;
	xc = xc > 0.0 ? 0.0 : xc;
	precise float n = (xc * 1.44269504 + 12582912.0) - 12582912.0;
	precise float r = xc - n * 0.693145752;
	r = r - n * 1.42860677e-6;
	precise float q = 1.3888889e-3;
	q = q * r + 8.3333333e-3;
	q = q * r + 4.1666667e-2;
	q = q * r + 1.6666667e-1;
	q = q * r + 0.5;
	q = q * r + 1.0;
	q = q * r + 1.0;
	float sc = intBitsToFloat((int(n) + 127) * (1 << 23));
	precise float v = q * sc;
	return x < lo ? 0.0 : v;
}

// scratch (binding 0 in stages 1-2, 3 in stage 3; words from s_off):
// block sums (double) [rows * nblk], live counts [rows * nblk], maxima [rows * S]
uint bs_w(uint row, uint b) { return p.s_off / 4u + 2u * (row * p.nblk + b); }
uint live_w(uint row, uint b) { return p.s_off / 4u + 2u * p.rows * p.nblk + row * p.nblk + b; }
uint mx_w(uint row, uint s) { return p.s_off / 4u + 3u * p.rows * p.nblk + row * p.S + s; }
#if STAGE == 3
#define SCR(i) e_[i]
#else
#define SCR(i) d_[i]
#endif
float row_max(uint row)
{
	float m = NEG_INF;
	for (uint s = 0u; s < p.S; s++)
		m = max(m, uintBitsToFloat(SCR(mx_w(row, s))));
	return m;
}
// SAMPLE_TEMP's T of a row (b_: the parameters, 4 words a row)
float temp_of(uint row) { return uintBitsToFloat(b_[p.p_off / 4u + 4u * row]); }
float floor_of(float mx, float t)
{
	precise float f = mx - 30.0 * (t > 1.0 ? t : 1.0);
	return f;
}
float weight(float x, float mx, float fl, float inv_t)
{
	precise float a = (x - mx) * inv_t;
	return x >= fl ? exp_neg(a) : 0.0;
}

shared float red[256];
#if STAGE == 2 || STAGE == 3
shared float w[TS_BLOCK];
#endif
#if STAGE == 2
shared float partf[8];
shared double partd[8];
shared uint livec;
#endif

#if STAGE == 3 && !LSE
shared double bs_s[256]; // n <= ALICE_SAMPLE_TEMP_MAX: at most 256 blocks
shared uint lv_s[256];
shared double s_z, s_cum;
shared uint s_live;
shared int s_last, s_b, s_tok, s_state;

// alice_ts_draw (or alice_ts_single) for the row at temperature t, max mx
void walk(uint row, uint o, float t, float mx)
{
	uint tid = gl_LocalInvocationID.x;
	float fl = floor_of(mx, t), inv_t = div_cr(1.0, t);
	for (uint b = tid; b < p.nblk; b += 256u) {
		bs_s[b] = packDouble2x32(uvec2(e_[bs_w(row, b)], e_[bs_w(row, b) + 1u]));
		lv_s[b] = e_[live_w(row, b)];
	}
	barrier();
	if (tid == 0u) {
		precise double z = 0.0;
		uint live = 0u;
		int last = -1;
		for (uint b = 0u; b < p.nblk; b++) {
			z = z + bs_s[b];
			live += lv_s[b];
			if (lv_s[b] != 0u)
				last = int(b);
		}
		s_z = z;
		s_live = live;
		s_last = last;
		s_tok = 0x7fffffff;
	}
	barrier();
	if (s_live == 1u) { // the one live token, no draw
		for (uint i = tid; i < p.n; i += 256u)
			if (clean_(xat(row, i)) >= fl)
				atomicMin(s_tok, int(i));
		barrier();
		if (tid == 0u) {
			d_[o] = uint(s_tok);
			d_[o + 1u] = 0u;
		}
		return;
	}
	uint pw = p.p_off / 4u + 4u * row;
	precise double u = packDouble2x32(uvec2(b_[pw + 1u], b_[pw + 2u])) * s_z;
	int last = s_last;
	if (tid == 0u) {
		s_cum = 0.0;
		s_b = 0;
		s_state = 0;
	}
	barrier();
	for (;;) {
		if (tid == 0u) { // whole blocks skipped
			int b = s_b;
			precise double cum = s_cum;
			for (;;) {
				if (b >= int(p.nblk) || b == last)
					break;
				precise double c2 = cum + bs_s[b];
				if (u < c2)
					break;
				cum = c2;
				b++;
			}
			s_b = b;
			s_cum = cum;
			if (b >= int(p.nblk)) {
				s_tok = -1;
				s_state = 1;
			}
		}
		barrier();
		if (s_state != 0)
			break;
		uint b = uint(s_b), i0 = b * TS_BLOCK, i1 = min(i0 + TS_BLOCK, p.n);
		for (uint i = i0 + tid; i < i1; i += 256u)
			w[i - i0] = weight(clean_(xat(row, i)), mx, fl, inv_t);
		barrier();
		if (tid == 0u) {
			precise double cum = s_cum;
			int hit = -1, tok = -1;
			for (uint i = i0; i < i1 && tok < 0; i++) {
				float wv = w[i - i0];
				if (wv > 0.0)
					hit = int(i);
				cum = cum + double(wv);
				if (wv > 0.0 && u < cum)
					tok = int(i);
			}
			s_cum = cum;
			if (tok >= 0 || int(b) == last) {
				s_tok = tok >= 0 ? tok : hit; // past the end: u landed in the rounding slack
				s_state = 1;
			} else {
				s_b = int(b) + 1;
			}
		}
		barrier();
		if (s_state != 0)
			break;
	}
	if (tid == 0u) {
		d_[o] = uint(s_tok);
		d_[o + 1u] = 1u;
	}
}
#endif

void main()
{
	uint tid = gl_LocalInvocationID.x, wg = wg_flat();
#if STAGE == 1
	uint row = wg / p.S, s = wg % p.S;
	if (row >= p.rows || (LSE == 0 && !(temp_of(row) > 0.0)))
		return;
	uint i0 = s * TS_PER * TS_BLOCK, i1 = min(i0 + TS_PER * TS_BLOCK, p.n);
	float m = NEG_INF;
	for (uint i = i0 + tid; i < i1; i += 256u)
		m = max(m, clean_(xat(row, i)));
	red[tid] = m;
	barrier();
	for (uint st = 128u; st > 0u; st >>= 1) {
		if (tid < st)
			red[tid] = max(red[tid], red[tid + st]);
		barrier();
	}
	if (tid == 0u)
		d_[mx_w(row, s)] = floatBitsToUint(red[0]);
#elif STAGE == 2
	uint row = wg / p.nblk, b = wg % p.nblk;
	if (row >= p.rows)
		return;
#if LSE
	float mx = row_max(row);
	if (!(mx > NEG_INF)) {
		if (tid == 0u) {
			d_[bs_w(row, b)] = 0u;
			d_[bs_w(row, b) + 1u] = 0u;
		}
		return;
	}
	precise float fl = mx - 30.0;
#else
	float t = temp_of(row);
	if (!(t > 0.0))
		return;
	float mx = row_max(row);
	if (!(mx > NEG_INF))
		return;
	float fl = floor_of(mx, t), inv_t = div_cr(1.0, t);
#endif
	uint i0 = b * TS_BLOCK, cnt = min(TS_BLOCK, p.n - i0);
	if (tid == 0u)
		livec = 0u;
	barrier();
	uint live = 0u;
	for (uint j = tid; j < TS_BLOCK; j += 256u) {
		float wv = 0.0; // past the row's end: + 0 leaves a chain as it is
		if (j < cnt) {
			float xv = clean_(xat(row, i0 + j));
#if LSE
			if (xv >= fl) {
				precise float a = xv - mx;
				wv = exp_neg(a);
			}
#else
			live += xv >= fl ? 1u : 0u;
			wv = weight(xv, mx, fl, inv_t);
#endif
		}
		w[j] = wv;
	}
	if (live > 0u)
		atomicAdd(livec, live);
	barrier();
	if (tid < 8u) {
#if LSE
		precise double acc = 0.0;
		for (uint j = 0u; j < TS_BLOCK / 8u; j++)
			acc = acc + double(w[tid + 8u * j]);
		partd[tid] = acc;
#else
		precise float acc = 0.0;
		for (uint j = 0u; j < TS_BLOCK / 8u; j++)
			acc = acc + w[tid + 8u * j];
		partf[tid] = acc;
#endif
	}
	barrier();
	if (tid == 0u) {
		precise double sum = 0.0;
		for (uint j = 0u; j < 8u; j++)
#if LSE
			sum = sum + partd[j];
#else
			sum = sum + double(partf[j]);
#endif
		uvec2 sb = unpackDouble2x32(sum);
		d_[bs_w(row, b)] = sb.x;
		d_[bs_w(row, b) + 1u] = sb.y;
#if !LSE
		d_[live_w(row, b)] = livec;
#endif
	}
#elif LSE // STAGE 3, LOGSUMEXP: an invocation per row
	uint row = wg * 256u + tid;
	if (row >= p.rows)
		return;
	float mx = row_max(row);
	precise double z = 0.0;
	if (mx > NEG_INF)
		for (uint b = 0u; b < p.nblk; b++)
			z = z + packDouble2x32(uvec2(e_[bs_w(row, b)], e_[bs_w(row, b) + 1u]));
	int tok = p.has_p != 0u ? int(b_[p.p_off / 4u + 2u * row]) : -1;
	float val = tok >= 0 && uint(tok) < p.n ? clean_(xat(row, uint(tok))) : 0.0;
	uvec2 zb = unpackDouble2x32(z);
	uint o = p.d_off / 4u + 4u * row;
	d_[o] = floatBitsToUint(mx);
	d_[o + 1u] = zb.x;
	d_[o + 2u] = zb.y;
	d_[o + 3u] = floatBitsToUint(val);
#else // STAGE 3, SAMPLE_TEMP: a workgroup per row
	uint row = wg;
	if (row >= p.rows)
		return;
	uint o = p.d_off / 4u + 2u * row;
	float t = temp_of(row);
	float mx = t > 0.0 ? row_max(row) : NEG_INF;
	if (!(t > 0.0) || !(mx > NEG_INF)) {
		if (tid == 0u) {
			d_[o] = 0xffffffffu;
			d_[o + 1u] = 0u;
		}
		return;
	}
	walk(row, o, t, mx);
#endif
}
