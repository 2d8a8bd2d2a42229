/* lexer.c — template source to tokens, with jinja2's whitespace rules as
 * transformers configures them: trim_blocks (one newline after a block or
 * comment tag goes), lstrip_blocks (spaces and tabs before a block or comment
 * tag at the start of a line go, unless `{%+`), `-` strips all whitespace on
 * its side, newlines are normalised to \n and one trailing newline of the
 * template is dropped (keep_trailing_newline=False). */
#include "jinja/lexer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lex {
	struct jarena *a;
	struct jtok *t;
	size_t n, cap;
	const char *s;
	size_t len, pos;
	int line;
	struct alice_error *err;
	jmp_buf *jb;
};

_Noreturn static void lfail(struct lex *l, const char *msg)
{
	alice_error_set(l->err, "TemplateSyntaxError: line %d: %s", l->line, msg);
	longjmp(*l->jb, 1);
}

static struct jtok *push(struct lex *l, enum jtt type)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct jtok *nt = jarena_alloc(l->a, cap * sizeof *nt);
		if (l->n)
			memcpy(nt, l->t, l->n * sizeof *nt);
		l->t = nt;
		l->cap = cap;
	}
	struct jtok *t = &l->t[l->n++];
	memset(t, 0, sizeof *t);
	t->type = type;
	t->line = l->line;
	return t;
}

