#version 450
// tof16.comp — a product's activations (F32, any strides) as packed F16
// rows [K, rows], once per input, for the cooperative-matrix GEMM (mmc.comp
// read and converted them once per weight tile: N / 64 times). Eight
// elements a thread, one 16-byte store; K % 8 == 0 (the host checks).
// Rounded to nearest even, as mmc.comp's conversion on the GPU rounds.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
layout(std430, set = 0, binding = 0) writeonly buffer BufD4 { uvec4 d4_[]; };

layout(push_constant) uniform PC {
	uint K, M, ne2, n; // n: groups of 8
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, pad0, pad1, pad2;
} p;

void main()
{
	uint e = wg_flat() * 256u + gl_LocalInvocationID.x;
	if (e >= p.n)
		return;
	uint kg = p.K / 8u, k = (e % kg) * 8u, row = e / kg;
	uint m = row % p.M, i2 = (row / p.M) % p.ne2, i3 = row / (p.M * p.ne2);
	uint xb = p.x_off + m * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3 + k * p.x_nb0;
	uint h[8];
	[[unroll]] for (uint i = 0u; i < 8u; i++)
		h[i] = f32_to_f16(a_f(xb + i * p.x_nb0));
	d4_[e] = uvec4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}
