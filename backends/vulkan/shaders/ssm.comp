#version 450
// ssm.comp — the recurrent ops of backend.h 1.1, both walking the batch's
// tokens in order and updating their state source in place:
//   SSM=1 SSM_CONV: one thread per channel (all sequences: a token's
//         sequence picks the state slot);
//   SSM=2 GATED_DELTA_NET: one thread per (state row r, value head h,
//         sequence s): row r of a head's matrix state only ever meets its
//         own v[r], so rows update independently.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#if SSM == 1
#define SRC2_RW 1
#else
#define SRC4_RW 1
#endif
#include "common.glsl"

layout(push_constant) uniform PC {
	uint C, T, K, n_seq;      // conv: channels, tokens, taps; gdn: S, T, -, n_seq
	uint x_off, x_nb0, x_nb1, w_off;
	uint st_off, sq_off, sq_nb0, d_off;
	uint Hk, Hv, qk_nb1, qk_nb2;
	uint v_nb1, v_nb2, g_nb0, g_nb1;
	uint b_nb0, b_nb1, v_off, g_off;
	uint b_off;
	float scale;
} p;

#if SSM == 1
void main()
{
	uint c = gl_GlobalInvocationID.x;
	if (c >= p.C)
		return;
	uint K = p.K;
	for (uint t = 0u; t < p.T; t++) {
		int s = e_i(p.sq_off + t * p.sq_nb0);
		if (s < 0 || uint(s) >= p.n_seq) {
			if (c == 0u)
				report(ST_RANGE, uint(s));
			continue;
		}
		uint st = p.st_off + ((uint(s) * p.C + c) * (K - 1u)) * 4u; // c_: state
		uint wc = p.w_off + c * K * 4u;                            // b_: w
		float xv = a_f(p.x_off + t * p.x_nb1 + c * p.x_nb0);
		float sum = 0.0;
		for (uint k = 0u; k + 1u < K; k++)
			sum += uintBitsToFloat(c_[(st >> 2) + k]) * b_f(wc + k * 4u);
		sum += xv * b_f(wc + (K - 1u) * 4u);
		d_stf(p.d_off + (t * p.C + c) * 4u, sum);
		for (uint k = 0u; k + 2u < K; k++)
			c_[(st >> 2) + k] = c_[(st >> 2) + k + 1u];
		c_[(st >> 2) + K - 2u] = floatBitsToUint(xv);
	}
}
#else
// bindings: a_ qk, b_ v, c_ g, e_ beta, f_ state, g_ seq
void main()
{
	uint S = p.C;
	uint id = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 64u) + gl_GlobalInvocationID.x;
	if (id >= S * p.Hv * p.n_seq)
		return;
	uint r = id % S, h = (id / S) % p.Hv, s = id / (S * p.Hv);
	uint hk = h % p.Hk;
	uint row = (p.st_off >> 2) + (((s * p.Hv + h) * S + r) * S);
	for (uint t = 0u; t < p.T; t++) {
		int ts = int(g_[(p.sq_off + t * p.sq_nb0) >> 2]);
		if (ts < 0 || uint(ts) >= p.n_seq) {
			if (id == 0u)
				report(ST_RANGE, uint(ts));
			continue;
		}
		if (uint(ts) != s)
			continue;
		uint q = p.x_off + hk * p.qk_nb1 + t * p.qk_nb2;
		uint k = p.x_off + (p.Hk + hk) * p.qk_nb1 + t * p.qk_nb2;
		float vr = b_f(p.v_off + h * p.v_nb1 + t * p.v_nb2 + r * 4u);
		float decay = exp(c_f(p.g_off + h * p.g_nb0 + t * p.g_nb1));
		float beta = uintBitsToFloat(e_[(p.b_off + h * p.b_nb0 + t * p.b_nb1) >> 2]);
		float dot = 0.0;
		for (uint i = 0u; i < S; i++) {
			float m = uintBitsToFloat(f_[row + i]) * decay;
			f_[row + i] = floatBitsToUint(m);
			dot += m * a_f(k + i * 4u);
		}
		float dr = (vr - dot) * beta;
		float o = 0.0;
		for (uint i = 0u; i < S; i++) {
			float m = uintBitsToFloat(f_[row + i]) + dr * a_f(k + i * 4u);
			f_[row + i] = floatBitsToUint(m);
			o += m * a_f(q + i * 4u);
		}
		d_stf(p.d_off + ((t * p.Hv + h) * S + r) * 4u, o * p.scale);
	}
}
#endif