static int count_nl(const char *p, size_t n)
{
	int c = 0;
	for (size_t i = 0; i < n; i++)
		c += p[i] == '\n';
	return c;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_id0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_dig(char c) { return c >= '0' && c <= '9'; }

static int hexv(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

static void put_utf8(struct jsb *b, unsigned cp)
{
	char u[4];
	int n;
	if (cp < 0x80) { u[0] = (char)cp; n = 1; }
	else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
	else if (cp < 0x10000) { u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
	else { u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
	jsb_addn(b, u, (size_t)n);
}

static void lex_string(struct lex *l)
{
	char q = l->s[l->pos++];
	struct jsb b = {.a = l->a};
	jsb_addn(&b, "", 0);
	while (1) {
		if (l->pos >= l->len) {
			lfail(l, "unterminated string literal");
		}
		char c = l->s[l->pos++];
		if (c == q)
			break;
		if (c == '\n')
			l->line++;
		if (c != '\\') {
			jsb_addn(&b, &c, 1);
			continue;
		}
		if (l->pos >= l->len)
			continue;
		char e = l->s[l->pos++];
		int nh = 0;
		switch (e) {
		case 'n': jsb_add(&b, "\n"); break;
		case 't': jsb_add(&b, "\t"); break;
		case 'r': jsb_add(&b, "\r"); break;
		case 'a': jsb_add(&b, "\a"); break;
		case 'b': jsb_add(&b, "\b"); break;
		case 'f': jsb_add(&b, "\f"); break;
		case 'v': jsb_add(&b, "\v"); break;
		case '0': jsb_addn(&b, "\0", 1); break;
		case '\\': case '\'': case '"': jsb_addn(&b, &e, 1); break;
		case '\n': l->line++; break;
		case 'x': nh = 2; break;
		case 'u': nh = 4; break;
		case 'U': nh = 8; break;
		default: jsb_addn(&b, "\\", 1); jsb_addn(&b, &e, 1); break;
		}
		if (nh) {
			unsigned cp = 0;
			int i;
			for (i = 0; i < nh && l->pos < l->len && hexv(l->s[l->pos]) >= 0; i++)
				cp = cp * 16 + (unsigned)hexv(l->s[l->pos++]);
			if (i < nh || cp > 0x10FFFF) {
				lfail(l, "bad escape in string literal");
			}
			put_utf8(&b, cp);
		}
	}
	struct jtok *t = push(l, JTT_STRING);
	t->s = jstr_new(l->a, b.p ? b.p : "", b.n);
}

/* Tokens of one {{ }} or {% %} up to its end marker; returns the end's
 * strip mode: '-' or '+' or 0. */
static int lex_expr(struct lex *l, bool block)
{
	const char *end = block ? "%}" : "}}";
	int depth = 0;
	while (1) {
		while (l->pos < l->len && is_ws(l->s[l->pos])) {
			if (l->s[l->pos] == '\n')
				l->line++;
			l->pos++;
		}
		if (l->pos >= l->len)
			lfail(l, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
		const char *p = l->s + l->pos;
		size_t left = l->len - l->pos;
		if (depth == 0) {
			if (left >= 2 && p[0] == end[0] && p[1] == end[1]) {
				l->pos += 2;
				return 0;
			}
			if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == end[0] && p[2] == end[1]) {
				l->pos += 3;
				return p[0];
			}
		}
		char c = p[0];
		if (c == '\'' || c == '"') {
			lex_string(l);
			continue;
		}
		if (is_id0(c)) {
			size_t n = 1;
			while (n < left && (is_id0(p[n]) || is_dig(p[n])))
				n++;
			struct jtok *t = push(l, JTT_NAME);
			t->s = jstr_new(l->a, p, n);
			l->pos += n;
			continue;
		}
		if (is_dig(c)) {
			size_t n = 0;
			bool fl = false;
			while (n < left && (is_dig(p[n]) || p[n] == '_'))
				n++;
			if (n + 1 < left && p[n] == '.' && is_dig(p[n + 1])) {
				fl = true;
				n++;
				while (n < left && (is_dig(p[n]) || p[n] == '_'))
					n++;
			}
			if (n < left && (p[n] == 'e' || p[n] == 'E')) {
				size_t m = n + 1;
				if (m < left && (p[m] == '+' || p[m] == '-'))
					m++;
				if (m < left && is_dig(p[m])) {
					fl = true;
					n = m;
					while (n < left && is_dig(p[n]))
						n++;
				}
			}
			char buf[64];
			size_t k = 0;
			for (size_t i = 0; i < n && k < sizeof buf - 1; i++)
				if (p[i] != '_')
					buf[k++] = p[i];
			buf[k] = 0;
			struct jtok *t = push(l, fl ? JTT_FLOAT : JTT_INT);
			if (fl)
				t->f = strtod(buf, NULL);
			else
				t->i = strtoll(buf, NULL, 10);
			l->pos += n;
			continue;
		}
		static const char *ops2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
		size_t n = 0;
		for (int i = 0; ops2[i]; i++)
			if (left >= 2 && p[0] == ops2[i][0] && p[1] == ops2[i][1])
				n = 2;
		if (!n) {
			if (!strchr("+-*/%~<>=.,:|()[]{}", c))
				lfail(l, "unexpected character in expression");
			n = 1;
			if (c == '(' || c == '[' || c == '{')
				depth++;
			if ((c == ')' || c == ']' || c == '}') && depth > 0)
				depth--;
		}
		struct jtok *t = push(l, JTT_OP);
		t->s = jstr_new(l->a, p, n);
		l->pos += n;
	}
}

/* At "{% raw %}" (l->pos just after "{%" and its sign): emit the text up to
 * "{% endraw %}" and set *endsign from the endraw tag; false if this is no
 * raw tag. */
static bool lex_raw(struct lex *l, int *endsign)
{
	const char *s = l->s;
	size_t p = l->pos;
	while (p < l->len && is_ws(s[p]))
		p++;
	if (l->len - p < 3 || memcmp(s + p, "raw", 3) || (p + 3 < l->len && (is_id0(s[p + 3]) || is_dig(s[p + 3]))))
		return false;
	p += 3;
	while (p < l->len && is_ws(s[p]))
		p++;
	if (p + 2 < l->len && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}') {
		p += 3;
		while (p < l->len && is_ws(s[p]))
			p++;
	} else if (p + 1 < l->len && s[p] == '%' && s[p + 1] == '}') {
		p += 2;
	} else {
		return false;
	}
	size_t body = p;
	for (size_t k = body; k + 1 < l->len; k++) {
		if (s[k] != '{' || s[k + 1] != '%')
			continue;
		size_t q = k + 2;
		char sign = q < l->len && (s[q] == '-' || s[q] == '+') ? s[q] : 0;
		if (sign)
			q++;
		while (q < l->len && is_ws(s[q]))
			q++;
		if (l->len - q < 6 || memcmp(s + q, "endraw", 6))
			continue;
		q += 6;
		while (q < l->len && is_ws(s[q]))
			q++;
		int es = 0;
		if (q < l->len && (s[q] == '-' || s[q] == '+'))
			es = s[q++];
		if (q + 1 >= l->len || s[q] != '%' || s[q + 1] != '}')
			continue;
		size_t end = k;
		if (sign == '-')
			while (end > body && is_ws(s[end - 1]))
				end--;
		if (end > body) {
			struct jtok *t = push(l, JTT_TEXT);
			t->s = jstr_new(l->a, s + body, end - body);
		}
		l->line += count_nl(s + l->pos, q + 2 - l->pos);
		l->pos = q + 2;
		*endsign = es;
		return true;
	}
	lfail(l, "missing {% endraw %}");
}

struct jtok *jinja_lex(struct jarena *a, const char *src, size_t len, size_t *ntok,
		       struct alice_error *err, jmp_buf *jb)
{
	/* normalise newlines, drop one trailing newline */
	char *s = jarena_alloc(a, len + 1);
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			s[n++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			s[n++] = src[i];
		}
	}
	if (n && s[n - 1] == '\n')
		n--;
	struct lex l = {.a = a, .s = s, .len = n, .line = 1, .err = err, .jb = jb};
	bool line_start = true;
	while (l.pos < l.len) {
		/* find the next tag */
		size_t i = l.pos;
		int kind = 0; /* '{', '%', '#' */
		for (; i + 1 < l.len; i++)
			if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
				kind = s[i + 1];
				break;
			}
		if (!kind)
			i = l.len;
		size_t tstart = l.pos, tend = i;
		char sign = kind && i + 2 < l.len ? s[i + 2] : 0;
		if (kind && sign == '-') {
			while (tend > tstart && is_ws(s[tend - 1]))
				tend--;
		} else if (kind && kind != '{' && sign != '+') {
			size_t lp = tend;
			while (lp > tstart && s[lp - 1] != '\n')
				lp--;
			if (lp > tstart || line_start) {
				bool only = true;
				for (size_t k = lp; k < tend; k++)
					if (s[k] != ' ' && s[k] != '\t')
						only = false;
				if (only)
					tend = lp;
			}
		}
		if (tend > tstart) {
			struct jtok *t = push(&l, JTT_TEXT);
			t->s = jstr_new(a, s + tstart, tend - tstart);
		}
		l.line += count_nl(s + tstart, i - tstart);
		if (!kind)
			break;
		l.pos = i + 2;
		if (sign == '-' || sign == '+')
			l.pos++;
		int endsign;
		if (kind == '#') {
			size_t k = l.pos;
			while (k + 1 < l.len && !(s[k] == '#' && s[k + 1] == '}'))
				k++;
			if (k + 1 >= l.len)
				lfail(&l, "missing end of comment tag");
			endsign = k > l.pos && (s[k - 1] == '-' || s[k - 1] == '+') ? s[k - 1] : 0;
			l.line += count_nl(s + l.pos, k - l.pos);
			l.pos = k + 2;
		} else if (kind == '%' && lex_raw(&l, &endsign)) {
			/* {% raw %}...{% endraw %}: the text between, untouched */
		} else {
			push(&l, kind == '{' ? JTT_VAR_BEGIN : JTT_BLOCK_BEGIN);
			endsign = lex_expr(&l, kind == '%');
			push(&l, kind == '{' ? JTT_VAR_END : JTT_BLOCK_END);
		}
		line_start = false;
		if (endsign == '-') {
			size_t st = l.pos;
			while (l.pos < l.len && is_ws(s[l.pos]))
				l.pos++;
			l.line += count_nl(s + st, l.pos - st);
			line_start = l.pos > st && s[l.pos - 1] == '\n';
		} else if (endsign != '+' && kind != '{' && l.pos < l.len && s[l.pos] == '\n') {
			l.pos++;
			l.line++;
			line_start = true;
		}
	}
	push(&l, JTT_EOF);
	*ntok = l.n;
	return l.t;
}
