/* json_schema_regex.c — the `pattern` keyword: the regex subset listed in
 * json_schema.h becomes GBNF over the JSON text of a string (a character
 * JSON must escape is matched as its escape); anything outside the subset
 * is refused, naming the construct and its offset. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_internal.h"

struct rx {
	struct js_conv *c;
	const char *s;
	size_t n, pos;
	int depth;
};

static char *rx_fail(struct rx *r, const char *what)
{
	return js_fail(r->c, ALICE_ERR_UNSUPPORTED, "pattern: %s at offset %zu", what, r->pos);
}

struct rclass {
	uint32_t lo[64], hi[64];
	int n;
	int neg;
};

static int rc_add(struct rclass *k, uint32_t lo, uint32_t hi)
{
	if (k->n >= 64)
		return -1;
	k->lo[k->n] = lo;
	k->hi[k->n] = hi;
	k->n++;
	return 0;
}

static int rc_has(const struct rclass *k, uint32_t cp)
{
	int in = 0;
	for (int i = 0; i < k->n; i++)
		if (cp >= k->lo[i] && cp <= k->hi[i])
			in = 1;
	return in != k->neg;
}

/* JSON text of one code point inside a string. */
static void json_char(struct alice_sbuf *s, uint32_t cp)
{
	char tmp[8];
	if (cp == '"') {
		js_sb_lit(s, "\\\"", 2);
	} else if (cp == '\\') {
		js_sb_lit(s, "\\\\", 2);
	} else if (cp < 0x20) {
		const char *e = cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : cp == '\t' ? "\\t" :
				cp == '\b' ? "\\b" : cp == '\f' ? "\\f" : NULL;
		if (e) {
			js_sb_lit(s, e, 2);
		} else {
			snprintf(tmp, sizeof tmp, "\\u%04x", cp);
			js_sb_lit(s, tmp, 6);
		}
	} else {
		int n;
		if (cp < 0x80) {
			tmp[0] = (char)cp, n = 1;
		} else if (cp < 0x800) {
			tmp[0] = (char)(0xC0 | (cp >> 6)), tmp[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
		} else if (cp < 0x10000) {
			tmp[0] = (char)(0xE0 | (cp >> 12)), tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
			tmp[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
		} else {
			tmp[0] = (char)(0xF0 | (cp >> 18)), tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
			tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), tmp[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
		}
		js_sb_lit(s, tmp, (size_t)n);
	}
}

static void class_cp(struct alice_sbuf *s, uint32_t cp)
{
	if (cp == ']' || cp == '[' || cp == '\\' || cp == '"' || cp == '-' || cp == '^' || cp < 0x20 ||
	    cp == 0x7f || cp > 0x7e)
		alice_sb_addf(s, cp > 0xFFFF ? "\\U%08X" : "\\u%04X", cp);
	else
		alice_sb_addf(s, "%c", (char)cp);
}

/* GBNF for a regex class over JSON string content: the plain characters as a
 * GBNF class, plus the JSON escapes of the special characters it contains. */
static char *class_to_gbnf(struct rx *r, const struct rclass *k)
{
	struct alice_sbuf s = {0};
	int alts = 0;
	alice_sb_add(&s, "(");
	if (k->neg) {
		alice_sb_add(&s, "[^\\x00-\\x1F\\\"\\\\");
		for (int i = 0; i < k->n; i++) {
			class_cp(&s, k->lo[i]);
			if (k->hi[i] != k->lo[i]) {
				alice_sb_add(&s, "-");
				class_cp(&s, k->hi[i]);
			}
		}
		alice_sb_add(&s, "]");
		alts++;
	} else {
		struct alice_sbuf cls = {0};
		int any = 0;
		static const uint32_t cut_lo[3] = {0, 0x22, 0x5C}, cut_hi[3] = {0x1F, 0x22, 0x5C};
		for (int i = 0; i < k->n; i++) {
			/* the range minus 0x00-0x1F, '"' and '\\' (matched as JSON escapes below) */
			uint32_t cur = k->lo[i], hi = k->hi[i];
			for (int j = 0; j < 4 && cur <= hi; j++) {
				uint32_t end = j < 3 ? (cut_lo[j] ? cut_lo[j] - 1 : 0) : hi;
				int emit = j < 3 ? (cut_lo[j] > cur) : 1;
				if (end > hi)
					end = hi;
				if (emit && cur <= end) {
					class_cp(&cls, cur);
					if (end != cur) {
						alice_sb_add(&cls, "-");
						class_cp(&cls, end);
					}
					any = 1;
				}
				if (j < 3 && cut_hi[j] + 1 > cur)
					cur = cut_hi[j] + 1;
			}
		}
		if (any) {
			alice_sb_add(&s, "[");
			alice_sb_addn(&s, cls.p, cls.n);
			alice_sb_add(&s, "]");
			alts++;
		}
		free(cls.p);
	}
	for (uint32_t cp = 0; cp < 0x20; cp++) {
		if (rc_has(k, cp)) {
			alice_sb_add(&s, alts++ ? " | " : "");
			json_char(&s, cp);
		}
	}
	if (rc_has(k, '"')) {
		alice_sb_add(&s, alts++ ? " | " : "");
		json_char(&s, '"');
	}
	if (rc_has(k, '\\')) {
		alice_sb_add(&s, alts++ ? " | " : "");
		json_char(&s, '\\');
	}
	alice_sb_add(&s, ")");
	if (!alts) {
		free(s.p);
		return rx_fail(r, "class matches no character");
	}
	char *body = alice_sb_take(&s);
	const char *nm = js_add_rule(r->c, "pattern-class", body);
	return nm ? strdup(nm) : NULL;
}

static int64_t rx_hex(struct rx *r, int n)
{
	uint32_t v = 0;
	for (int i = 0; i < n; i++) {
		if (r->pos >= r->n)
			return -1;
		char ch = r->s[r->pos++];
		int h = (ch >= '0' && ch <= '9') ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 :
			(ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
		if (h < 0)
			return -1;
		v = v * 16 + (uint32_t)h;
	}
	return v;
}

/* Decode one UTF-8 character of the pattern. */
static int64_t rx_utf8(struct rx *r)
{
	const unsigned char *s = (const unsigned char *)r->s + r->pos;
	size_t left = r->n - r->pos;
	uint32_t cp = s[0];
	size_t n = cp < 0x80 ? 1 : cp >= 0xF0 ? 4 : cp >= 0xE0 ? 3 : cp >= 0xC0 ? 2 : 0;
	if (!n || n > left)
		return -1;
	if (n > 1) {
		cp &= 0x3F >> (n - 1);
		for (size_t i = 1; i < n; i++) {
			if ((s[i] & 0xC0) != 0x80)
				return -1;
			cp = (cp << 6) | (s[i] & 0x3F);
		}
	}
	r->pos += n;
	return cp;
}

/* An escape after '\\' (pos at the letter). Fills class k for class escapes
 * (returns -2) or returns the code point. -1 on error (reported). */
static int64_t rx_escape(struct rx *r, struct rclass *k, int in_class)
{
	if (r->pos >= r->n) {
		rx_fail(r, "trailing backslash");
		return -1;
	}
	char e = r->s[r->pos++];
	switch (e) {
	case 'd': case 'D':
		k->neg = e == 'D';
		rc_add(k, '0', '9');
		break;
	case 'w': case 'W':
		k->neg = e == 'W';
		rc_add(k, 'a', 'z'), rc_add(k, 'A', 'Z'), rc_add(k, '0', '9'), rc_add(k, '_', '_');
		break;
	case 's': case 'S':
		k->neg = e == 'S';
		rc_add(k, ' ', ' '), rc_add(k, '\t', '\r');
		break;
	case 'n': return '\n';
	case 't': return '\t';
	case 'r': return '\r';
	case 'f': return '\f';
	case 'v': return '\v';
	case '0': return 0;
	case 'x': case 'u': {
		int64_t v = rx_hex(r, e == 'x' ? 2 : 4);
		if (v < 0 || (v >= 0xD800 && v <= 0xDFFF)) {
			rx_fail(r, "bad \\x or \\u escape");
			return -1;
		}
		return v;
	}
	case 'b':
		if (in_class)
			return '\b';
		rx_fail(r, "word boundary \\b is not supported");
		return -1;
	case 'B': rx_fail(r, "\\B is not supported"); return -1;
	case 'p': case 'P': rx_fail(r, "unicode property escapes (\\p{...}) are not supported"); return -1;
	case 'k': rx_fail(r, "named backreferences are not supported"); return -1;
	default:
		if (e >= '1' && e <= '9') {
			rx_fail(r, "backreferences are not supported");
			return -1;
		}
		if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
			rx_fail(r, "unsupported escape");
			return -1;
		}
		return (unsigned char)e; /* escaped punctuation is literal */
	}
	if (in_class && k->neg) {
		rx_fail(r, "negated escapes (\\D \\W \\S) inside a class are not supported");
		return -1;
	}
	return -2;
}

static char *rx_class(struct rx *r)
{
	struct rclass k = {.n = 0};
	r->pos++; /* [ */
	if (r->pos < r->n && r->s[r->pos] == '^') {
		k.neg = 1;
		r->pos++;
	}
	int first = 1;
	for (;;) {
		if (r->pos >= r->n)
			return rx_fail(r, "unterminated class");
		if (r->s[r->pos] == ']' && !first)
			break;
		first = 0;
		int64_t lo;
		if (r->s[r->pos] == '\\') {
			r->pos++;
			struct rclass sub = {.n = 0};
			lo = rx_escape(r, &sub, 1);
			if (lo == -1)
				return NULL;
			if (lo == -2) {
				for (int i = 0; i < sub.n; i++)
					if (rc_add(&k, sub.lo[i], sub.hi[i]) < 0)
						return rx_fail(r, "class too large");
				continue;
			}
		} else {
			lo = rx_utf8(r);
			if (lo < 0)
				return rx_fail(r, "invalid UTF-8");
		}
		int64_t hi = lo;
		if (r->pos + 1 < r->n && r->s[r->pos] == '-' && r->s[r->pos + 1] != ']') {
			r->pos++;
			if (r->s[r->pos] == '\\') {
				r->pos++;
				struct rclass sub = {.n = 0};
				hi = rx_escape(r, &sub, 1);
				if (hi == -1)
					return NULL;
				if (hi == -2)
					return rx_fail(r, "class escape as a range end");
			} else {
				hi = rx_utf8(r);
				if (hi < 0)
					return rx_fail(r, "invalid UTF-8");
			}
			if (hi < lo)
				return rx_fail(r, "class range out of order");
		}
		if (rc_add(&k, (uint32_t)lo, (uint32_t)hi) < 0)
			return rx_fail(r, "class too large");
	}
	r->pos++;
	return class_to_gbnf(r, &k);
}

static char *rx_alt(struct rx *r);

static char *rx_atom(struct rx *r)
{
	char ch = r->s[r->pos];
	if (ch == '(') {
		if (++r->depth > JS_MAX_DEPTH)
			return rx_fail(r, "groups nested too deep");
		r->pos++;
		if (r->pos < r->n && r->s[r->pos] == '?') {
			if (r->pos + 1 < r->n && r->s[r->pos + 1] == ':')
				r->pos += 2;
			else
				return rx_fail(r, "lookaround and named groups are not supported");
		}
		char *in = rx_alt(r);
		if (!in)
			return NULL;
		if (r->pos >= r->n || r->s[r->pos] != ')') {
			free(in);
			return rx_fail(r, "missing ')'");
		}
		r->pos++;
		r->depth--;
		struct alice_sbuf s = {0};
		alice_sb_add(&s, "(");
		alice_sb_add(&s, in);
		alice_sb_add(&s, ")");
		free(in);
		char *t = alice_sb_take(&s);
		return t ? t : js_oom(r->c);
	}
	if (ch == '[')
		return rx_class(r);
	if (ch == '.') {
		r->pos++;
		struct rclass k = {.neg = 1};
		rc_add(&k, '\n', '\n'), rc_add(&k, '\r', '\r');
		return class_to_gbnf(r, &k);
	}
	int64_t cp;
	if (ch == '\\') {
		r->pos++;
		struct rclass k = {.n = 0};
		cp = rx_escape(r, &k, 0);
		if (cp == -1)
			return NULL;
		if (cp == -2)
			return class_to_gbnf(r, &k);
	} else if (ch == '^' || ch == '$') {
		return rx_fail(r, "anchors are only supported at the very start and end");
	} else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
		return rx_fail(r, "quantifier without a preceding atom");
	} else if (ch == ')') {
		return rx_fail(r, "unbalanced ')'");
	} else {
		cp = rx_utf8(r);
		if (cp < 0)
			return rx_fail(r, "invalid UTF-8");
	}
	struct alice_sbuf s = {0};
	json_char(&s, (uint32_t)cp);
	char *t = alice_sb_take(&s);
	return t ? t : js_oom(r->c);
}

static int rx_uint(struct rx *r, int64_t *out)
{
	size_t st = r->pos;
	int64_t v = 0;
	while (r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9') {
		v = v * 10 + (r->s[r->pos++] - '0');
		if (v > JS_MAX_BOUND)
			return -1;
	}
	*out = v;
	return r->pos > st ? 0 : -1;
}

static char *rx_seq(struct rx *r)
{
	struct alice_sbuf s = {0};
	int items = 0;
	while (r->pos < r->n && r->s[r->pos] != '|' && r->s[r->pos] != ')') {
		if (r->s[r->pos] == '$' && r->pos + 1 == r->n)
			break; /* the end anchor, handled by the caller */
		char *a = rx_atom(r);
		if (!a) {
			free(s.p);
			return NULL;
		}
		alice_sb_add(&s, items++ ? " " : "");
		alice_sb_add(&s, a);
		free(a);
		if (r->pos < r->n && strchr("*+?{", r->s[r->pos])) {
			char q = r->s[r->pos++];
			if (q == '{') {
				int64_t m, n = -1;
				if (rx_uint(r, &m) < 0) {
					free(s.p);
					return rx_fail(r, "bad {m,n} bounds");
				}
				int comma = 0;
				if (r->pos < r->n && r->s[r->pos] == ',') {
					comma = 1;
					r->pos++;
					if (r->pos < r->n && r->s[r->pos] != '}' && rx_uint(r, &n) < 0) {
						free(s.p);
						return rx_fail(r, "bad {m,n} bounds");
					}
				} else {
					n = m;
				}
				if (r->pos >= r->n || r->s[r->pos] != '}' || (n >= 0 && n < m)) {
					free(s.p);
					return rx_fail(r, "bad {m,n} bounds");
				}
				r->pos++;
				if (comma && n < 0)
					alice_sb_addf(&s, "{%lld,}", (long long)m);
				else
					alice_sb_addf(&s, "{%lld,%lld}", (long long)m, (long long)n);
			} else {
				alice_sb_addn(&s, &q, 1);
			}
			if (r->pos < r->n && (r->s[r->pos] == '?' || r->s[r->pos] == '+')) {
				free(s.p);
				return rx_fail(r, "lazy and possessive quantifiers are not supported");
			}
			if (r->pos < r->n && strchr("*{", r->s[r->pos])) {
				free(s.p);
				return rx_fail(r, "nested quantifier");
			}
		}
	}
	char *t = alice_sb_take(&s);
	return t ? t : js_oom(r->c);
}

static char *rx_alt(struct rx *r)
{
	struct alice_sbuf s = {0};
	for (;;) {
		char *q = rx_seq(r);
		if (!q) {
			free(s.p);
			return NULL;
		}
		alice_sb_add(&s, q[0] ? q : "\"\"");
		free(q);
		if (r->pos < r->n && r->s[r->pos] == '|') {
			r->pos++;
			alice_sb_add(&s, " | ");
			continue;
		}
		break;
	}
	char *t = alice_sb_take(&s);
	return t ? t : js_oom(r->c);
}

char *js_pattern_to_gbnf(struct js_conv *c, const char *pat, size_t n)
{
	struct rx r = {.c = c, .s = pat, .n = n};
	int a_start = n > 0 && pat[0] == '^';
	int a_end = n > 0 && pat[n - 1] == '$' && !(n >= 2 && pat[n - 2] == '\\');
	if (a_start)
		r.pos = 1;
	char *body = rx_alt(&r);
	if (!body)
		return NULL;
	if (r.pos < r.n && !(a_end && r.pos == r.n - 1)) {
		free(body);
		return rx_fail(&r, r.s[r.pos] == ')' ? "unbalanced ')'" : "unexpected character");
	}
	free(js_use(c, P_CHAR));
	free(js_use(c, P_SPACE));
	struct alice_sbuf s = {0};
	alice_sb_add(&s, "\"\\\"\" ");
	if (!a_start)
		alice_sb_add(&s, "char* ");
	alice_sb_add(&s, "(");
	alice_sb_add(&s, body);
	alice_sb_add(&s, ")");
	if (!a_end)
		alice_sb_add(&s, " char*");
	alice_sb_add(&s, " \"\\\"\" space");
	free(body);
	char *t = alice_sb_take(&s);
	return t ? t : js_oom(c);
}
