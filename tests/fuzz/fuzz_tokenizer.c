/* fuzz_tokenizer.c — libFuzzer target for the tokenizer on arbitrary bytes.
 *
 * The vocabularies are llama.cpp's reference vocab GGUFs from the fixtures
 * (env ALICE_FIXTURES_DIR, else the compiled-in fixtures dir), loaded once.
 * The first input byte picks the vocabulary and parse_special; the rest is
 * the text. Properties checked on every input:
 *   - encode never fails on any bytes, and yields ids in [0, n_vocab);
 *   - decode of those ids succeeds;
 *   - the streaming detokenizer emits only valid UTF-8, and when the pieces
 *     concatenated are valid UTF-8 it emits exactly them;
 *   - for vocabularies without space clean-up (SPM, qwen2), decoding the
 *     encoding of valid UTF-8 text gives the text back. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/gguf.h"
#include "alice/tokenizer.h"

#ifndef ALICE_FIXTURES_DIR
#define ALICE_FIXTURES_DIR "../shared/fixtures"
#endif

static const struct vocab_spec {
	const char *file;
	bool round_trip;
} specs[] = {
	{"ggml-vocab-llama-spm.gguf", true},
	{"ggml-vocab-qwen2.gguf", true},
	{"ggml-vocab-gpt-2.gguf", false},
	{"ggml-vocab-llama-bpe.gguf", false},
};
#define N_SPECS (sizeof(specs) / sizeof(specs[0]))

static struct alice_gguf *ggufs[N_SPECS];
static struct alice_tokenizer *toks[N_SPECS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *dir = getenv("ALICE_FIXTURES_DIR");
	if (!dir || !dir[0])
		dir = ALICE_FIXTURES_DIR;
	for (size_t i = 0; i < N_SPECS; i++) {
		char path[4096];
		struct alice_error err;
		snprintf(path, sizeof(path), "%s/vocab/%s", dir, specs[i].file);
		if (alice_gguf_open(path, &ggufs[i], &err) != ALICE_OK ||
		    alice_tokenizer_load(ggufs[i], &toks[i], &err) != ALICE_OK) {
			fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s (set ALICE_FIXTURES_DIR)\n", path,
				err.msg);
			exit(1);
		}
	}
	return 0;
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			len = 2, cp = c & 0x1F;
		else if (c >= 0xE0 && c <= 0xEF)
			len = 3, cp = c & 0x0F;
		else if (c >= 0xF0 && c <= 0xF4)
			len = 4, cp = c & 0x07;
		else
			return false;
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

struct buf {
	char *p;
	size_t n, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->p, cap);
		if (!p)
			abort();
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	const struct vocab_spec *spec = &specs[(data[0] >> 1) % N_SPECS];
	const struct alice_tokenizer *t = toks[spec - specs];
	bool parse_special = data[0] & 1;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	int32_t n_vocab = alice_tokenizer_n_vocab(t);

	int32_t *ids = NULL;
	size_t n = 0;
	struct alice_error err;
	if (alice_tokenizer_encode(t, text, len, false, parse_special, &ids, &n, &err) != ALICE_OK) {
		fprintf(stderr, "encode failed: %s\n", err.msg);
		abort();
	}
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab)
			abort();

	char *dec = NULL;
	size_t dec_len = 0;
	if (alice_tokenizer_decode(t, ids, n, parse_special, &dec, &dec_len, &err) != ALICE_OK || !dec)
		abort();
	if (spec->round_trip && !parse_special && valid_utf8(data + 1, len) &&
	    (dec_len != len || memcmp(dec, text, len) != 0)) {
		fprintf(stderr, "round trip mismatch (%s): %zu bytes in, %zu out\n", spec->file, len, dec_len);
		abort();
	}

	/* streaming: whole characters only, and the pieces when they are valid */
	struct alice_detok_stream *ds = NULL;
	if (alice_detok_stream_create(t, parse_special, &ds, &err) != ALICE_OK)
		abort();
	struct buf streamed = {0}, pieces = {0};
	for (size_t i = 0; i < n; i++) {
		const char *s;
		size_t sl;
		if (alice_detok_stream_push(ds, ids[i], &s, &sl, &err) != ALICE_OK)
			abort();
		if (!valid_utf8((const unsigned char *)s, sl))
			abort();
		buf_add(&streamed, s, sl);
		char piece[256];
		size_t pl = alice_tokenizer_piece(t, ids[i], parse_special, piece, sizeof(piece));
		if (pl > sizeof(piece)) {
			char *big = malloc(pl);
			if (!big || alice_tokenizer_piece(t, ids[i], parse_special, big, pl) != pl)
				abort();
			buf_add(&pieces, big, pl);
			free(big);
		} else {
			buf_add(&pieces, piece, pl);
		}
	}
	const char *s;
	size_t sl;
	alice_detok_stream_flush(ds, &s, &sl);
	if (!valid_utf8((const unsigned char *)s, sl))
		abort();
	buf_add(&streamed, s, sl);
	if (valid_utf8((const unsigned char *)pieces.p, pieces.n) &&
	    (streamed.n != pieces.n || (pieces.n && memcmp(streamed.p, pieces.p, pieces.n) != 0))) {
		fprintf(stderr, "stream mismatch (%s): %zu vs %zu bytes\n", spec->file, streamed.n, pieces.n);
		abort();
	}
	alice_detok_stream_free(ds);
	free(streamed.p);
	free(pieces.p);
	free(dec);
	free(ids);
	return 0;
}
