// gq.glsl — a producer's output rounded for the Q8_K product that reads it
// next (actq.comp's values), in the producer's own dispatch: each workgroup
// counts the elements it wrote into each 256-block (a counter per block and
// column, binding 8, zero between dispatches); the workgroup whose count
// completes a block reads the block back (binding 0, coherent: the other
// workgroups' writes), takes its maximum as blk_amax does, writes the
// rounded values (GQ_STORE) and zeroes the counter. No workgroup waits on
// another, so the result does not depend on which of them run together.
// The includer defines DST_COHERENT, GQ_STORE(word, value) and calls with
// all 128 invocations of its workgroup.
#define ACTQ_NO_BLK 1
#include "actq.glsl"
layout(std430, set = 0, binding = 8) buffer BufCnt { uint cnt_[]; };
shared float gq_v[256];
shared float gq_a[128];
shared uint gq_i[128];

// n elements of counter ci's block are written (by this invocation's
// workgroup, after a memoryBarrierBuffer and a barrier): true where this
// completes the block
bool gq_count(uint ci, uint n) { return atomicAdd(cnt_[ci], n) + n == 256u; }

// the completed block at word wb of d_, rounded to word wo of the output
void gq_round(uint tid, uint ci, uint wb, uint wo)
{
	memoryBarrierBuffer();
	float v0 = uintBitsToFloat(d_[wb + tid]), v1 = uintBitsToFloat(d_[wb + tid + 128u]);
	gq_v[tid] = v0;
	gq_v[tid + 128u] = v1;
	// the largest |v| and the first element holding it (NaN never)
	float a0 = abs(v0), a1 = abs(v1);
	a0 = a0 > 0.0 ? a0 : 0.0;
	a1 = a1 > 0.0 ? a1 : 0.0;
	gq_a[tid] = a1 > a0 ? a1 : a0;
	gq_i[tid] = a1 > a0 ? tid + 128u : tid;
	barrier();
	for (uint st = 64u; st > 0u; st >>= 1) {
		if (tid < st) {
			float o = gq_a[tid + st];
			if (o > gq_a[tid] || (o == gq_a[tid] && gq_i[tid + st] < gq_i[tid])) {
				gq_a[tid] = o;
				gq_i[tid] = gq_i[tid + st];
			}
		}
		barrier();
	}
	float amax = gq_a[0], mx = gq_v[gq_i[0]] < 0.0 ? -amax : amax;
	GQ_STORE(wo + tid, actq_q8(4u, v0, amax, mx));
	GQ_STORE(wo + tid + 128u, actq_q8(4u, v1, amax, mx));
	if (tid == 0u)
		cnt_[ci] = 0u;
	barrier();
}
