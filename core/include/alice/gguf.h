/* gguf.h — mmap'd, validating reader for GGUF v2/v3 files.
 *
 * alice_gguf_open() maps the file read-only, parses and checks the header,
 * every metadata value and every tensor info, and returns a handle. Nothing
 * returned by the getters is copied: strings and tensor data point into the
 * mapping and live until alice_gguf_close(). Strings from the file are NOT
 * NUL-terminated (use .len); key and tensor names returned by name getters are
 * NUL-terminated copies owned by the handle.
 *
 * Hostile files are expected: every count, length, offset and dimension is
 * checked against the file size and for overflow; a bad file gives
 * ALICE_ERR_INVALID with a message naming the file and the problem. */
#ifndef ALICE_GGUF_H
#define ALICE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/status.h"

enum alice_gguf_type {
	ALICE_GGUF_UINT8 = 0,
	ALICE_GGUF_INT8 = 1,
	ALICE_GGUF_UINT16 = 2,
	ALICE_GGUF_INT16 = 3,
	ALICE_GGUF_UINT32 = 4,
	ALICE_GGUF_INT32 = 5,
	ALICE_GGUF_FLOAT32 = 6,
	ALICE_GGUF_BOOL = 7,
	ALICE_GGUF_STRING = 8,
	ALICE_GGUF_ARRAY = 9,
	ALICE_GGUF_UINT64 = 10,
	ALICE_GGUF_INT64 = 11,
	ALICE_GGUF_FLOAT64 = 12,
	ALICE_GGUF_TYPE_COUNT
};

#define ALICE_GGUF_MAX_DIMS 4
#define ALICE_GGUF_DEFAULT_ALIGNMENT 32

struct alice_gguf; /* opaque */

/* A string inside the mapping (not NUL-terminated). */
struct alice_gguf_str {
	const char *ptr;
	uint64_t len;
};

/* An array value. For numeric/bool elements `data` points at n packed
 * little-endian elements inside the mapping (possibly unaligned: read with
 * memcpy or the alice_gguf_arr_* helpers). For STRING and ARRAY elements use
 * alice_gguf_arr_str / alice_gguf_arr_arr. */
struct alice_gguf_arr {
	enum alice_gguf_type type; /* element type */
	uint64_t n;
	const void *data;
	const void *priv_; /* reader-internal element index; do not touch */
};

struct alice_gguf_tensor_info {
	const char *name;      /* NUL-terminated, owned by the handle */
	uint32_t type;         /* ggml type id (see quant.h) */
	uint32_t n_dims;       /* 1..4 */
	int64_t ne[ALICE_GGUF_MAX_DIMS]; /* elements per dim, ne[0] innermost; unused dims = 1 */
	uint64_t offset;       /* relative to the data section */
	uint64_t nbytes;       /* bytes of data */
	const void *data;      /* inside the mapping */
};

/* Open and validate. On failure *out is NULL and err names file and problem. */
enum alice_status alice_gguf_open(const char *path, struct alice_gguf **out,
				  struct alice_error *err);
/* Parse a buffer already in memory (borrowed: must outlive the handle).
 * `name` is used in error messages. Used by the fuzzer and tests. */
enum alice_status alice_gguf_open_memory(const void *data, size_t size, const char *name,
					 struct alice_gguf **out, struct alice_error *err);
void alice_gguf_close(struct alice_gguf *g); /* NULL is a no-op */
/* Tensor data [p, p + n) of a mapped file is not needed resident (a copy
 * is what runs): its whole pages are dropped; they stay readable. */
void alice_gguf_release(struct alice_gguf *g, const void *p, uint64_t n);

const char *alice_gguf_path(const struct alice_gguf *g);
uint32_t alice_gguf_version(const struct alice_gguf *g);
uint32_t alice_gguf_alignment(const struct alice_gguf *g);
uint64_t alice_gguf_data_offset(const struct alice_gguf *g);  /* file offset of tensor data */
const void *alice_gguf_base(const struct alice_gguf *g);      /* start of the mapping */
uint64_t alice_gguf_size(const struct alice_gguf *g);         /* bytes mapped */

/* Metadata, by index (0..n_kv-1) or by key. */
int64_t alice_gguf_n_kv(const struct alice_gguf *g);
int64_t alice_gguf_find_key(const struct alice_gguf *g, const char *key); /* -1 if missing */
const char *alice_gguf_key(const struct alice_gguf *g, int64_t i);
enum alice_gguf_type alice_gguf_kv_type(const struct alice_gguf *g, int64_t i);
const char *alice_gguf_type_name(enum alice_gguf_type t);

/* Typed getters: ALICE_OK, ALICE_ERR_NOT_FOUND (no such key) or ALICE_ERR_TYPE
 * (key has another type; err says which). err may be NULL. */
enum alice_status alice_gguf_get_u8(const struct alice_gguf *g, const char *key, uint8_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_i8(const struct alice_gguf *g, const char *key, int8_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_u16(const struct alice_gguf *g, const char *key, uint16_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_i16(const struct alice_gguf *g, const char *key, int16_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_u32(const struct alice_gguf *g, const char *key, uint32_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_i32(const struct alice_gguf *g, const char *key, int32_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_u64(const struct alice_gguf *g, const char *key, uint64_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_i64(const struct alice_gguf *g, const char *key, int64_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_f32(const struct alice_gguf *g, const char *key, float *out, struct alice_error *err);
enum alice_status alice_gguf_get_f64(const struct alice_gguf *g, const char *key, double *out, struct alice_error *err);
enum alice_status alice_gguf_get_bool(const struct alice_gguf *g, const char *key, bool *out, struct alice_error *err);
enum alice_status alice_gguf_get_str(const struct alice_gguf *g, const char *key, struct alice_gguf_str *out, struct alice_error *err);
enum alice_status alice_gguf_get_arr(const struct alice_gguf *g, const char *key, struct alice_gguf_arr *out, struct alice_error *err);
/* Lenient getters for model hyper-parameters: any integer type that fits /
 * f32 or f64. Same status codes; ALICE_ERR_RANGE if the value does not fit. */
enum alice_status alice_gguf_get_int(const struct alice_gguf *g, const char *key, int64_t *out, struct alice_error *err);
enum alice_status alice_gguf_get_float(const struct alice_gguf *g, const char *key, double *out, struct alice_error *err);

/* Array element access (i < arr->n; out-of-range or wrong element type
 * returns ALICE_ERR_RANGE / ALICE_ERR_TYPE). */
enum alice_status alice_gguf_arr_str(const struct alice_gguf_arr *arr, uint64_t i, struct alice_gguf_str *out);
enum alice_status alice_gguf_arr_arr(const struct alice_gguf_arr *arr, uint64_t i, struct alice_gguf_arr *out);
enum alice_status alice_gguf_arr_int(const struct alice_gguf_arr *arr, uint64_t i, int64_t *out);   /* any int/bool type */
enum alice_status alice_gguf_arr_float(const struct alice_gguf_arr *arr, uint64_t i, double *out); /* f32/f64/int */

/* Tensors. */
int64_t alice_gguf_n_tensors(const struct alice_gguf *g);
int64_t alice_gguf_find_tensor(const struct alice_gguf *g, const char *name); /* -1 if missing */
const struct alice_gguf_tensor_info *alice_gguf_tensor(const struct alice_gguf *g, int64_t i);

#endif
