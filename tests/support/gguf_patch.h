/* gguf_patch.h — write a copy of a GGUF file with one change: a metadata key
 * dropped or set, a tensor dropped, reshaped or retyped. For tests of the
 * loaders' errors on malformed files. Call from a Criterion test. */
#ifndef ALICE_TEST_GGUF_PATCH_H
#define ALICE_TEST_GGUF_PATCH_H

#include <stdint.h>

struct alice_gguf_patch {
	const char *drop_key;     /* metadata key left out */
	const char *set_str_key;  /* set to set_str_val (replacing any value) */
	const char *set_str_val;
	const char *set_u32_key;  /* set to set_u32_val (replacing any value) */
	uint32_t set_u32_val;
	const char *drop_tensor;  /* tensor left out */
	const char *shape_tensor; /* tensor given ne1 = new_ne1 (data zero-filled) */
	int64_t new_ne1;
	const char *type_tensor;  /* tensor stored as new_type (0: F16) instead (data zero-filled) */
	uint32_t new_type;
};

/* Writes src_path with p applied to out_path (tensor data copied where its
 * size is unchanged, else zeros); asserts on any failure. Returns out_path. */
const char *alice_test_write_patched_gguf(const char *src_path, const struct alice_gguf_patch *p,
					  const char *out_path);

#endif
