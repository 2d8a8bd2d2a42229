/* gguf_write.h — build and write a GGUF v3 file (metadata + tensors).
 *
 * The writer collects metadata and tensor descriptions in memory; tensor data
 * is produced at write time by a caller callback, one tensor at a time, so a
 * multi-GB model never needs to be held in memory at once. Used by
 * alice-mkmodel and by tests that need hand-made files. */
#ifndef ALICE_GGUF_WRITE_H
#define ALICE_GGUF_WRITE_H

#include <stdint.h>
#include <stdbool.h>

#include "alice/gguf.h"
#include "alice/status.h"

struct alice_gguf_writer;

/* Fill `dst` (nbytes, the tensor's full data) for tensor `name`. */
typedef enum alice_status (*alice_gguf_fill_fn)(void *user, const char *name, void *dst,
						uint64_t nbytes, struct alice_error *err);

struct alice_gguf_writer *alice_gguf_writer_create(void); /* NULL on OOM */
void alice_gguf_writer_free(struct alice_gguf_writer *w);

/* Metadata setters. Keys and strings are copied. A key set twice keeps the last value. */
enum alice_status alice_gguf_writer_set_u32(struct alice_gguf_writer *w, const char *key, uint32_t v);
enum alice_status alice_gguf_writer_set_i32(struct alice_gguf_writer *w, const char *key, int32_t v);
enum alice_status alice_gguf_writer_set_u64(struct alice_gguf_writer *w, const char *key, uint64_t v);
enum alice_status alice_gguf_writer_set_f32(struct alice_gguf_writer *w, const char *key, float v);
enum alice_status alice_gguf_writer_set_bool(struct alice_gguf_writer *w, const char *key, bool v);
enum alice_status alice_gguf_writer_set_str(struct alice_gguf_writer *w, const char *key, const char *v);
/* Array of n numeric elements of `type` (not STRING/ARRAY), packed little-endian. */
enum alice_status alice_gguf_writer_set_arr(struct alice_gguf_writer *w, const char *key,
					    enum alice_gguf_type type, const void *data, uint64_t n);
enum alice_status alice_gguf_writer_set_arr_str(struct alice_gguf_writer *w, const char *key,
						const char *const *strs, uint64_t n);
/* Copy metadata entry i of an open file (any type, nested arrays included). */
enum alice_status alice_gguf_writer_copy_kv(struct alice_gguf_writer *w, const struct alice_gguf *src,
					    int64_t i);

/* Declare a tensor; its data comes from fill(user, name, ...) at write time. */
enum alice_status alice_gguf_writer_add_tensor(struct alice_gguf_writer *w, const char *name,
					       uint32_t type, uint32_t n_dims, const int64_t *ne,
					       alice_gguf_fill_fn fill, void *user);

/* Write the whole file (alignment 32). Errors name the path. */
enum alice_status alice_gguf_writer_write(struct alice_gguf_writer *w, const char *path,
					  struct alice_error *err);
/* The same bytes into memory: *data (malloc'd; the caller frees) of *size
 * bytes, e.g. for alice_gguf_open_memory. */
enum alice_status alice_gguf_writer_write_memory(struct alice_gguf_writer *w, void **data, size_t *size,
						 struct alice_error *err);

#endif
