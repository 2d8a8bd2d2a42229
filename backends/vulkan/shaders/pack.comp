#version 450
// pack.comp — a weight rewritten in place into the layout vk_pack.c
// describes, one workgroup per run of 8 blocks: the run is read whole into
// shared memory, then each output byte gathered from its source byte.
// PK 1: Q8_0 (272-byte runs), PK 2: Q6_K (1680-byte runs).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "common.glsl"

layout(push_constant) uniform PC {
	uint off, n_runs;
} p;

#if PK == 1
#define RUN 272u
// block j's 32 quants at 32 j, its scale at 256 + 2 j (blocks: d, then 32 quants)
uint src_of(uint o) { return o < 256u ? 34u * (o / 32u) + 2u + o % 32u : 34u * ((o - 256u) / 2u) + (o - 256u) % 2u; }
#else
#define RUN 1680u
// super-block j's 192 quant bytes at 192 j, its 16 scales at 1536 + 16 j, its d at 1664 + 2 j
uint src_of(uint o)
{
	if (o < 1536u)
		return 210u * (o / 192u) + o % 192u;
	if (o < 1664u)
		return 210u * ((o - 1536u) / 16u) + 192u + (o - 1536u) % 16u;
	return 210u * ((o - 1664u) / 2u) + 208u + (o - 1664u) % 2u;
}
#endif

shared uint sm[RUN / 4u];

void main()
{
	uint r = wg_flat(), tid = gl_LocalInvocationID.x;
	if (r >= p.n_runs)
		return; // the whole workgroup
	uint w0 = (p.off + r * RUN) >> 2;
	for (uint i = tid; i < RUN / 4u; i += 128u)
		sm[i] = d_[w0 + i];
	barrier();
	for (uint w = tid; w < RUN / 4u; w += 128u) {
		uint v = 0u;
		for (uint k = 0u; k < 4u; k++) {
			uint s = src_of(4u * w + k);
			v |= ((sm[s >> 2] >> ((s & 3u) * 8u)) & 0xffu) << (8u * k);
		}
		d_[w0 + w] = v;
	}
}
