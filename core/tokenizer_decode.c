/* tokenizer_decode.c — token pieces, whole-sequence detokenize and the
 * streaming detokenizer. Pieces follow llama_token_to_piece: control /
 * unknown / user-defined tokens are their text, normal tokens are unescaped
 * (SPM, gemma4: U+2581 -> space; GPT-2 alphabet -> bytes), byte tokens
 * <0xNN> are that byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/sbuf.h"
#include "tokenizer_internal.h"
#include "unicode.h"

/* <0xNN>: the two characters after "<0x" read as hex (strtol-like: stops at
 * the first non-hex character). */
static unsigned char token_byte(const struct tok_entry *e)
{
	unsigned v = 0;
	for (uint32_t i = 3; i < 5 && i < e->len; i++) {
		int h = alice_hex_digit(e->text[i]);
		if (h < 0)
			break;
		v = v * 16 + (unsigned)h;
	}
	return (unsigned char)v;
}

static bool unescape_spaces(struct alice_sbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
			if (!alice_sb_addn(b, " ", 1))
				return false;
			i += 3;
		} else {
			size_t j = i + 1;
			while (j < n && s[j] != '\xe2')
				j++;
			if (!alice_sb_addn(b, s + i, j - i))
				return false;
			i = j;
		}
	}
	return true;
}

/* GPT-2 alphabet -> bytes; a character outside the alphabet gives llama.cpp's
 * "[UNK_BYTE_0x<hex of its UTF-8><token text>]". */
static bool gpt2_decode(struct alice_sbuf *b, const char *s, size_t n)
{
	for (size_t off = 0; off < n;) {
		uint32_t cp = alice_utf8_decode_lenient((const unsigned char *)s, n, &off);
		int byte = alice_gpt2_cp_to_byte(cp);
		if (byte >= 0) {
			unsigned char c = (unsigned char)byte;
			if (!alice_sb_addn(b, &c, 1))
				return false;
			continue;
		}
		char u[4], hex[12];
		size_t un = alice_utf8_encode(cp, u);
		if (!alice_sb_addn(b, "[UNK_BYTE_0x", 12))
			return false;
		for (size_t j = 0; j < un; j++) {
			snprintf(hex, sizeof hex, "%02x", (unsigned char)u[j]);
			if (!alice_sb_addn(b, hex, 2))
				return false;
		}
		if (!alice_sb_addn(b, s, n) || !alice_sb_addn(b, "]", 1))
			return false;
	}
	return true;
}

enum alice_status tok_build_pieces(struct alice_tokenizer *t)
{
	struct alice_sbuf b = {0};
	t->piece_off = malloc(((size_t)t->n + 1) * sizeof *t->piece_off);
	if (!t->piece_off)
		return ALICE_ERR_NOMEM;
	for (int32_t id = 0; id < t->n; id++) {
		const struct tok_entry *e = &t->tok[id];
		bool ok = true;
		t->piece_off[id] = b.n;
		if (e->attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_USER_DEFINED)) {
			ok = alice_sb_addn(&b, e->text, e->len);
		} else if (e->attr & TOK_ATTR_NORMAL) {
			if (t->type != TOK_TYPE_BPE || t->escape_whitespace)
				ok = unescape_spaces(&b, e->text, e->len);
			else
				ok = gpt2_decode(&b, e->text, e->len);
		} else if (e->attr & TOK_ATTR_BYTE) {
			unsigned char c = token_byte(e);
			ok = alice_sb_addn(&b, &c, 1);
		} /* unused / undefined tokens render as nothing */
		if (!ok) {
			free(b.p);
			return ALICE_ERR_NOMEM;
		}
	}
	t->piece_off[t->n] = b.n;
	t->pieces = b.p ? b.p : calloc(1, 1);
	return t->pieces ? ALICE_OK : ALICE_ERR_NOMEM;
}

static const char *piece_of(const struct alice_tokenizer *t, int32_t id, bool render_special, size_t *len)
{
	if (!render_special && (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) {
		*len = 0;
		return t->pieces;
	}
	*len = t->piece_off[id + 1] - t->piece_off[id];
	return t->pieces + t->piece_off[id];
}

size_t alice_tokenizer_piece(const struct alice_tokenizer *t, int32_t id, bool render_special, char *buf,
			     size_t cap)
{
	if (id < 0 || id >= t->n)
		return 0;
	size_t n;
	const char *p = piece_of(t, id, render_special, &n);
	memcpy(buf, p, n < cap ? n : cap);
	return n;
}

const char *alice_tokenizer_token_bytes(const struct alice_tokenizer *t, int32_t id, size_t *len,
					bool *is_special)
{
	if (id < 0 || id >= t->n) {
		*len = 0;
		if (is_special)
			*is_special = false;
		return NULL;
	}
	if (is_special)
		*is_special = (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)) != 0;
	return piece_of(t, id, true, len);
}

/* llama.cpp's clean_up_tokenization_spaces, in place: drop the space before
 * ? ! . , ; drop the spaces around a lone apostrophe; drop the space before
 * 's 'm 're 've. Each pass reads the previous pass's result. */
static size_t clean_spaces(char *s, size_t n)
{
	size_t total = n ? 1 : 0;
	for (size_t i = 1; i < n; i++) {
		char x = s[i];
		if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
			total--;
		s[total++] = x;
	}
	n = total;
	total = n ? 1 : 0;
	for (size_t i = 1; i < n; i++) {
		char x = s[i];
		if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
			total--;      /* the space before */
			s[++i] = '\0'; /* skip the space after (and mark it for later reads) */
		}
		s[total++] = x;
	}
	n = total;
	total = n ? 1 : 0;
	for (size_t i = 1; i < n; i++) {
		char x = s[i];
		if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
			char x1 = s[i + 1];
			if (x1 == 's' || x1 == 'm')
				total--;
			else if (i + 2 < n && ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e')))
				total--;
		}
		s[total++] = x;
	}
	return total;
}

