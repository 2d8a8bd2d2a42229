/* quant.h — the ggml tensor type table and the scalar reference
 * (de)quantizers. These functions are the specification every backend is
 * tested against: plain C, no SIMD, no threads. Type ids are ggml's
 * (ggml/include/ggml.h), since they are what GGUF files store.
 *
 * This file (with core/quant.c) is also compiled into backend .so files, so it
 * depends on nothing else in the core. */
#ifndef ALICE_QUANT_H
#define ALICE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum alice_type {
	ALICE_TYPE_F32 = 0,
	ALICE_TYPE_F16 = 1,
	ALICE_TYPE_Q4_0 = 2,
	ALICE_TYPE_Q4_1 = 3,
	ALICE_TYPE_Q5_0 = 6,
	ALICE_TYPE_Q5_1 = 7,
	ALICE_TYPE_Q8_0 = 8,
	ALICE_TYPE_Q8_1 = 9,
	ALICE_TYPE_Q2_K = 10,
	ALICE_TYPE_Q3_K = 11,
	ALICE_TYPE_Q4_K = 12,
	ALICE_TYPE_Q5_K = 13,
	ALICE_TYPE_Q6_K = 14,
	ALICE_TYPE_Q8_K = 15,
	ALICE_TYPE_IQ4_NL = 20,
	ALICE_TYPE_IQ4_XS = 23,
	ALICE_TYPE_I8 = 24,
	ALICE_TYPE_I16 = 25,
	ALICE_TYPE_I32 = 26,
	ALICE_TYPE_I64 = 27,
	ALICE_TYPE_F64 = 28,
	ALICE_TYPE_BF16 = 30,
	ALICE_TYPE_MXFP4 = 39,
	ALICE_TYPE_Q1_0 = 41,
	ALICE_TYPE_COUNT = 43, /* ids below this may be named; see alice_type_info */
};

struct alice_type_info {
	const char *name;      /* "Q4_K", as ggml names it */
	uint32_t block_size;   /* elements per block (1 for plain types) */
	uint32_t type_size;    /* bytes per block */
	bool supported;        /* we can dequantize it */
	bool can_quantize;     /* we have a reference quantizer */
};

/* Info for a ggml type id, or NULL if the id is unknown to ggml. For ids that
 * ggml knows but we do not support, `supported` is false and `name` is set,
 * so errors can say "type IQ2_XXS (16) is not supported". */
const struct alice_type_info *alice_type_info(uint32_t type);
/* "Q4_K", or "unknown" for an unknown id. */
const char *alice_type_name(uint32_t type);
/* Look up a type by name (case-insensitive); -1 if none. */
int alice_type_from_name(const char *name);

/* Bytes of one row of n elements; 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t alice_row_size(uint32_t type, int64_t n);

/* Dequantize n elements (n a multiple of the block size) from src to f32. */
void alice_dequantize(uint32_t type, const void *src, float *dst, int64_t n);
/* Reference quantize n elements of f32 into dst (alice_row_size(type,n) bytes).
 * Returns false if the type has no quantizer. Deterministic. */
bool alice_quantize(uint32_t type, const float *src, void *dst, int64_t n);

/* Half / bfloat16 conversion (round to nearest even), as ggml does it. */
float alice_fp16_to_fp32(uint16_t h);
uint16_t alice_fp32_to_fp16(float f);
float alice_bf16_to_fp32(uint16_t h);
uint16_t alice_fp32_to_bf16(float f);

#endif
