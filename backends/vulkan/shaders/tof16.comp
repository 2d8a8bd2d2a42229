#version 450
// tof16.comp — a prefill product's activations converted once to packed F16
// (contiguous [K, rows], K % 8 == 0) for the cooperative-matrix GEMM
// (mmc.comp), which otherwise converts every tile it reads once for each
// workgroup of weight rows: half the bytes, no conversions in its loop.
// The conversion is float16_t's, as mmc.comp's own.
#extension GL_GOOGLE_include_directive : require
#ifdef EMU_CM
#define PACK2H(a, b) packHalf2x16(vec2(a, b)) // no 16-bit types (cmemu.glsl)
#else
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define PACK2H(a, b) packFloat2x16(f16vec2(float16_t(a), float16_t(b)))
#endif
layout(local_size_x = 256) in;
#include "common.glsl"
layout(std430, set = 0, binding = 0) buffer BufD4 { uvec4 d4_[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufA4 { vec4 a4f_[]; };

layout(push_constant) uniform PC {
	uint K, M, ne2, n_chunks;
	uint x_off, x_nb0, x_nb1, x_nb2;
	uint x_nb3, xvec;
} p;

uint h2(vec2 v) { return PACK2H(v.x, v.y); }

void main()
{
	uint e = wg_flat() * 256u + gl_LocalInvocationID.x;
	if (e >= p.n_chunks)
		return;
	uint kc = p.K / 8u, row = e / kc, k = (e % kc) * 8u;
	uint m = row % p.M, i2 = (row / p.M) % p.ne2, i3 = row / (p.M * p.ne2);
	uint xb = p.x_off + m * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3 + k * p.x_nb0;
	vec4 v0, v1;
	if (p.xvec != 0u) {
		v0 = a4f_[xb >> 4];
		v1 = a4f_[(xb >> 4) + 1u];
	} else {
		[[unroll]] for (uint i = 0u; i < 4u; i++) {
			v0[i] = a_f(xb + i * p.x_nb0);
			v1[i] = a_f(xb + (4u + i) * p.x_nb0);
		}
	}
	d4_[e] = uvec4(h2(v0.xy), h2(v0.zw), h2(v1.xy), h2(v1.zw));
}
