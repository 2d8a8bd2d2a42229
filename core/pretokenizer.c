/* pretokenizer.c — the BPE pre-tokenizer splits of llama.cpp, hand-written.
 *
 * llama.cpp splits text into words with a list of regexes per pre-tokenizer
 * type. Two of them (GPT-2's and Llama 3's) run through hand-written
 * matchers in llama.cpp; every other regex runs through std::regex on a
 * "collapsed" text where each non-ASCII code point is replaced by one byte
 * standing for its category (letter, number, punctuation, mark, symbol,
 * other) and non-ASCII whitespace by '\v'. The two paths differ in small
 * ways (e.g. which ASCII bytes count as whitespace, what an unmatched code
 * point becomes), so both are reproduced here:
 *   - custom matchers: every position yields a word (no match = 1 code point)
 *   - regex matchers: ECMAScript leftmost-alternative semantics worked out by
 *     hand for each regex; unmatched code points between matches form one
 *     word together, as std::regex_iterator's gaps do.
 * A list of regexes is applied in turn, each splitting the previous words. */
#include <stdlib.h>

#include "tokenizer_internal.h"

struct pctx {
	const uint32_t *cp;
	const uint16_t *fl; /* category flags per code point */
	const uint8_t *cc;  /* collapsed byte per code point (regex path) */
	size_t end;         /* end of the current chunk */
};

/* ---- custom matchers (llama.cpp's unicode_regex_split_custom_*) ---------- */

#define OUT_OF_RANGE 0xFFFFFFFFu
#define F_WLN (ALICE_UCP_WHITESPACE | ALICE_UCP_LETTER | ALICE_UCP_NUMBER)

static inline uint32_t CP(const struct pctx *c, size_t p)
{
	return p < c->end ? c->cp[p] : OUT_OF_RANGE;
}

static inline uint16_t FL(const struct pctx *c, size_t p)
{
	return p < c->end ? c->fl[p] : 0;
}

static inline uint32_t ascii_lower(uint32_t x)
{
	/* Only ASCII capitals lowercase to s t r e v m l d (checked by
	 * scripts/gen_unicode_data.py), so ASCII folding is exact here. */
	return (x >= 'A' && x <= 'Z') ? x + 32 : x;
}

