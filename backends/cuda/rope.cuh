/* rope.cuh — the rotation arithmetic shared by k_rope (rope.cu) and the
 * decode mat-vec that rotates its own q / k rows (mmvq.cu): one function,
 * so both give the same bits. */
#pragma once
#include "common.cuh"

/* cos / sin of pair i at position pv: theta = pv * scale * base^(-2i/n_dims)
 * / ff[i] */
__device__ static inline void rope_cs(const struct rope_params &p, int64_t i, float pv, const float *ff, int64_t fnb0,
				      float *c, float *s)
{
	float theta = pv * p.scale * powf(p.base, -2.f * (float)i / (float)p.n_dims);
	if (ff)
		theta /= *(const float *)((const uint8_t *)ff + i * fnb0);
	sincosf(theta, s, c);
}

/* the rotated pair (x0, x1), k_rope's expression as it always was (its
 * products may be contracted into fmas, which the compiler decides per
 * call site: core_test_fusion and core_test_decode_fuse_cuda check that
 * both kernels give the same bits; on sm_90 (H100) core_test_fusion did) */
__device__ static inline void rope_rot(float x0, float x1, float c, float s, float *y0, float *y1)
{
	*y0 = x0 * c - x1 * s;
	*y1 = x0 * s + x1 * c;
}

/* the cache cell of the step's one token; a bad id is reported (once per
 * launch when report) and nothing is written */
__device__ static inline bool rope_mv_cell(const struct mmv_rope &r, bool report, int64_t *cell)
{
	int32_t c = *r.ids;
	if (c < 0 || c >= r.n_cells) {
		if (report)
			atomicOr(r.flag, CU_FLAG_CELL);
		return false;
	}
	*cell = c;
	return true;
}

/* Member m's row `row` of the one-token Q/K/V product is v; `partner` is
 * its NORMAL pair's other row (row ^ 1). q / k rows go rotated (as k_rope
 * rotates them) to qd / kd, k's also to the K cache, v to the V cache. */
__device__ static inline void rope_mv_out(const struct mmv_rope &r, int m, int64_t row, float v, float partner)
{
	int64_t cell;
	if (m == 2) {
		int64_t e = row % r.hdv, h = row / r.hdv;
		if (rope_mv_cell(r, row == 0, &cell))
			st_float(r.vc + e * r.vcnb0 + h * r.vcnb1 + cell * r.vcnb2, r.vt, v);
		return;
	}
	int64_t e = row % r.hd, h = row / r.hd;
	float y = v;
	if (e < r.p.n_dims) {
		const bool odd = e & 1;
		float c, s, y0, y1;
		rope_cs(r.p, e >> 1, (float)*r.pos, r.ff, r.fnb0, &c, &s);
		rope_rot(odd ? partner : v, odd ? v : partner, c, s, &y0, &y1);
		y = odd ? y1 : y0;
	}
	if (m == 0) {
		*(float *)(r.qd + e * r.qnb0 + h * r.qnb1) = y;
	} else {
		*(float *)(r.kd + e * r.knb0 + h * r.knb1) = y;
		if (rope_mv_cell(r, row == 0, &cell))
			st_float(r.kc + e * r.kcnb0 + h * r.kcnb1 + cell * r.kcnb2, r.kt, y);
	}
}
