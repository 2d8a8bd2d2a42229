#version 450
// actq.comp — rounds MUL_MAT activations the way the weight type's dot
// product pairs them (llama.cpp's vec_dot_type, which the CPU reference and
// the parity bounds assume): F16 or BF16 per element, Q8_0 blocks of 32
// (d = fp16(amax/127)), Q8_K blocks of 256 (d = 1/(-127/max)). Writes the
// rounded values as F32 into a contiguous scratch [K, rows] (Q8_1, fmt 5:
// Q8_0 values plus fp16(d * sum(q)) per block at s_off). One thread per
// block (per element for F16/BF16).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint K, M, ne2, fmt; // fmt: 1 f16, 2 bf16, 3 q8_0, 4 q8_k
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, bs, n_items, s_off; // s_off: Q8_1 block sums after the values
} p;

// a / b correctly rounded in nearly every case (Vulkan allows 2.5 ulp for '/')
float div_cr(float a, float b)
{
	float q = a / b;
	float r = fma(-q, b, a);
	return fma(r, 1.0 / b, q);
}

float round_f16(float x) { return unpackHalf2x16(f32_to_f16(x)).x; }

void main()
{
	uint it = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 64u) + gl_GlobalInvocationID.x;
	if (it >= p.n_items)
		return;
	uint nbk = p.K / p.bs;
	uint blk = it % nbk, row = it / nbk;
	uint m = row % p.M, i2 = (row / p.M) % p.ne2, i3 = row / (p.M * p.ne2);
	uint xb = p.x_off + m * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3 + blk * p.bs * p.x_nb0;
	uint ob = (row * p.K + blk * p.bs) * 4u;
	if (p.fmt == 1u) {
		d_stf(ob, round_f16(a_f(xb)));
		return;
	}
	if (p.fmt == 2u) {
		d_stf(ob, uintBitsToFloat(f32_to_bf16(a_f(xb)) << 16));
		return;
	}
	float amax = 0.0, mx = 0.0;
	for (uint i = 0u; i < p.bs; i++) {
		float v = a_f(xb + i * p.x_nb0), av = abs(v);
		if (av > amax) {
			amax = av;
			mx = v;
		}
	}
	if (p.fmt == 3u || p.fmt == 5u) {
		float d = amax / 127.0, id = amax != 0.0 ? div_cr(127.0, amax) : 0.0;
		float dr = round_f16(d), sum = 0.0;
		for (uint i = 0u; i < p.bs; i++) {
			float q = roundEven(a_f(xb + i * p.x_nb0) * id);
			sum += q;
			d_stf(ob + i * 4u, dr * q);
		}
		if (p.fmt == 5u)
			d_stf(p.s_off + it * 4u, round_f16(d * sum));
		return;
	}
	if (amax == 0.0) {
		for (uint i = 0u; i < p.bs; i++)
			d_stf(ob + i * 4u, 0.0);
		return;
	}
	float iscale = div_cr(-127.0, mx), d = div_cr(1.0, iscale);
	for (uint i = 0u; i < p.bs; i++)
		d_stf(ob + i * 4u, d * min(roundEven(iscale * a_f(xb + i * p.x_nb0)), 127.0));
}
