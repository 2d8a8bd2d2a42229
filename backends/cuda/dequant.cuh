/* dequant.cuh — device dequantizers: group g (32 consecutive elements) of a
 * weight row, for every type the backend supports. They mirror the scalar
 * reference in core/quant.c (same block layouts, same order of the f32
 * scale products; nvcc may fuse a multiply-add, so results can differ from
 * alice_dequantize by an ulp). Block fields are read with byte / 16-bit loads:
 * blocks of 17, 18, 34, 110 or 210 bytes are not word aligned (T_Q8_0P, the
 * packed Q8_0 of pack.cu, is: 16-byte loads). */
#ifndef ALICE_CUDA_DEQUANT_CUH
#define ALICE_CUDA_DEQUANT_CUH

#include "common.cuh"
#include "kquant.cuh"

__device__ static inline float dq_h(const uint8_t *p)
{
	/* fp16 fields sit at even offsets in every block layout except MXFP4
	 * (which has none) */
	return __half2float(*(const __half *)p);
}

__device__ static inline uint32_t dq_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

__constant__ static const int8_t c_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
						 1, 13, 25, 38, 53, 69, 89, 113 };
__constant__ static const int8_t c_mxfp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

__device__ static inline void k4_sm(int j, const uint8_t *q, int &sc, int &m)
{
	if (j < 4) {
		sc = q[j] & 63;
		m = q[j + 4] & 63;
	} else {
		sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Dequantize elements [32g, 32g+32) of a row of type T into y. */
template <int T>
__device__ static inline void dq32(const uint8_t *row, int64_t g, float *y)
{
	if constexpr (T == ALICE_TYPE_F32) {
		const float *r = (const float *)row + g * 32;
		if (((uintptr_t)r & 15) == 0) {
#pragma unroll
			for (int i = 0; i < 8; i++) {
				float4 f = ((const float4 *)r)[i];
				y[4 * i] = f.x;
				y[4 * i + 1] = f.y;
				y[4 * i + 2] = f.z;
				y[4 * i + 3] = f.w;
			}
		} else {
#pragma unroll
			for (int j = 0; j < 32; j++)
				y[j] = r[j];
		}
	} else if constexpr (T == ALICE_TYPE_F16) {
		const __half *r = (const __half *)row + g * 32;
		if (((uintptr_t)r & 15) == 0) {
#pragma unroll
			for (int i = 0; i < 4; i++) {
				uint4 u = ((const uint4 *)r)[i];
				const __half2 *h = (const __half2 *)&u;
#pragma unroll
				for (int k = 0; k < 4; k++) {
					float2 f = __half22float2(h[k]);
					y[8 * i + 2 * k] = f.x;
					y[8 * i + 2 * k + 1] = f.y;
				}
			}
		} else {
#pragma unroll
			for (int j = 0; j < 32; j++)
				y[j] = __half2float(r[j]);
		}
	} else if constexpr (T == ALICE_TYPE_BF16) {
		const __nv_bfloat16 *r = (const __nv_bfloat16 *)row + g * 32;
		if (((uintptr_t)r & 15) == 0) {
#pragma unroll
			for (int i = 0; i < 4; i++) {
				uint4 u = ((const uint4 *)r)[i];
				const uint32_t *w = (const uint32_t *)&u;
#pragma unroll
				for (int k = 0; k < 4; k++) {
					y[8 * i + 2 * k] = __uint_as_float(w[k] << 16);
					y[8 * i + 2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
				}
			}
		} else {
#pragma unroll
			for (int j = 0; j < 32; j++)
				y[j] = __bfloat162float(r[j]);
		}
	} else if constexpr (T == ALICE_TYPE_Q4_0) {
		const uint8_t *b = row + g * 18;
		float d = dq_h(b);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			y[j] = (float)((b[2 + j] & 0xf) - 8) * d;
			y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
		}
	} else if constexpr (T == ALICE_TYPE_Q4_1) {
		const uint8_t *b = row + g * 20;
		float d = dq_h(b), m = dq_h(b + 2);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			y[j] = (float)(b[4 + j] & 0xf) * d + m;
			y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
		}
	} else if constexpr (T == ALICE_TYPE_Q5_0) {
		const uint8_t *b = row + g * 22;
		float d = dq_h(b);
		uint32_t qh = dq_u32(b + 2);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			int lo = (b[6 + j] & 0xf) | (int)(((qh >> j) & 1) << 4);
			int hi = (b[6 + j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
			y[j] = (float)(lo - 16) * d;
			y[j + 16] = (float)(hi - 16) * d;
		}
	} else if constexpr (T == ALICE_TYPE_Q5_1) {
		const uint8_t *b = row + g * 24;
		float d = dq_h(b), m = dq_h(b + 2);
		uint32_t qh = dq_u32(b + 4);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			int lo = (b[8 + j] & 0xf) | (int)(((qh >> j) & 1) << 4);
			int hi = (b[8 + j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
			y[j] = (float)lo * d + m;
			y[j + 16] = (float)hi * d + m;
		}
	} else if constexpr (T == ALICE_TYPE_Q8_0) {
		const uint8_t *b = row + g * 34;
		float d = dq_h(b);
		const uint16_t *q = (const uint16_t *)(b + 2);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			uint16_t u = q[j];
			y[2 * j] = (float)(int8_t)(u & 0xff) * d;
			y[2 * j + 1] = (float)(int8_t)(u >> 8) * d;
		}
	} else if constexpr (T == T_Q8_0P) {
		const uint8_t *grp = row + (g >> 3) * PL_Q80_RUN;
		float d = dq_h(grp + pl_q80_d((int)(g & 7)));
		const uint4 *q = (const uint4 *)(grp + pl_q80_q((int)(g & 7)));
#pragma unroll
		for (int j = 0; j < 2; j++) {
			const uint4 u = q[j];
			const uint32_t w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
			for (int k = 0; k < 16; k++)
				y[16 * j + k] = (float)(int8_t)((w[k >> 2] >> (8 * (k & 3))) & 0xff) * d;
		}
	} else if constexpr (T == ALICE_TYPE_IQ4_NL) {
		const uint8_t *b = row + g * 18;
		float d = dq_h(b);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			y[j] = d * (float)c_iq4nl[b[2 + j] & 0xf];
			y[j + 16] = d * (float)c_iq4nl[b[2 + j] >> 4];
		}
	} else if constexpr (T == ALICE_TYPE_MXFP4) {
		const uint8_t *b = row + g * 17;
		uint8_t e = b[0];
		float d = __uint_as_float(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			y[j] = (float)c_mxfp4[b[1 + j] & 0xf] * d;
			y[j + 16] = (float)c_mxfp4[b[1 + j] >> 4] * d;
		}
	} else if constexpr (T == ALICE_TYPE_Q1_0) {
		const uint8_t *b = row + (g >> 2) * 18;
		float d = dq_h(b);
		const uint8_t *s = b + 2 + (g & 3) * 4;
#pragma unroll
		for (int j = 0; j < 32; j++)
			y[j] = ((s[j >> 3] >> (j & 7)) & 1) ? d : -d;
	} else if constexpr (T == ALICE_TYPE_Q2_K) {
		const uint8_t *b = row + (g >> 3) * 84;
		int j = (int)(g & 7);
		float d = dq_h(b + 80), dmin = dq_h(b + 82);
		const uint8_t *qs = b + 16 + (j >> 2) * 32;
		int sh = 2 * (j & 3);
#pragma unroll
		for (int h = 0; h < 2; h++) {
			uint8_t s = b[2 * j + h];
			float dl = d * (float)(s & 0xf), ml = dmin * (float)(s >> 4);
#pragma unroll
			for (int l = 0; l < 16; l++)
				y[h * 16 + l] = dl * (float)((qs[h * 16 + l] >> sh) & 3) - ml;
		}
	} else if constexpr (T == ALICE_TYPE_Q3_K) {
		const uint8_t *b = row + (g >> 3) * 110;
		int j = (int)(g & 7);
		const uint8_t *hm = b, *qs = b + 32 + (j >> 2) * 32, *s12 = b + 96;
		float d = dq_h(b + 108);
		int sh = 2 * (j & 3);
#pragma unroll
		for (int h = 0; h < 2; h++) {
			int sj = 2 * j + h;
			int lo = sj < 8 ? s12[sj] & 0xf : s12[sj - 8] >> 4;
			int hi = (s12[8 + sj % 4] >> (2 * (sj / 4))) & 3;
			float dl = d * (float)((lo | (hi << 4)) - 32);
#pragma unroll
			for (int l = 0; l < 16; l++) {
				int q = (qs[h * 16 + l] >> sh) & 3;
				if (!((hm[h * 16 + l] >> j) & 1))
					q -= 4;
				y[h * 16 + l] = dl * (float)q;
			}
		}
	} else if constexpr (T == ALICE_TYPE_Q4_K) {
		const uint8_t *b = row + (g >> 3) * 144;
		int j = (int)(g & 7), sc, m;
		float d = dq_h(b), dmin = dq_h(b + 2);
		k4_sm(j, b + 4, sc, m);
		float d1 = d * (float)sc, m1 = dmin * (float)m;
		const uint8_t *q = b + 16 + (j >> 1) * 32;
		int sh = (j & 1) * 4;
#pragma unroll
		for (int l = 0; l < 32; l++)
			y[l] = d1 * (float)((q[l] >> sh) & 0xf) - m1;
	} else if constexpr (T == ALICE_TYPE_Q5_K) {
		const uint8_t *b = row + (g >> 3) * 176;
		int j = (int)(g & 7), sc, m;
		float d = dq_h(b), dmin = dq_h(b + 2);
		k4_sm(j, b + 4, sc, m);
		float d1 = d * (float)sc, m1 = dmin * (float)m;
		const uint8_t *qh = b + 16, *q = b + 48 + (j >> 1) * 32;
		int sh = (j & 1) * 4;
#pragma unroll
		for (int l = 0; l < 32; l++) {
			int v = ((q[l] >> sh) & 0xf) | (((qh[l] >> j) & 1) << 4);
			y[l] = d1 * (float)v - m1;
		}
	} else if constexpr (T == ALICE_TYPE_Q6_K || T == T_Q6_KP) {
		const q6blk blk = q6_at<T == T_Q6_KP>(row, g >> 3);
		int j = (int)(g & 7), n = j >> 2, gg = j & 3;
		const uint8_t *ql = blk.q + n * 64 + (gg & 1) * 32, *qh = blk.q + 128 + n * 32;
		const int8_t *sc = (const int8_t *)blk.sc;
		float d = dq_h(blk.d);
		int shl = (gg >> 1) * 4, shh = 2 * gg;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float dl = d * (float)sc[2 * j + h];
#pragma unroll
			for (int l = 0; l < 16; l++) {
				int lo = (ql[h * 16 + l] >> shl) & 0xf;
				int hi = (qh[h * 16 + l] >> shh) & 3;
				y[h * 16 + l] = dl * (float)((lo | (hi << 4)) - 32);
			}
		}
	} else if constexpr (T == ALICE_TYPE_IQ4_XS) {
		const uint8_t *b = row + (g >> 3) * 136;
		int ib = (int)(g & 7);
		float d = dq_h(b);
		uint32_t sh = (uint32_t)b[2] | ((uint32_t)b[3] << 8);
		int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (int)(((sh >> (2 * ib)) & 3) << 4);
		float dl = d * (float)(ls - 32);
		const uint8_t *qs = b + 8 + ib * 16;
#pragma unroll
		for (int j = 0; j < 16; j++) {
			y[j] = dl * (float)c_iq4nl[qs[j] & 0xf];
			y[j + 16] = dl * (float)c_iq4nl[qs[j] >> 4];
		}
	}
}