enum alice_status alice_tokenizer_decode(const struct alice_tokenizer *t, const int32_t *ids, size_t n,
					 bool render_special, char **out, size_t *out_len,
					 struct alice_error *err)
{
	struct alice_sbuf b = {0};
	*out = NULL;
	*out_len = 0;
	if (!alice_sb_addn(&b, "", 0))
		return alice_fail(err, ALICE_ERR_NOMEM, "tokenizer: out of memory");
	bool remove_space = t->add_space_prefix;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->n) {
			free(b.p);
			return alice_fail(err, ALICE_ERR_RANGE, "tokenizer: token id %d at position %zu is not in 0..%d",
					  ids[i], i, t->n - 1);
		}
		size_t len;
		const char *p = piece_of(t, ids[i], render_special, &len);
		if (remove_space && len && p[0] == ' ') {
			p++;
			len--;
		}
		remove_space = false;
		if (!alice_sb_addn(&b, p, len)) {
			free(b.p);
			return alice_fail(err, ALICE_ERR_NOMEM, "tokenizer: out of memory");
		}
	}
	if (t->clean_spaces) {
		b.n = clean_spaces(b.p, b.n);
		b.p[b.n] = 0;
	}
	*out = b.p;
	*out_len = b.n;
	return ALICE_OK;
}

/* ---- streaming ------------------------------------------------------------- */

struct alice_detok_stream {
	const struct alice_tokenizer *t;
	bool render_special;
	unsigned char pend[8]; /* an incomplete UTF-8 sequence (at most 3 bytes) */
	size_t n_pend;
	struct alice_sbuf out;
	unsigned char *work;
	size_t work_cap;
};

enum alice_status alice_detok_stream_create(const struct alice_tokenizer *t, bool render_special,
					    struct alice_detok_stream **out, struct alice_error *err)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return alice_fail(err, ALICE_ERR_NOMEM, "tokenizer: out of memory");
	(*out)->t = t;
	(*out)->render_special = render_special;
	return ALICE_OK;
}

void alice_detok_stream_free(struct alice_detok_stream *s)
{
	if (!s)
		return;
	free(s->out.p);
	free(s->work);
	free(s);
}

static const char REPLACEMENT[] = "\xef\xbf\xbd"; /* U+FFFD */

/* The one UTF-8 repair policy: valid characters are copied, each maximal
 * invalid subpart becomes one U+FFFD (Python's errors="replace", WHATWG).
 * An unfinished character at the end is left unconsumed (final: replaced by
 * one U+FFFD). Appends to out; returns the bytes consumed. */
static size_t utf8_repair(struct alice_sbuf *out, const unsigned char *s, size_t n, bool final)
{
	size_t i = 0;
	while (i < n) {
		size_t bad, m;
		const void *src;
		int r = alice_utf8_check(s + i, n - i, &bad);
		if (r == 0 && !final)
			break; /* may still complete: keep it */
		if (r > 0) { /* a run of valid characters */
			size_t j = i + (size_t)r;
			while (j < n && (r = alice_utf8_check(s + j, n - j, &bad)) > 0)
				j += (size_t)r;
			src = s + i;
			m = j - i;
			i = j;
		} else { /* can never become valid (or the input ends inside it) */
			src = REPLACEMENT;
			m = 3;
			i = r == 0 ? n : i + bad;
		}
		alice_sb_addn(out, src, m);
	}
	return i;
}

char *alice_utf8_repair(const char *s, size_t n, size_t *out_len)
{
	struct alice_sbuf b = {0};
	utf8_repair(&b, (const unsigned char *)s, n, true);
	size_t len = b.n;
	char *p = alice_sb_take(&b);
	if (p && out_len)
		*out_len = len;
	return p;
}

enum alice_status alice_detok_stream_push(struct alice_detok_stream *s, int32_t id, const char **text,
					  size_t *len, struct alice_error *err)
{
	*text = "";
	*len = 0;
	if (id < 0 || id >= s->t->n)
		return alice_fail(err, ALICE_ERR_RANGE, "tokenizer: token id %d is not in 0..%d", id, s->t->n - 1);
	size_t pn;
	const char *piece = piece_of(s->t, id, s->render_special, &pn);
	size_t n = s->n_pend + pn;
	if (n > s->work_cap) {
		unsigned char *w = realloc(s->work, n);
		if (!w)
			return alice_fail(err, ALICE_ERR_NOMEM, "tokenizer: out of memory");
		s->work = w;
		s->work_cap = n;
	}
	if (n) {
		memcpy(s->work, s->pend, s->n_pend);
		memcpy(s->work + s->n_pend, piece, pn);
	}
	s->out.n = 0;
	s->out.oom = false; /* one push running out of memory does not fail the next */
	size_t i = utf8_repair(&s->out, s->work, n, false);
	if (s->out.oom)
		return alice_fail(err, ALICE_ERR_NOMEM, "tokenizer: out of memory");
	s->n_pend = n - i;
	if (s->n_pend)
		memcpy(s->pend, s->work + i, s->n_pend);
	if (!s->out.p && !alice_sb_addn(&s->out, "", 0))
		return alice_fail(err, ALICE_ERR_NOMEM, "tokenizer: out of memory");
	*text = s->out.p;
	*len = s->out.n;
	return ALICE_OK;
}

void alice_detok_stream_flush(struct alice_detok_stream *s, const char **text, size_t *len)
{
	*text = s->n_pend ? REPLACEMENT : "";
	*len = s->n_pend ? 3 : 0;
	s->n_pend = 0;
}
