#version 450
// mmt.comp — MUL_MAT for many activation columns (prefill): a classic
// shared-memory tile. A workgroup of 256 computes 64 weight rows x 64
// columns of one batch; per 32-wide K step it dequantizes the 64 x 32
// weight tile (dq16, once per element) and loads the 32 x 64 activation
// tile, then each thread accumulates a 4 x 4 block.
#extension GL_GOOGLE_include_directive : require
#define BN 64u
#define BM 64u
#define BK 32u
layout(local_size_x = 256) in;
#include "common.glsl"
#include "dequant.glsl"

layout(push_constant) uniform PC {
	uint K, N, M, ne12;
	uint r2, r3, ntiles, mtiles;
	uint w_off, w_nb1, w_nb2, w_nb3;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, d_off, d_nb0, d_nb1;
	uint d_nb2, d_nb3, n_wg, s_off; // s_off: Q8_1 block sums (Q4_1/Q5_1)
} p;

shared float ws[BK * BN];
shared float xs[BK * BM];
#if WMIN
shared float wms[BN]; // the weight rows' block mins for this K step
shared float xss[BM]; // the columns' fp16 d*sum(q) for this K step
#endif

void main()
{
	uint wg = wg_flat();
	if (wg >= p.n_wg)
		return;
	uint tid = gl_LocalInvocationID.x;
	uint nt = wg % p.ntiles, rest = wg / p.ntiles;
	uint mt = rest % p.mtiles, b = rest / p.mtiles;
	uint i2 = b % p.ne12, i3 = b / p.ne12;
	uint n0 = nt * BN, m0 = mt * BM;
	uint wbase = p.w_off + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
	uint xbase = p.x_off + i2 * p.x_nb2 + i3 * p.x_nb3;
	uint tx = tid & 15u, ty = tid >> 4;
	float acc[4][4];
	[[unroll]] for (uint i = 0u; i < 4u; i++)
		[[unroll]] for (uint j = 0u; j < 4u; j++)
			acc[i][j] = 0.0;
	for (uint k0 = 0u; k0 < p.K; k0 += BK) {
#if PLAIN
		[[unroll]] for (uint e = 0u; e < 8u; e++) {
			uint idx = tid + e * 256u, r = idx / BK, k = idx % BK;
			float v = 0.0;
			if (n0 + r < p.N && k0 + k < p.K)
				v = a_ld(wbase + (n0 + r) * p.w_nb1 + (k0 + k) * WSIZE, WTYPE);
			ws[k * BN + r] = v;
		}
#else
		if (tid < 128u) {
			uint r = tid >> 1, g = tid & 1u;
			float v[16];
			if (n0 + r < p.N) {
#if WMIN
				dq16_nomin(wbase + (n0 + r) * p.w_nb1, (k0 >> 4) + g, v);
				if (g == 0u)
					wms[r] = dq16_min(wbase + (n0 + r) * p.w_nb1, k0 >> 4);
#else
				dq16(wbase + (n0 + r) * p.w_nb1, (k0 >> 4) + g, v);
#endif
			} else {
				[[unroll]] for (uint i = 0u; i < 16u; i++)
					v[i] = 0.0;
#if WMIN
				if (g == 0u)
					wms[r] = 0.0;
#endif
			}
			[[unroll]] for (uint i = 0u; i < 16u; i++)
				ws[(g * 16u + i) * BN + r] = v[i];
		}
#endif
		[[unroll]] for (uint e = 0u; e < 8u; e++) {
			uint idx = tid + e * 256u, c = idx / BK, k = idx % BK;
			float v = 0.0;
			if (m0 + c < p.M && k0 + k < p.K)
				v = b_f(xbase + (m0 + c) * p.x_nb1 + (k0 + k) * p.x_nb0);
			xs[k * BM + c] = v;
		}
#if WMIN
		if (tid < BM) {
			uint srow = m0 + tid + p.M * (i2 + p.ne12 * i3);
			xss[tid] = m0 + tid < p.M ? b_f(p.s_off + (srow * (p.K / 32u) + (k0 >> 5)) * 4u) : 0.0;
		}
#endif
		barrier();
#if WMIN
		[[unroll]] for (uint i = 0u; i < 4u; i++)
			[[unroll]] for (uint j = 0u; j < 4u; j++)
				acc[i][j] = fma(wms[ty * 4u + i], xss[tx * 4u + j], acc[i][j]);
#endif
		[[unroll]] for (uint k = 0u; k < BK; k++) {
			vec4 a = vec4(ws[k * BN + ty * 4u], ws[k * BN + ty * 4u + 1u], ws[k * BN + ty * 4u + 2u],
				      ws[k * BN + ty * 4u + 3u]);
			vec4 c = vec4(xs[k * BM + tx * 4u], xs[k * BM + tx * 4u + 1u], xs[k * BM + tx * 4u + 2u],
				      xs[k * BM + tx * 4u + 3u]);
			[[unroll]] for (uint i = 0u; i < 4u; i++)
				[[unroll]] for (uint j = 0u; j < 4u; j++)
					acc[i][j] = fma(a[i], c[j], acc[i][j]);
		}
		barrier();
	}
	uint dbase = p.d_off + i2 * p.d_nb2 + i3 * p.d_nb3;
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		uint n = n0 + ty * 4u + i;
		if (n >= p.N)
			continue;
		[[unroll]] for (uint j = 0u; j < 4u; j++) {
			uint m = m0 + tx * 4u + j;
			if (m < p.M)
				d_stf(dbase + n * p.d_nb0 + m * p.d_nb1, acc[i][j]);
		}
	}
}