/* 's 't 're 've 'm 'll 'd (optionally case-insensitive); 0 if none. */
static size_t contraction(const struct pctx *c, size_t pos, bool icase)
{
	if (CP(c, pos) != '\'' || pos + 1 >= c->end)
		return 0;
	uint32_t a = CP(c, pos + 1);
	if (icase)
		a = ascii_lower(a);
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if (pos + 2 < c->end) {
		uint32_t b = CP(c, pos + 2);
		if (icase)
			b = ascii_lower(b);
		if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
			return 3;
	}
	return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const struct pctx *c, size_t pos)
{
	size_t m = contraction(c, pos, false);
	if (m)
		return m;
	uint32_t cpt = CP(c, pos);
	uint16_t f2 = cpt == ' ' ? FL(c, pos + 1) : FL(c, pos);
	size_t p = pos + (cpt == ' ');
	if (f2 & ALICE_UCP_LETTER) {
		while (FL(c, p) & ALICE_UCP_LETTER)
			p++;
		return p - pos;
	}
	if (f2 & ALICE_UCP_NUMBER) {
		while (FL(c, p) & ALICE_UCP_NUMBER)
			p++;
		return p - pos;
	}
	if (!(f2 & F_WLN) && f2) {
		while (!(FL(c, p) & F_WLN) && FL(c, p))
			p++;
		return p - pos;
	}
	size_t nws = 0;
	while (FL(c, pos + nws) & ALICE_UCP_WHITESPACE)
		nws++;
	if (nws > 1 && pos + nws < c->end)
		return nws - 1;
	return nws ? nws : 1;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama3(const struct pctx *c, size_t pos)
{
	size_t m = contraction(c, pos, true);
	if (m)
		return m;
	uint32_t cpt = CP(c, pos);
	uint16_t fl = FL(c, pos);
	if (!(cpt == '\r' || cpt == '\n' || (fl & ALICE_UCP_NUMBER))) {
		if ((fl & ALICE_UCP_LETTER) || (FL(c, pos + 1) & ALICE_UCP_LETTER)) {
			size_t p = pos + 1;
			while (FL(c, p) & ALICE_UCP_LETTER)
				p++;
			return p - pos;
		}
	}
	if (fl & ALICE_UCP_NUMBER) {
		size_t p = pos;
		while (p - pos < 3 && (FL(c, p) & ALICE_UCP_NUMBER))
			p++;
		return p - pos;
	}
	uint16_t f2 = cpt == ' ' ? FL(c, pos + 1) : fl;
	if (!(f2 & F_WLN) && fl) { /* llama.cpp tests fl here, not f2 */
		size_t p = pos + (cpt == ' ');
		while (!(FL(c, p) & F_WLN) && FL(c, p))
			p++;
		while (CP(c, p) == '\r' || CP(c, p) == '\n')
			p++;
		return p - pos;
	}
	size_t nws = 0, last_rn = 0;
	while (FL(c, pos + nws) & ALICE_UCP_WHITESPACE) {
		uint32_t x = CP(c, pos + nws);
		if (x == '\r' || x == '\n')
			last_rn = pos + nws + 1;
		nws++;
	}
	if (last_rn)
		return last_rn - pos;
	if (nws > 1 && pos + nws < c->end)
		return nws - 1;
	return nws ? nws : 1;
}

/* ---- regex matchers over the collapsed text ------------------------------ */

enum {
	CC_OTHER = 0xD0,
	CC_NUMBER = 0xD1,
	CC_LETTER = 0xD2,
	CC_PUNCT = 0xD3,
	CC_MARK = 0xD4,
	CC_SYMBOL = 0xD5,
};

static inline bool cS(uint8_t x) /* std::regex \s in the C locale */
{
	return x == ' ' || (x >= 0x09 && x <= 0x0d);
}
static inline bool cL(uint8_t x)
{
	return x == CC_LETTER || (x >= 'A' && x <= 'Z') || (x >= 'a' && x <= 'z');
}
static inline bool cN(uint8_t x)
{
	return x == CC_NUMBER || (x >= '0' && x <= '9');
}
static inline bool cM(uint8_t x)
{
	return x == CC_MARK;
}
static inline bool cRN(uint8_t x)
{
	return x == '\r' || x == '\n';
}
/* [\p{P}\$\+<=>\^~\|] */
static inline bool cPx(uint8_t x)
{
	return x == CC_PUNCT || (x >= 0x21 && x <= 0x23) || (x >= 0x25 && x <= 0x2a) || (x >= 0x2c && x <= 0x2f) ||
	       x == 0x3a || x == 0x3b || x == 0x3f || x == 0x40 || (x >= 0x5b && x <= 0x5d) || x == 0x5f ||
	       x == 0x7b || x == 0x7d || x == '$' || x == '+' || x == '<' || x == '=' || x == '>' ||
	       x == '^' || x == '~' || x == '|';
}

/* (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|
 * [^\r\n\p{L}\p{N}]?L+|\p{N}| ?O+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with L = \p{L}, O = [^\s\p{L}\p{N}] (qwen2) or L = [\p{L}\p{M}],
 * O = [^\s\p{L}\p{M}\p{N}] (qwen35). */
static size_t match_qwen(const struct pctx *c, size_t pos, bool marks)
{
	const uint8_t *s = c->cc;
	size_t end = c->end;
	size_t m = contraction(c, pos, true); /* '[sS]... are ASCII-only: same thing */
	if (m)
		return m;
	uint8_t x = s[pos];
#define IS_LW(y) (cL(y) || (marks && cM(y)))
#define IS_O(y) (!cS(y) && !cL(y) && !cN(y) && !(marks && cM(y)))
	if (IS_LW(x)) {
		size_t p = pos + 1;
		while (p < end && IS_LW(s[p]))
			p++;
		return p - pos;
	}
	if (!cRN(x) && !cL(x) && !cN(x) && pos + 1 < end && IS_LW(s[pos + 1])) {
		size_t p = pos + 2;
		while (p < end && IS_LW(s[p]))
			p++;
		return p - pos;
	}
	if (cN(x))
		return 1;
	if ((x == ' ' && pos + 1 < end && IS_O(s[pos + 1])) || IS_O(x)) {
		size_t p = pos + (x == ' ') + 1;
		while (p < end && IS_O(s[p]))
			p++;
		while (p < end && cRN(s[p]))
			p++;
		return p - pos;
	}
#undef IS_LW
#undef IS_O
	if (cS(x)) {
		size_t n = 0, last_rn = 0;
		while (pos + n < end && cS(s[pos + n])) {
			if (cRN(s[pos + n]))
				last_rn = n + 1;
			n++;
		}
		if (last_rn)
			return last_rn;
		if (pos + n == end)
			return n;
		return n >= 2 ? n - 1 : 1;
	}
	return 0;
}

/* ---- drivers ------------------------------------------------------------ */

enum split_kind {
	SPLIT_GPT2,      /* custom */
	SPLIT_LLAMA3,    /* custom */
	SPLIT_QWEN2,     /* regex */
	SPLIT_QWEN35,    /* regex */
	SPLIT_PUNCT_RUN, /* regex [\p{P}\$\+<=>\^~\|]+ */
	SPLIT_NUM_RUN,   /* regex \p{N}+ */
	SPLIT_DIGIT3,    /* regex [0-9][0-9][0-9] */
	SPLIT_NEWLINES,  /* regex [^\n]+|[\n]+ */
};

static size_t match_at(enum split_kind k, const struct pctx *c, size_t pos)
{
	const uint8_t *s = c->cc;
	size_t p = pos;
	switch (k) {
	case SPLIT_GPT2:
		return match_gpt2(c, pos);
	case SPLIT_LLAMA3:
		return match_llama3(c, pos);
	case SPLIT_QWEN2:
		return match_qwen(c, pos, false);
	case SPLIT_QWEN35:
		return match_qwen(c, pos, true);
	case SPLIT_PUNCT_RUN:
		while (p < c->end && cPx(s[p]))
			p++;
		return p - pos;
	case SPLIT_NUM_RUN:
		while (p < c->end && cN(s[p]))
			p++;
		return p - pos;
	case SPLIT_DIGIT3:
		for (int i = 0; i < 3; i++)
			if (pos + i >= c->end || c->cp[pos + i] < '0' || c->cp[pos + i] > '9')
				return 0;
		return 3;
	case SPLIT_NEWLINES: {
		bool nl = c->cp[pos] == '\n';
		while (p < c->end && (c->cp[p] == '\n') == nl)
			p++;
		return p - pos;
	}
	}
	return 1;
}

/* Split every word of `in` with splitter k into `out`. */
static bool split_pass(enum split_kind k, struct pctx *c, const struct tok_ivec *in, struct tok_ivec *out)
{
	size_t start = 0;
	out->n = 0;
	for (size_t w = 0; w < in->n; w++) {
		size_t a = start, b = start + (size_t)in->v[w];
		start = b;
		c->end = b;
		size_t gap = a;
		for (size_t pos = a; pos < b;) {
			size_t m = match_at(k, c, pos);
			if (m == 0) { /* regex: no match here, part of a gap */
				pos++;
				continue;
			}
			if (pos > gap && !tok_ivec_push(out, (int32_t)(pos - gap)))
				return false;
			if (!tok_ivec_push(out, (int32_t)m))
				return false;
			pos += m;
			gap = pos;
		}
		if (b > gap && !tok_ivec_push(out, (int32_t)(b - gap)))
			return false;
	}
	return true;
}

static uint8_t collapse(uint32_t cp, uint16_t fl)
{
	if (cp < 128)
		return (uint8_t)cp;
	if (fl & ALICE_UCP_WHITESPACE)
		return 0x0b;
	switch (fl & ALICE_UCP_CATEGORIES) {
	case ALICE_UCP_NUMBER: return CC_NUMBER;
	case ALICE_UCP_LETTER: return CC_LETTER;
	case ALICE_UCP_PUNCT: return CC_PUNCT;
	case ALICE_UCP_MARK: return CC_MARK;
	case ALICE_UCP_SYMBOL: return CC_SYMBOL;
	default: return CC_OTHER;
	}
}

bool tok_pretokenize(enum tok_pre pre, const uint32_t *cpts, size_t n, struct tok_ivec *lens)
{
	static const enum split_kind l_default[] = {SPLIT_PUNCT_RUN, SPLIT_GPT2, SPLIT_NUM_RUN, SPLIT_DIGIT3};
	static const enum split_kind l_gpt2[] = {SPLIT_GPT2};
	static const enum split_kind l_llama3[] = {SPLIT_LLAMA3};
	static const enum split_kind l_qwen2[] = {SPLIT_QWEN2};
	static const enum split_kind l_qwen35[] = {SPLIT_QWEN35};
	static const enum split_kind l_gemma4[] = {SPLIT_NEWLINES};
	const enum split_kind *list;
	size_t n_list;
	switch (pre) {
	case TOK_PRE_GPT2: list = l_gpt2; n_list = 1; break;
	case TOK_PRE_LLAMA3: list = l_llama3; n_list = 1; break;
	case TOK_PRE_QWEN2: list = l_qwen2; n_list = 1; break;
	case TOK_PRE_QWEN35: list = l_qwen35; n_list = 1; break;
	case TOK_PRE_GEMMA4: list = l_gemma4; n_list = 1; break;
	default: list = l_default; n_list = 4; break;
	}
	lens->n = 0;
	if (n == 0)
		return true;
	bool ok = false;
	uint16_t *fl = malloc(n * sizeof *fl);
	uint8_t *cc = malloc(n);
	struct tok_ivec tmp = {0};
	if (!fl || !cc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		fl[i] = alice_ucp_flags(cpts[i]);
		cc[i] = collapse(cpts[i], fl[i]);
	}
	struct pctx c = {.cp = cpts, .fl = fl, .cc = cc, .end = n};
	if (!tok_ivec_push(&tmp, (int32_t)n))
		goto out;
	for (size_t i = 0; i < n_list; i++) {
		if (!split_pass(list[i], &c, &tmp, lens))
			goto out;
		if (i + 1 < n_list) { /* the output becomes the next input */
			struct tok_ivec sw = tmp;
			tmp = *lens;
			*lens = sw;
		}
	}
	ok = true;
out:
	free(fl);
	free(cc);
	free(tmp.v);
	return ok;
}
