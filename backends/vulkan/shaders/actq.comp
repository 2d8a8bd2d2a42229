#version 450
// actq.comp — rounds MUL_MAT activations the way the weight type's dot
// product pairs them (llama.cpp's vec_dot_type, which the CPU reference and
// the parity bounds assume): F16 or BF16 per element, Q8_0 blocks of 32
// (d = fp16(amax/127)), Q8_K blocks of 256 (d = 1/(-127/max)). Writes the
// rounded values as F32 into a contiguous scratch [K, rows] (Q8_1, fmt 5:
// Q8_0 values plus fp16(d * sum(q)) per block at s_off). A block's bs
// threads (bs = 1, 32 or 256) take one element each; the block's absolute
// maximum (the first element holding it, as a scan in order keeps) is a
// shared-memory reduction, so a 256-element Q8_K block is not one thread's
// serial walk (~23 us a decode matmul on the H200).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(push_constant) uniform PC {
	uint K, M, ne2, fmt; // fmt: 1 f16, 2 bf16, 3 q8_0, 4 q8_k
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, bs, n_items, s_off; // s_off: Q8_1 block sums after the values
} p;

shared float s_av[256];
shared uint s_ix[256];
shared float s_sum[256];
#include "actq.glsl"

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + tid;
	uint bs = p.bs, i = e % bs, it = e / bs;
	bool ok = it < p.n_items;
	uint nbk = p.K / bs;
	uint blk = it % nbk, row = it / nbk;
	uint m = row % p.M, i2 = (row / p.M) % p.ne2, i3 = row / (p.M * p.ne2);
	uint xb = p.x_off + m * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3 + blk * bs * p.x_nb0;
	uint ob = (row * p.K + blk * bs + i) * 4u;
	float v = ok ? a_f(xb + i * p.x_nb0) : 0.0;
	if (p.fmt == 1u) {
		if (ok)
			d_stf(ob, round_f16(v));
		return;
	}
	if (p.fmt == 2u) {
		if (ok)
			d_stf(ob, uintBitsToFloat(f32_to_bf16(v) << 16));
		return;
	}
	// only |v| > 0 ever becomes the maximum of a scan from amax = 0 (NaN never)
	float amax, mx;
	blk_amax(tid, i, bs, v, amax, mx);
	uint base = tid - i;
	if (p.fmt == 5u) {
		float d = amax / 127.0, id = amax != 0.0 ? div_cr(127.0, amax) : 0.0;
		float q = roundEven(v * id);
		if (ok)
			d_stf(ob, round_f16(d) * q);
		// integers below 2^24: the sum is exact in any order
		s_sum[tid] = q;
		barrier();
		for (uint s = bs >> 1; s > 0u; s >>= 1) {
			if (i < s)
				s_sum[tid] += s_sum[tid + s];
			barrier();
		}
		if (ok && i == 0u)
			d_stf(p.s_off + it * 4u, round_f16(d * s_sum[base]));
		return;
	}
	if (!ok)
		return;
	d_stf(ob, actq_q8(p.fmt, v, amax, mx));
}
