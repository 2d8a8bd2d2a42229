/* fuzz_gguf.c — libFuzzer target for the GGUF reader: any byte string must
 * either parse or be refused with ALICE_ERR_INVALID, never crash or read out
 * of bounds. A file that parses is walked completely through the public API
 * so every index (string/nested arrays, tensor data ranges) is exercised. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/gguf.h"

static volatile uint64_t sink;

static void walk_arr(const struct alice_gguf_arr *a, int depth)
{
	uint64_t n = a->n < 64 ? a->n : 64;
	for (uint64_t i = 0; i < n; i++) {
		struct alice_gguf_str s;
		struct alice_gguf_arr sub;
		int64_t iv;
		double dv;
		if (alice_gguf_arr_str(a, i, &s) == ALICE_OK && s.len)
			sink += (unsigned char)s.ptr[0] + (unsigned char)s.ptr[s.len - 1];
		if (alice_gguf_arr_arr(a, i, &sub) == ALICE_OK && depth < 32)
			walk_arr(&sub, depth + 1);
		if (alice_gguf_arr_int(a, i, &iv) == ALICE_OK)
			sink += (uint64_t)iv;
		if (alice_gguf_arr_float(a, i, &dv) == ALICE_OK)
			sink += dv == dv;
	}
	if (a->n) { /* the last element too (index built over the whole array) */
		struct alice_gguf_str s;
		if (alice_gguf_arr_str(a, a->n - 1, &s) == ALICE_OK && s.len)
			sink += (unsigned char)s.ptr[s.len - 1];
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A heap copy of exactly `size` bytes so ASan sees any over-read. */
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	if (size)
		memcpy(copy, data, size);
	struct alice_gguf *g = NULL;
	struct alice_error err;
	enum alice_status st = alice_gguf_open_memory(copy, size, "fuzz", &g, &err);
	if (st != ALICE_OK) {
		if (st != ALICE_ERR_INVALID && st != ALICE_ERR_NOMEM)
			abort();
		if (g || strncmp(err.msg, "fuzz", 4) != 0)
			abort();
		free(copy);
		return 0;
	}
	for (int64_t i = 0; i < alice_gguf_n_kv(g); i++) {
		const char *key = alice_gguf_key(g, i);
		if (alice_gguf_find_key(g, key) != i)
			abort();
		int64_t iv;
		double dv;
		struct alice_gguf_str s;
		struct alice_gguf_arr a;
		if (alice_gguf_get_int(g, key, &iv, &err) == ALICE_OK)
			sink += (uint64_t)iv;
		if (alice_gguf_get_float(g, key, &dv, &err) == ALICE_OK)
			sink += dv == dv;
		if (alice_gguf_get_str(g, key, &s, &err) == ALICE_OK && s.len)
			sink += (unsigned char)s.ptr[s.len - 1];
		if (alice_gguf_get_arr(g, key, &a, &err) == ALICE_OK)
			walk_arr(&a, 0);
	}
	for (int64_t i = 0; i < alice_gguf_n_tensors(g); i++) {
		const struct alice_gguf_tensor_info *t = alice_gguf_tensor(g, i);
		if (alice_gguf_find_tensor(g, t->name) != i)
			abort();
		if (t->nbytes) /* first and last byte of the data must be readable */
			sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
	}
	alice_gguf_close(g);
	free(copy);
	return 0;
}
