// cmemu.glsl — mmc.comp's cooperative-matrix operations on its shared tiles
// (sm, uvec4): VK_NV_cooperative_matrix's 16 x 16 fragments of a subgroup
// of 32, or (EMU_CM) the same operations emulated by each group of 32
// invocations, so the GEMM's tiling, loads and decode run where the device
// has no cooperative matrices (lavapipe in CI: ALICE_VK_COOPMAT=emu). The
// emulation uses no 16-bit types; its sums take another order (a test of
// the data path against the op test's bounds, not of the GPU's bits).
#ifdef EMU_CM
// an A/B operand: where it lies in sm (uvec4 units) and how
struct CmOp {
	uint off, stride;
	bool cm;
};
// an accumulator: invocation l of the group holds elements 8 l .. 8 l + 7
// of the row-major 16 x 16
struct CmAcc {
	float v[8];
};
#define CM_OP CmOp
#define CM_ACC CmAcc
float cm_half(uint h) { uint w = sm[h >> 3][(h >> 1) & 3u]; return (h & 1u) != 0u ? unpackHalf2x16(w).y : unpackHalf2x16(w).x; }
// element (r, c) of an operand (colMajor: column c's elements contiguous)
float cm_at(CmOp o, uint r, uint c) { return cm_half(o.off * 8u + (o.cm ? c * o.stride * 8u + r : r * o.stride * 8u + c)); }
void cm_zero(out CmAcc a)
{
	[[unroll]] for (uint q = 0u; q < 8u; q++)
		a.v[q] = 0.0;
}
#define CM_LOAD(m, off_, stride_, cm_) m = CmOp(off_, stride_, cm_)
CmAcc cm_mad(CmOp a, CmOp b, CmAcc c)
{
	uint lane = gl_LocalInvocationID.x & 31u;
	for (uint q = 0u; q < 8u; q++) {
		uint e = lane * 8u + q, r = e >> 4, col = e & 15u;
		float s = 0.0;
		for (uint k = 0u; k < 16u; k++)
			s += cm_at(a, r, k) * cm_at(b, k, col);
		c.v[q] += s;
	}
	return c;
}
// an F32 accumulator stored row-major at float offset 4 off, row stride 4 stride
void cm_store(CmAcc a, uint off, uint stride)
{
	uint lane = gl_LocalInvocationID.x & 31u;
	[[unroll]] for (uint q = 0u; q < 8u; q++) {
		uint e = lane * 8u + q, f = off * 4u + (e >> 4) * stride * 4u + (e & 15u);
		sm[f >> 2][f & 3u] = floatBitsToUint(a.v[q]);
	}
}
// the group's invocations are not one subgroup: the workgroup's barrier
// (every call is in uniform control flow)
#define CM_SYNC() barrier()
#else
#define CM_OP fcoopmatNV<16, SCOPE, 16, 16>
#define CM_ACC fcoopmatNV<32, SCOPE, 16, 16>
#define cm_zero(a) a = fcoopmatNV<32, SCOPE, 16, 16>(0.0)
#define CM_LOAD(m, off_, stride_, cm_) coopMatLoadNV(m, sm, off_, stride_, cm_)
#define cm_mad(a, b, c) coopMatMulAddNV(a, b, c)
#define cm_store(a, off_, stride_) coopMatStoreNV(a, sm, off_, stride_, false)
#define CM_SYNC() subgroupBarrier()
#endif
