/* mm_order.h — the summation orders of llama.cpp's CPU dot products for
 * float weights (F32, F16, BF16), so that MUL_MAT reproduces its results bit
 * for bit (the parity references, tests/core/test_parity.c, were made with
 * its x86 AVX-512 build). Integer (quantized) dots are order-free inside a
 * block; these float ones are not, and a 1-ulp difference flips F16 KV-cache
 * roundings that later positions amplify.
 *
 * llama.cpp picks the kernel by the op's row count n (one sequence per op):
 *  - n >= 2 and K % 16 == 0 (BF16: K % 32) and N % 4 == 0: its tinyBLAS gemm:
 *    one 16-lane accumulator per output over K (fma for F32/F16 widened to
 *    F32; for BF16 vdpbf16ps: lane j adds product 2j+1, then product 2j, of
 *    each 32-element step), then the AVX-512 horizontal-sum tree;
 *  - otherwise its vec_dot: F32/F16 four 16-lane fma accumulators over
 *    64-element blocks, folded 0+2, 1+3, 0+1, the same tree, then the K % 64
 *    tail added one product at a time (F32: in float, no fma; F16: in
 *    double); BF16 two vdpbf16ps accumulators (elements 0..31 and 32..63 of
 *    each block), each tree-summed and added in double, tail in double.
 * The caller decides n per sequence (ALICE_OP_MUL_MAT src2 in
 * backend.h), so a row's result never depends on other sequences' rows. */
#ifndef ALICE_CPU_MM_ORDER_H
#define ALICE_CPU_MM_ORDER_H

#include <stdbool.h>
#include <stdint.h>

enum mm_order {
	MM_ORD_GEMM16 = 0, /* F32 and F16 gemm */
	MM_ORD_VEC_F32,
	MM_ORD_VEC_F16,
	MM_ORD_GEMM_BF16,
	MM_ORD_VEC_BF16,
};

/* The order of a row of an F32/F16/BF16 weight (K inputs, N weight rows);
 * multi: the row is one of >= 2 rows of its sequence in this op. */
enum mm_order cpu_mm_order(uint32_t type, bool multi, int64_t K, int64_t N) __attribute__((visibility("hidden")));

/* Dot of a weight row and an activation row, both as floats: weights
 * widened from F16/BF16 exactly, activations already rounded to the weight's
 * format (F16/BF16) as llama.cpp does. */
float cpu_mm_order_dot(enum mm_order o, int64_t K, const float *w, const float *x)
	__attribute__((visibility("hidden")));

/* The same on the raw weight row of type t (F32, F16 or BF16 values,
 * widened on the fly), and for 4 activation rows `xstride` floats apart at
 * once (4 independent chains, each output's order unchanged). */
float cpu_mm_order_dot_raw(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x)
	__attribute__((visibility("hidden")));
void cpu_mm_order_dot_raw4(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x, int64_t xstride,
			   float *out) __attribute__((visibility("hidden")));

/* 4 weight rows `ws` bytes apart x 4 activation rows `xstride` floats apart
 * (a gemm order): row a, column b at out + a * os_n + b * os_m bytes. */
void cpu_mm_order_dot_raw4x4(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
			     int64_t xstride, float *out, size_t os_n, size_t os_m) __attribute__((visibility("hidden")));

/* n weight rows `ws` bytes apart, one activation row: the result of row r
 * (cpu_mm_order_dot_raw's, bit for bit) at out + r * os bytes. */
void cpu_mm_order_dot_rows(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
			   int64_t n, float *out, size_t os) __attribute__((visibility("hidden")));

/* F16 weights on AVX-512 or AVX2+FMA: tiles in the gemm order for
 * K % 16 == 0 (cpu_mm_order_gemm_f16 on AVX-512, cpu_mm_order_wtile on
 * AVX2). */
bool cpu_mm_order_f16_tiles(int64_t K) __attribute__((visibility("hidden")));
/* AVX-512: 4 weight rows x nx (1..6) float activation rows `xs` floats
 * apart; as the BF16 call below. */
void cpu_mm_order_gemm_f16(int64_t K, const void *w, size_t ws, const float *x, int64_t xs, int nx, float *out,
			   size_t os_n, size_t os_m) __attribute__((visibility("hidden")));
/* BF16 weights in the gemm order from activation rows packed once per op
 * (K % 32 == 0): as BF16 for the CPU's vdpbf16ps (cpu_mm_order_gemm_bf16p),
 * or, at the AVX2 level (cpu_mm_order_wtile), as floats with each 16
 * values' odd elements before their even ones (the order each vdpbf16ps
 * lane adds them). Bytes of one packed row; 0: no tiles on this CPU. */
size_t cpu_mm_order_bf16_packed(int64_t K) __attribute__((visibility("hidden")));
/* Pack one activation row (floats already rounded to BF16) into xp. */
void cpu_mm_order_bf16_pack(int64_t K, const float *x, void *xp) __attribute__((visibility("hidden")));
/* 4 weight rows `ws` bytes apart x nx (1..6) BF16-packed activation rows
 * `xps` bytes apart, the gemm order (cpu_mm_order_dot_raw4x4's, bit for
 * bit): row a, column b at out + a * os_n + b * os_m bytes. */
void cpu_mm_order_gemm_bf16p(int64_t K, const void *w, size_t ws, const void *xp, size_t xps, int nx, float *out,
			     size_t os_n, size_t os_m) __attribute__((visibility("hidden")));
/* The AVX2 level's tiles read weight rows widened to floats (F16: the
 * values; BF16: split as the packed activations), 4 rows interleaved in
 * 8-value chunks (chunk c of row a at 32 c + 8 a: one pointer for the
 * tile's weight loads): a widened row's bytes, 0 where the tiles read the
 * raw rows (AVX-512) or there are none. K % 16 == 0 (BF16: 32). */
size_t cpu_mm_order_widened_row(uint32_t t, int64_t K) __attribute__((visibility("hidden")));
/* Elements [k0, k1) (multiples of 32, or k1 = K) of 4 rows widened into
 * dst, element k0 first. */
void cpu_mm_order_widen4(uint32_t t, int64_t k0, int64_t k1, const void *w, size_t ws, float *dst)
	__attribute__((visibility("hidden")));
/* 4 widened rows' elements [k0, k1) (cpu_mm_order_widen4 of that range)
 * x nx (1..3) activation rows `xs` floats apart (F16: the float rows;
 * BF16: packed), the gemm order (k0 a multiple of 32): the outputs' lanes start
 * from zero at k0 = 0, else from acc[4][nx][16], and go to acc, or, at
 * k1 = K, tree-summed to row a, column b at out + a * os_n + b * os_m
 * bytes. Each lane's chain runs on in order across the chunks. */
void cpu_mm_order_wtile(uint32_t t, int nx, int64_t k0, int64_t k1, int64_t K, const float *w, const float *x,
			int64_t xs, float *acc, uint8_t *out, size_t os_n, size_t os_m)
	__attribute__((visibility("hidden")));

#endif
