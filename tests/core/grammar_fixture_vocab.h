/* grammar_fixture_vocab.h — load a BPE vocabulary's token pieces (as bytes)
 * from a GGUF vocab fixture, for the grammar tests and alice-grammar-bench.
 * A minimal GGUF metadata reader (tokens, token types, eos id) plus the
 * GPT-2 byte<->unicode mapping, until core/tokenizer.c offers pieces. */
#ifndef ALICE_GRAMMAR_FIXTURE_VOCAB_H
#define ALICE_GRAMMAR_FIXTURE_VOCAB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"

struct gfx_vocab {
	size_t n;
	char **piece;   /* bytes (not NUL-terminated in general) */
	size_t *len;
	uint8_t *kind;  /* enum alice_grammar_token_kind */
};

static void gfx_vocab_free(struct gfx_vocab *v)
{
	if (!v->piece)
		return;
	for (size_t i = 0; i < v->n; i++)
		free(v->piece[i]);
	free(v->piece);
	free(v->len);
	free(v->kind);
	memset(v, 0, sizeof *v);
}

struct gfx_rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t gfx_u(struct gfx_rd *r, int n)
{
	uint64_t v = 0;
	if (r->end - r->p < n) {
		r->bad = 1;
		return 0;
	}
	for (int i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static const uint8_t *gfx_str(struct gfx_rd *r, uint64_t *len)
{
	*len = gfx_u(r, 8);
	if (r->bad || (uint64_t)(r->end - r->p) < *len) {
		r->bad = 1;
		return NULL;
	}
	const uint8_t *s = r->p;
	r->p += *len;
	return s;
}

static int gfx_type_size(uint32_t t)
{
	static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, -1, -1, 8, 8, 8};
	return t < 13 ? sz[t] : -2;
}

static void gfx_skip(struct gfx_rd *r, uint32_t t)
{
	if (t == 8) {
		uint64_t l;
		gfx_str(r, &l);
	} else if (t == 9) {
		uint32_t et = (uint32_t)gfx_u(r, 4);
		uint64_t n = gfx_u(r, 8);
		for (uint64_t i = 0; i < n && !r->bad; i++)
			gfx_skip(r, et);
	} else {
		int s = gfx_type_size(t);
		if (s < 0)
			r->bad = 1;
		else
			gfx_u(r, s);
	}
}

/* GPT-2's byte-level encoding: code point -> byte (-1 when not a byte char). */
static int gfx_gpt2_byte(uint32_t cp)
{
	static int table[324];
	static int init;
	if (!init) {
		int n = 0;
		for (int i = 0; i < 324; i++)
			table[i] = -1;
		for (int b = 0; b < 256; b++) {
			int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
			if (printable)
				table[b] = b;
			else
				table[256 + n++] = b;
		}
		init = 1;
	}
	return cp < 324 ? table[cp] : -1;
}

/* Decode a GPT-2 byte-encoded token text to bytes; -1 if it is not one. */
static int gfx_gpt2_decode(const uint8_t *s, size_t n, char *out, size_t *out_len)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		if (s[i] < 0x80) {
			cp = s[i++];
		} else if ((s[i] & 0xE0) == 0xC0 && i + 1 < n) {
			cp = ((uint32_t)(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
			i += 2;
		} else {
			return -1;
		}
		int b = gfx_gpt2_byte(cp);
		if (b < 0)
			return -1;
		out[o++] = (char)b;
	}
	*out_len = o;
	return 0;
}

/* Load `path`. Returns 0 or -1 (message on stderr). */
static int gfx_vocab_load(const char *path, struct gfx_vocab *v)
{
	memset(v, 0, sizeof *v);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc((size_t)sz);
	if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	struct gfx_rd r = {buf, buf + sz, 0};
	const uint8_t *toks = NULL, *types = NULL;
	uint64_t n_tok = 0, n_types = 0;
	int64_t eos = -1;
	if (gfx_u(&r, 4) != 0x46554747u) /* "GGUF" */
		goto bad;
	gfx_u(&r, 4);
	gfx_u(&r, 8);
	uint64_t n_kv = gfx_u(&r, 8);
	for (uint64_t i = 0; i < n_kv && !r.bad; i++) {
		uint64_t kl;
		const uint8_t *k = gfx_str(&r, &kl);
		uint32_t t = (uint32_t)gfx_u(&r, 4);
		if (r.bad)
			break;
		if (t == 9 && kl == strlen("tokenizer.ggml.tokens") &&
		    memcmp(k, "tokenizer.ggml.tokens", kl) == 0) {
			uint32_t et = (uint32_t)gfx_u(&r, 4);
			n_tok = gfx_u(&r, 8);
			toks = r.p;
			for (uint64_t j = 0; j < n_tok && !r.bad; j++)
				gfx_skip(&r, et);
		} else if (t == 9 && kl == strlen("tokenizer.ggml.token_type") &&
			   memcmp(k, "tokenizer.ggml.token_type", kl) == 0) {
			uint32_t et = (uint32_t)gfx_u(&r, 4);
			n_types = gfx_u(&r, 8);
			if (et != 5)
				goto bad;
			types = r.p;
			for (uint64_t j = 0; j < n_types && !r.bad; j++)
				gfx_u(&r, 4);
		} else if (t == 4 && kl == strlen("tokenizer.ggml.eos_token_id") &&
			   memcmp(k, "tokenizer.ggml.eos_token_id", kl) == 0) {
			eos = (int64_t)gfx_u(&r, 4);
		} else {
			gfx_skip(&r, t);
		}
	}
	if (r.bad || !toks || !types || n_types != n_tok)
		goto bad;
	v->n = n_tok;
	v->piece = calloc(n_tok, sizeof *v->piece);
	v->len = calloc(n_tok, sizeof *v->len);
	v->kind = calloc(n_tok, 1);
	if (!v->piece || !v->len || !v->kind)
		goto bad;
	r.p = toks;
	for (uint64_t j = 0; j < n_tok; j++) {
		uint64_t l;
		const uint8_t *s = gfx_str(&r, &l);
		int32_t ty = (int32_t)(types[4 * j] | types[4 * j + 1] << 8 | types[4 * j + 2] << 16 |
				       (uint32_t)types[4 * j + 3] << 24);
		v->piece[j] = malloc(l + 1);
		if (!v->piece[j])
			goto bad;
		if (ty == 1 && gfx_gpt2_decode(s, l, v->piece[j], &v->len[j]) == 0) {
			v->kind[j] = ALICE_GRAMMAR_TOKEN_TEXT;
		} else {
			memcpy(v->piece[j], s, l);
			v->len[j] = l;
			v->kind[j] = ty == 4 ? ALICE_GRAMMAR_TOKEN_TEXT : ALICE_GRAMMAR_TOKEN_CONTROL;
		}
		if ((int64_t)j == eos || (ty == 3 && l == 10 && memcmp(s, "<|eot_id|>", 10) == 0))
			v->kind[j] = ALICE_GRAMMAR_TOKEN_EOG;
	}
	free(buf);
	return 0;
bad:
	fprintf(stderr, "%s: not a GGUF vocab this reader understands\n", path);
	free(buf);
	gfx_vocab_free(v);
	return -1;
}

#endif