/* Calls F.template operator()<T>() for a runtime type; returns false for an
 * unsupported type. Keeps the per-type instantiation list in one place. */
template <typename F>
static inline bool dispatch_type(uint32_t type, F &&f)
{
	switch (type) {
	case ALICE_TYPE_F32: f.template operator()<ALICE_TYPE_F32>(); return true;
	case ALICE_TYPE_F16: f.template operator()<ALICE_TYPE_F16>(); return true;
	case ALICE_TYPE_BF16: f.template operator()<ALICE_TYPE_BF16>(); return true;
	case ALICE_TYPE_Q4_0: f.template operator()<ALICE_TYPE_Q4_0>(); return true;
	case ALICE_TYPE_Q4_1: f.template operator()<ALICE_TYPE_Q4_1>(); return true;
	case ALICE_TYPE_Q5_0: f.template operator()<ALICE_TYPE_Q5_0>(); return true;
	case ALICE_TYPE_Q5_1: f.template operator()<ALICE_TYPE_Q5_1>(); return true;
	case ALICE_TYPE_Q8_0: f.template operator()<ALICE_TYPE_Q8_0>(); return true;
	case T_Q8_0P: f.template operator()<T_Q8_0P>(); return true;
	case ALICE_TYPE_Q2_K: f.template operator()<ALICE_TYPE_Q2_K>(); return true;
	case ALICE_TYPE_Q3_K: f.template operator()<ALICE_TYPE_Q3_K>(); return true;
	case ALICE_TYPE_Q4_K: f.template operator()<ALICE_TYPE_Q4_K>(); return true;
	case ALICE_TYPE_Q5_K: f.template operator()<ALICE_TYPE_Q5_K>(); return true;
	case ALICE_TYPE_Q6_K: f.template operator()<ALICE_TYPE_Q6_K>(); return true;
	case T_Q6_KP: f.template operator()<T_Q6_KP>(); return true;
	case ALICE_TYPE_IQ4_NL: f.template operator()<ALICE_TYPE_IQ4_NL>(); return true;
	case ALICE_TYPE_IQ4_XS: f.template operator()<ALICE_TYPE_IQ4_XS>(); return true;
	case ALICE_TYPE_MXFP4: f.template operator()<ALICE_TYPE_MXFP4>(); return true;
	case ALICE_TYPE_Q1_0: f.template operator()<ALICE_TYPE_Q1_0>(); return true;
	default: return false;
	}
}

#endif
