/* grammar_parse.c — GBNF text -> struct alice_grammar (see grammar.h for the
 * dialect). Recursive descent with a depth limit; repetitions become helper
 * rules (x* -> r ::= x r | ""), so the matcher only sees references, single
 * code points and classes. After parsing, rules are checked: every reference
 * defined, root present, no divergent left recursion, everything reachable
 * from root able to finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/sbuf.h"
#include "grammar_internal.h"
#include "unicode.h"

struct evec {
	struct gelem *v;
	uint32_t n;
	size_t cap;
};

struct prule {
	char *name;
	struct evec body; /* alternatives separated by ALT markers (type END, arg 1) */
	size_t def_off;   /* where defined (user rules) or first referenced */
	uint32_t origin;  /* user rule this helper was generated for */
	int defined;
	int user;
	uint32_t n_gen; /* helper counter for naming */
};

struct parser {
	const char *s;
	size_t len, pos;
	struct prule *rules;
	uint32_t n_rules;
	size_t cap_rules;
	uint32_t *ranges;
	uint32_t n_ranges;
	size_t cap_ranges;
	struct gclass *classes;
	uint32_t n_classes;
	size_t cap_classes;
	uint64_t total_elems;
	uint32_t *uhash; /* user rules by name: open addressing, rule index + 1 (0 = empty) */
	uint32_t cap_uhash, n_uhash;
	struct alice_error *err;
	struct alice_grammar_errpos *epos;
	enum alice_status st;
	int failed;
};

#define ALT_MARK 1u /* GELEM_END with arg 1 separates alternatives in a body */

static void where(const struct parser *p, size_t off, int *line, int *col)
{
	int l = 1, c = 1;
	if (off > p->len)
		off = p->len;
	for (size_t i = 0; i < off; i++) {
		if (p->s[i] == '\n') {
			l++;
			c = 1;
		} else {
			c++;
		}
	}
	*line = l;
	*col = c;
}

static void quote(const struct parser *p, size_t off, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = off; i < p->len && i < off + 16 && o + 5 < cap; i++) {
		unsigned char ch = (unsigned char)p->s[i];
		if (ch == '\n')
			break;
		if (ch >= 0x20 && ch < 0x7f && ch != '\'')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02X", ch);
	}
	out[o] = 0;
}

__attribute__((format(printf, 4, 5))) static int fail_at(struct parser *p, size_t off,
							  enum alice_status st, const char *fmt, ...)
{
	if (p->failed)
		return -1;
	p->failed = 1;
	p->st = st;
	char msg[256], q[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (off == (size_t)-1) {
		if (p->epos)
			p->epos->line = p->epos->col = 0;
		alice_error_set(p->err, "grammar: %s", msg);
		return -1;
	}
	int line, col;
	where(p, off, &line, &col);
	if (p->epos) {
		p->epos->line = line;
		p->epos->col = col;
	}
	quote(p, off, q, sizeof q);
	if (off >= p->len)
		alice_error_set(p->err, "grammar: line %d:%d: %s at end of input", line, col, msg);
	else
		alice_error_set(p->err, "grammar: line %d:%d: %s near '%s'", line, col, msg, q);
	return -1;
}

static int nomem(struct parser *p)
{
	return fail_at(p, (size_t)-1, ALICE_ERR_NOMEM, "out of memory");
}

static int evec_push(struct parser *p, struct evec *e, uint32_t type, uint32_t arg)
{
	if (++p->total_elems > ALICE_GRAMMAR_MAX_ELEMENTS)
		return fail_at(p, p->pos, ALICE_ERR_INVALID,
			       "grammar too large (more than %d elements after expanding repetitions)",
			       ALICE_GRAMMAR_MAX_ELEMENTS);
	if (!alice_grow((void **)&e->v, &e->cap, (size_t)e->n + 1, sizeof *e->v))
		return nomem(p);
	e->v[e->n].type = type;
	e->v[e->n].arg = arg;
	e->n++;
	return 0;
}

/* Add a rule; returns its index or -1. name is copied. */
static int64_t add_rule(struct parser *p, const char *name, size_t nlen, size_t off, uint32_t origin,
			int user)
{
	if (!alice_grow((void **)&p->rules, &p->cap_rules, (size_t)p->n_rules + 1, sizeof *p->rules))
		return nomem(p);
	struct prule *r = &p->rules[p->n_rules];
	memset(r, 0, sizeof *r);
	r->name = malloc(nlen + 1);
	if (!r->name)
		return nomem(p);
	memcpy(r->name, name, nlen);
	r->name[nlen] = 0;
	r->def_off = off;
	r->user = user;
	r->origin = user ? p->n_rules : origin;
	return p->n_rules++;
}

static uint32_t name_hash(const char *name, size_t nlen)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < nlen; i++)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	return h;
}

/* Insert rule `idx` (a user rule) into the name table, growing it at 1/2 load. */
static int uhash_insert(struct parser *p, uint32_t idx)
{
	if ((uint64_t)(p->n_uhash + 1) * 2 > p->cap_uhash) {
		uint32_t nc = p->cap_uhash ? p->cap_uhash * 2 : 256;
		uint32_t *nt = calloc(nc, sizeof *nt);
		if (!nt)
			return nomem(p);
		for (uint32_t i = 0; i < p->cap_uhash; i++) {
			if (!p->uhash[i])
				continue;
			const char *nm = p->rules[p->uhash[i] - 1].name;
			uint32_t h = name_hash(nm, strlen(nm)) & (nc - 1);
			while (nt[h])
				h = (h + 1) & (nc - 1);
			nt[h] = p->uhash[i];
		}
		free(p->uhash);
		p->uhash = nt;
		p->cap_uhash = nc;
	}
	const char *nm = p->rules[idx].name;
	uint32_t h = name_hash(nm, strlen(nm)) & (p->cap_uhash - 1);
	while (p->uhash[h])
		h = (h + 1) & (p->cap_uhash - 1);
	p->uhash[h] = idx + 1;
	p->n_uhash++;
	return 0;
}

/* O(1) expected: a hash lookup (a linear scan made big grammars quadratic). */
static int64_t find_or_add_user_rule(struct parser *p, const char *name, size_t nlen, size_t off)
{
	if (p->cap_uhash) {
		for (uint32_t h = name_hash(name, nlen) & (p->cap_uhash - 1); p->uhash[h];
		     h = (h + 1) & (p->cap_uhash - 1)) {
			const struct prule *r = &p->rules[p->uhash[h] - 1];
			if (strncmp(r->name, name, nlen) == 0 && r->name[nlen] == 0)
				return p->uhash[h] - 1;
		}
	}
	int64_t idx = add_rule(p, name, nlen, off, 0, 1);
	if (idx < 0 || uhash_insert(p, (uint32_t)idx) < 0)
		return -1;
	return idx;
}

static int64_t add_helper(struct parser *p, uint32_t origin, size_t off)
{
	char nm[160];
	struct prule *o = &p->rules[origin];
	int k = snprintf(nm, sizeof nm, "%.120s_%u", o->name, o->n_gen++);
	return add_rule(p, nm, (size_t)k, off, origin, 0);
}

static int is_word(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static void skip_space(struct parser *p, int newline_ok)
{
	while (p->pos < p->len) {
		char c = p->s[p->pos];
		if (c == ' ' || c == '\t') {
			p->pos++;
		} else if (c == '#') {
			while (p->pos < p->len && p->s[p->pos] != '\n' && p->s[p->pos] != '\r')
				p->pos++;
		} else if (newline_ok && (c == '\n' || c == '\r')) {
			p->pos++;
		} else {
			break;
		}
	}
}

/* Decode one UTF-8 character of grammar text; -1 when invalid. */
static int64_t utf8_at(struct parser *p, size_t *adv)
{
	const unsigned char *s = (const unsigned char *)p->s + p->pos;
	size_t left = p->len - p->pos;
	unsigned c = s[0];
	uint32_t cp, min;
	size_t n;
	if (c < 0x80) {
		*adv = 1;
		return c;
	} else if (c >= 0xC2 && c <= 0xDF) {
		n = 2, cp = c & 0x1F, min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3, cp = c & 0x0F, min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4, cp = c & 0x07, min = 0x10000;
	} else {
		return -1;
	}
	if (left < n)
		return -1;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	*adv = n;
	return cp;
}

/* One character of a literal or class (escape or UTF-8); advances. -1 on error. */
static int64_t parse_char(struct parser *p)
{
	size_t start = p->pos;
	if (p->s[p->pos] == '\\') {
		if (p->pos + 1 >= p->len)
			return fail_at(p, start, ALICE_ERR_INVALID, "bad escape (input ends)");
		char e = p->s[p->pos + 1];
		int nhex = 0;
		switch (e) {
		case 'n': p->pos += 2; return '\n';
		case 'r': p->pos += 2; return '\r';
		case 't': p->pos += 2; return '\t';
		case '\\': p->pos += 2; return '\\';
		case '"': p->pos += 2; return '"';
		case '[': p->pos += 2; return '[';
		case ']': p->pos += 2; return ']';
		case 'x': nhex = 2; break;
		case 'u': nhex = 4; break;
		case 'U': nhex = 8; break;
		default:
			return fail_at(p, start, ALICE_ERR_INVALID, "bad escape '\\%c'",
				       (e >= 0x20 && e < 0x7f) ? e : '?');
		}
		uint64_t v = 0;
		for (int i = 0; i < nhex; i++) {
			size_t q = p->pos + 2 + (size_t)i;
			int h = q < p->len ? alice_hex_digit(p->s[q]) : -1;
			if (h < 0)
				return fail_at(p, start, ALICE_ERR_INVALID,
					       "bad escape: \\%c needs %d hex digits", e, nhex);
			v = v * 16 + (uint64_t)h;
		}
		if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
			return fail_at(p, start, ALICE_ERR_INVALID,
				       "bad escape: U+%llX is not a valid code point",
				       (unsigned long long)v);
		p->pos += 2 + (size_t)nhex;
		return (int64_t)v;
	}
	size_t adv;
	int64_t cp = utf8_at(p, &adv);
	if (cp < 0)
		return fail_at(p, start, ALICE_ERR_INVALID, "invalid UTF-8 in grammar text");
	p->pos += adv;
	return cp;
}

static int push_range(struct parser *p, uint32_t lo, uint32_t hi)
{
	if (!alice_grow((void **)&p->ranges, &p->cap_ranges, (size_t)p->n_ranges + 2, sizeof *p->ranges))
		return nomem(p);
	p->ranges[p->n_ranges++] = lo;
	p->ranges[p->n_ranges++] = hi;
	return 0;
}

static int64_t new_class(struct parser *p, uint32_t neg)
{
	if (!alice_grow((void **)&p->classes, &p->cap_classes, (size_t)p->n_classes + 1, sizeof *p->classes))
		return nomem(p);
	struct gclass *c = &p->classes[p->n_classes];
	c->off = p->n_ranges;
	c->n = 0;
	c->neg = neg;
	return p->n_classes++;
}

static int cmp_range(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Sort a class's ranges and merge overlapping or adjacent ones (the same set
 * of code points), so matching is a binary search and a negated class one
 * pass: a class of thousands of ranges cannot make each step quadratic. The
 * class's ranges are the last ones pushed. */
static void normalize_class(struct parser *p, struct gclass *c)
{
	if (c->n < 2)
		return;
	uint32_t *r = p->ranges + c->off;
	qsort(r, c->n, 2 * sizeof *r, cmp_range);
	uint32_t o = 0;
	for (uint32_t i = 1; i < c->n; i++) {
		if (r[2 * i] <= r[2 * o + 1] || r[2 * i] - 1 == r[2 * o + 1]) {
			if (r[2 * i + 1] > r[2 * o + 1])
				r[2 * o + 1] = r[2 * i + 1];
		} else {
			o++;
			r[2 * o] = r[2 * i];
			r[2 * o + 1] = r[2 * i + 1];
		}
	}
	c->n = o + 1;
	p->n_ranges = c->off + 2 * c->n;
}

static int parse_class(struct parser *p, struct evec *e)
{
	size_t open = p->pos;
	p->pos++; /* [ */
	uint32_t neg = 0;
	if (p->pos < p->len && p->s[p->pos] == '^') {
		neg = 1;
		p->pos++;
	}
	int64_t ci = new_class(p, neg);
	if (ci < 0)
		return -1;
	for (;;) {
		if (p->pos >= p->len || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')
			return fail_at(p, open, ALICE_ERR_INVALID, "unterminated character class: missing ']'");
		if (p->s[p->pos] == ']')
			break;
		size_t at = p->pos;
		int64_t lo = parse_char(p);
		if (lo < 0)
			return -1;
		int64_t hi = lo;
		if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
			p->pos++;
			if (p->s[p->pos] == '\n' || p->s[p->pos] == '\r')
				continue; /* reported as unterminated above */
			hi = parse_char(p);
			if (hi < 0)
				return -1;
			if (hi < lo)
				return fail_at(p, at, ALICE_ERR_INVALID, "bad class range: end before start");
		}
		if (push_range(p, (uint32_t)lo, (uint32_t)hi) < 0)
			return -1;
		p->classes[ci].n++;
	}
	p->pos++; /* ] */
	normalize_class(p, &p->classes[ci]);
	if (!neg && p->classes[ci].n == 0)
		return fail_at(p, open, ALICE_ERR_INVALID, "empty character class '[]' matches nothing");
	return evec_push(p, e, GELEM_CLASS, (uint32_t)ci);
}

static int parse_literal(struct parser *p, struct evec *e)
{
	size_t open = p->pos;
	p->pos++;
	for (;;) {
		if (p->pos >= p->len || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')
			return fail_at(p, open, ALICE_ERR_INVALID, "unterminated string literal: missing '\"'");
		if (p->s[p->pos] == '"')
			break;
		int64_t cp = parse_char(p);
		if (cp < 0)
			return -1;
		if (evec_push(p, e, GELEM_CHAR, (uint32_t)cp) < 0)
			return -1;
	}
	p->pos++;
	return 0;
}

static int parse_uint(struct parser *p, uint32_t *out)
{
	size_t start = p->pos;
	uint64_t v = 0;
	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
		v = v * 10 + (uint64_t)(p->s[p->pos] - '0');
		if (v > 1000000)
			return fail_at(p, start, ALICE_ERR_INVALID, "repetition bound too large");
		p->pos++;
	}
	if (p->pos == start)
		return fail_at(p, start, ALICE_ERR_INVALID, "expected a number in repetition bounds");
	*out = (uint32_t)v;
	return 0;
}

/* Move e->v[from..n) into a new helper rule; leave one REF in their place. */
static int wrap_symbol(struct parser *p, struct evec *e, uint32_t from, uint32_t origin)
{
	int64_t r = add_helper(p, origin, p->pos);
	if (r < 0)
		return -1;
	struct evec *b = &p->rules[r].body;
	for (uint32_t i = from; i < e->n; i++)
		if (evec_push(p, b, e->v[i].type, e->v[i].arg) < 0)
			return -1;
	if (evec_push(p, b, GELEM_END, 0) < 0)
		return -1;
	p->total_elems -= e->n - from;
	e->n = from;
	p->rules[r].defined = 1;
	return evec_push(p, e, GELEM_REF, (uint32_t)r);
}

/* r ::= s r | "" */
static int64_t star_rule(struct parser *p, struct gelem s, uint32_t origin)
{
	int64_t r = add_helper(p, origin, p->pos);
	if (r < 0)
		return -1;
	struct evec *b = &p->rules[r].body;
	if (evec_push(p, b, s.type, s.arg) < 0 || evec_push(p, b, GELEM_REF, (uint32_t)r) < 0 ||
	    evec_push(p, b, GELEM_END, ALT_MARK) < 0 || evec_push(p, b, GELEM_END, 0) < 0)
		return -1;
	p->rules[r].defined = 1;
	return r;
}

static int parse_repetition(struct parser *p, struct evec *e, int64_t last, uint32_t origin)
{
	size_t op_at = p->pos;
	char op = p->s[p->pos];
	if (last < 0)
		return fail_at(p, op_at, ALICE_ERR_INVALID, "repetition '%c' without a preceding symbol", op);
	uint32_t min = 0, max = 0;
	int unbounded = 0;
	p->pos++;
	if (op == '*') {
		unbounded = 1;
	} else if (op == '+') {
		min = 1;
		unbounded = 1;
	} else if (op == '?') {
		max = 1;
	} else { /* { */
		skip_space(p, 0);
		if (parse_uint(p, &min) < 0)
			return -1;
		skip_space(p, 0);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			skip_space(p, 0);
			if (p->pos < p->len && p->s[p->pos] == '}') {
				unbounded = 1;
			} else if (parse_uint(p, &max) < 0) {
				return -1;
			}
			skip_space(p, 0);
		} else {
			max = min;
		}
		if (p->pos >= p->len || p->s[p->pos] != '}')
			return fail_at(p, op_at, ALICE_ERR_INVALID, "unterminated repetition bounds: missing '}'");
		p->pos++;
		if (!unbounded && max < min)
			return fail_at(p, op_at, ALICE_ERR_INVALID,
				       "invalid repetition bounds: max %u < min %u", max, min);
	}
	if ((uint32_t)last == e->n)
		return 0; /* repeating the empty literal "" is still empty */
	if (e->n - (uint32_t)last > 1 && wrap_symbol(p, e, (uint32_t)last, origin) < 0)
		return -1;
	struct gelem s = e->v[last];
	e->n = (uint32_t)last;
	p->total_elems--;
	for (uint32_t i = 0; i < min; i++)
		if (evec_push(p, e, s.type, s.arg) < 0)
			return -1;
	if (unbounded) {
		int64_t r = star_rule(p, s, origin);
		if (r < 0 || evec_push(p, e, GELEM_REF, (uint32_t)r) < 0)
			return -1;
	} else if (max > min) {
		/* opt_1 ::= s | "" ; opt_k ::= s opt_{k-1} | "" */
		int64_t prev = -1;
		for (uint32_t k = 0; k < max - min; k++) {
			int64_t r = add_helper(p, origin, op_at);
			if (r < 0)
				return -1;
			struct evec *b = &p->rules[r].body;
			if (evec_push(p, b, s.type, s.arg) < 0)
				return -1;
			if (prev >= 0 && evec_push(p, b, GELEM_REF, (uint32_t)prev) < 0)
				return -1;
			if (evec_push(p, b, GELEM_END, ALT_MARK) < 0 || evec_push(p, b, GELEM_END, 0) < 0)
				return -1;
			p->rules[r].defined = 1;
			prev = r;
		}
		if (evec_push(p, e, GELEM_REF, (uint32_t)prev) < 0)
			return -1;
	}
	return 0;
}

static int parse_alternates(struct parser *p, struct evec *e, int depth, int nested, uint32_t origin);

static int parse_sequence(struct parser *p, struct evec *e, int depth, int nested, uint32_t origin)
{
	int64_t last = -1;
	while (p->pos < p->len && !p->failed) {
		char c = p->s[p->pos];
		if (c == '"') {
			last = e->n;
			if (parse_literal(p, e) < 0)
				return -1;
		} else if (c == '[') {
			last = e->n;
			if (parse_class(p, e) < 0)
				return -1;
		} else if (c == '.') {
			last = e->n;
			int64_t ci = new_class(p, 1);
			if (ci < 0 || evec_push(p, e, GELEM_CLASS, (uint32_t)ci) < 0)
				return -1;
			p->pos++;
		} else if (is_word(c)) {
			size_t st = p->pos;
			while (p->pos < p->len && is_word(p->s[p->pos]))
				p->pos++;
			int64_t r = find_or_add_user_rule(p, p->s + st, p->pos - st, st);
			if (r < 0)
				return -1;
			last = e->n;
			if (evec_push(p, e, GELEM_REF, (uint32_t)r) < 0)
				return -1;
		} else if (c == '(') {
			size_t open = p->pos;
			if (depth >= ALICE_GRAMMAR_MAX_DEPTH)
				return fail_at(p, open, ALICE_ERR_INVALID, "nesting too deep (more than %d)",
					       ALICE_GRAMMAR_MAX_DEPTH);
			p->pos++;
			skip_space(p, 1);
			int64_t r = add_helper(p, origin, open);
			if (r < 0)
				return -1;
			/* The body vector may move while nested rules are added: parse into a local. */
			struct evec body = {0};
			int rc = parse_alternates(p, &body, depth + 1, 1, origin);
			p->rules[r].body = body;
			p->rules[r].defined = 1;
			if (rc < 0)
				return -1;
			if (p->pos >= p->len || p->s[p->pos] != ')')
				return fail_at(p, p->pos >= p->len ? open : p->pos, ALICE_ERR_INVALID,
					       p->pos >= p->len ? "unbalanced '(': missing ')'"
								: "expected ')'");
			p->pos++;
			last = e->n;
			if (evec_push(p, e, GELEM_REF, (uint32_t)r) < 0)
				return -1;
		} else if (c == '*' || c == '+' || c == '?' || c == '{') {
			if (parse_repetition(p, e, last, origin) < 0)
				return -1;
			if ((uint32_t)last > e->n)
				last = -1;
		} else {
			break;
		}
		skip_space(p, nested);
	}
	return p->failed ? -1 : 0;
}

static int parse_alternates(struct parser *p, struct evec *e, int depth, int nested, uint32_t origin)
{
	if (parse_sequence(p, e, depth, nested, origin) < 0)
		return -1;
	while (p->pos < p->len && p->s[p->pos] == '|') {
		if (evec_push(p, e, GELEM_END, ALT_MARK) < 0)
			return -1;
		p->pos++;
		skip_space(p, 1);
		if (parse_sequence(p, e, depth, nested, origin) < 0)
			return -1;
	}
	return evec_push(p, e, GELEM_END, 0);
}

static int parse_rule(struct parser *p)
{
	size_t st = p->pos;
	if (!is_word(p->s[p->pos])) {
		if (p->s[p->pos] == '|')
			return fail_at(p, st, ALICE_ERR_INVALID,
				       "'|' at the start of a line: a newline ends a rule (wrap multi-line alternatives in ( ))");
		if (p->s[p->pos] == ')')
			return fail_at(p, st, ALICE_ERR_INVALID, "unbalanced ')'");
		return fail_at(p, st, ALICE_ERR_INVALID, "expected a rule name");
	}
	while (p->pos < p->len && is_word(p->s[p->pos]))
		p->pos++;
	int64_t r = find_or_add_user_rule(p, p->s + st, p->pos - st, st);
	if (r < 0)
		return -1;
	if (p->rules[r].defined)
		return fail_at(p, st, ALICE_ERR_INVALID, "rule '%s' defined twice", p->rules[r].name);
	p->rules[r].defined = 1;
	p->rules[r].def_off = st;
	skip_space(p, 0);
	if (p->pos + 3 > p->len || memcmp(p->s + p->pos, "::=", 3) != 0)
		return fail_at(p, p->pos, ALICE_ERR_INVALID, "expected '::=' after rule name");
	p->pos += 3;
	skip_space(p, 1);
	struct evec body = {0};
	int rc = parse_alternates(p, &body, 0, 0, (uint32_t)r);
	p->rules[r].body = body;
	if (rc < 0)
		return -1;
	if (p->pos < p->len && p->s[p->pos] != '\n' && p->s[p->pos] != '\r') {
		if (p->s[p->pos] == ')')
			return fail_at(p, p->pos, ALICE_ERR_INVALID, "unbalanced ')'");
		if (p->s[p->pos] == ']')
			return fail_at(p, p->pos, ALICE_ERR_INVALID, "unbalanced ']'");
		return fail_at(p, p->pos, ALICE_ERR_INVALID, "unexpected character");
	}
	return 0;
}

/* ---- checks on the finished rule set ------------------------------------ */

/* Worklist fixpoint: a rule is marked when one alternative has all its
 * references marked (and, for `nullable`, no terminals). */
static int fixpoint(const struct alice_grammar *g, int terminals_block, uint8_t *mark)
{
	uint32_t n_alts = g->alt_off[g->n_rules];
	uint32_t *need = calloc(n_alts ? n_alts : 1, sizeof *need);
	uint32_t *alt_rule = malloc((n_alts ? n_alts : 1) * sizeof *alt_rule);
	uint32_t *occ_off = calloc(g->n_rules + 1, sizeof *occ_off);
	uint32_t *queue = malloc((g->n_rules ? g->n_rules : 1) * sizeof *queue);
	uint32_t *occ = NULL;
	int rc = -1;
	if (!need || !alt_rule || !occ_off || !queue)
		goto out;
	memset(mark, 0, g->n_rules);
	for (uint32_t r = 0; r < g->n_rules; r++)
		for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++)
			alt_rule[a] = r;
	uint64_t n_occ = 0;
	for (uint32_t a = 0; a < n_alts; a++) {
		uint32_t k = 0;
		int blocked = 0;
		for (const struct gelem *e = &g->elems[g->alts[a]]; e->type != GELEM_END; e++) {
			if (e->type == GELEM_REF) {
				k++;
				occ_off[e->arg + 1]++;
				n_occ++;
			} else if (terminals_block) {
				blocked = 1;
			}
		}
		need[a] = blocked ? UINT32_MAX : k;
	}
	for (uint32_t r = 0; r < g->n_rules; r++)
		occ_off[r + 1] += occ_off[r];
	occ = malloc((n_occ ? n_occ : 1) * sizeof *occ);
	uint32_t *fill = calloc(g->n_rules + 1, sizeof *fill);
	if (!occ || !fill) {
		free(fill);
		goto out;
	}
	for (uint32_t a = 0; a < n_alts; a++)
		for (const struct gelem *e = &g->elems[g->alts[a]]; e->type != GELEM_END; e++)
			if (e->type == GELEM_REF)
				occ[occ_off[e->arg] + fill[e->arg]++] = a;
	free(fill);
	uint32_t qh = 0, qt = 0;
	for (uint32_t a = 0; a < n_alts; a++) {
		uint32_t r = alt_rule[a];
		if (need[a] == 0 && !mark[r]) {
			mark[r] = 1;
			queue[qt++] = r;
		}
	}
	while (qh < qt) {
		uint32_t s = queue[qh++];
		for (uint32_t i = occ_off[s]; i < occ_off[s + 1]; i++) {
			uint32_t a = occ[i];
			if (need[a] == UINT32_MAX || need[a] == 0)
				continue;
			if (--need[a] == 0 && !mark[alt_rule[a]]) {
				mark[alt_rule[a]] = 1;
				queue[qt++] = alt_rule[a];
			}
		}
	}
	rc = 0;
out:
	free(need);
	free(alt_rule);
	free(occ_off);
	free(queue);
	free(occ);
	return rc;
}

struct ledge {
	uint32_t from, to, tail;
};

/* Left recursion that diverges: a cycle of "leftmost reference" edges that
 * contains an edge not in tail position (a tail-only cycle such as
 * r ::= x r | "" with nullable x is a loop, which the matcher handles).
 * Kosaraju's SCC with explicit stacks; returns a rule index or -1, or -2 on OOM. */
static int64_t find_left_recursion(const struct alice_grammar *g, const uint8_t *nullable)
{
	uint32_t nr = g->n_rules;
	struct ledge *ed = NULL;
	size_t ne = 0, ce = 0;
	int64_t res = -2;
	uint32_t *off = NULL, *adj = NULL, *roff = NULL, *radj = NULL, *order = NULL, *comp = NULL,
		 *stk = NULL, *it = NULL;
	for (uint32_t r = 0; r < nr; r++) {
		for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
			for (const struct gelem *e = &g->elems[g->alts[a]]; e->type == GELEM_REF; e++) {
				if (ne == ce) {
					ce = ce ? ce * 2 : 64;
					struct ledge *n2 = realloc(ed, ce * sizeof *n2);
					if (!n2)
						goto out;
					ed = n2;
				}
				ed[ne].from = r;
				ed[ne].to = e->arg;
				ed[ne].tail = e[1].type == GELEM_END;
				ne++;
				if (!nullable[e->arg])
					break;
			}
		}
	}
	off = calloc(nr + 1, sizeof *off);
	roff = calloc(nr + 1, sizeof *roff);
	adj = malloc((ne ? ne : 1) * sizeof *adj);
	radj = malloc((ne ? ne : 1) * sizeof *radj);
	order = malloc((nr ? nr : 1) * sizeof *order);
	comp = malloc((nr ? nr : 1) * sizeof *comp);
	stk = malloc((nr ? nr : 1) * sizeof *stk);
	it = malloc((nr ? nr : 1) * sizeof *it);
	if (!off || !roff || !adj || !radj || !order || !comp || !stk || !it)
		goto out;
	for (size_t i = 0; i < ne; i++) {
		off[ed[i].from + 1]++;
		roff[ed[i].to + 1]++;
	}
	for (uint32_t r = 0; r < nr; r++) {
		off[r + 1] += off[r];
		roff[r + 1] += roff[r];
	}
	memset(it, 0, nr * sizeof *it);
	for (size_t i = 0; i < ne; i++) {
		adj[off[ed[i].from] + it[ed[i].from]++] = ed[i].to;
	}
	memset(it, 0, nr * sizeof *it);
	for (size_t i = 0; i < ne; i++)
		radj[roff[ed[i].to] + it[ed[i].to]++] = ed[i].from;
	/* pass 1: finish order */
	uint32_t n_order = 0;
	for (uint32_t r = 0; r < nr; r++)
		comp[r] = UINT32_MAX;
	uint8_t *seen = calloc(nr ? nr : 1, 1);
	if (!seen)
		goto out;
	for (uint32_t s = 0; s < nr; s++) {
		if (seen[s])
			continue;
		uint32_t sp = 0;
		stk[sp++] = s;
		seen[s] = 1;
		it[s] = off[s];
		while (sp) {
			uint32_t u = stk[sp - 1];
			if (it[u] < off[u + 1]) {
				uint32_t v = adj[it[u]++];
				if (!seen[v]) {
					seen[v] = 1;
					it[v] = off[v];
					stk[sp++] = v;
				}
			} else {
				order[n_order++] = u;
				sp--;
			}
		}
	}
	free(seen);
	/* pass 2: components on the reverse graph in reverse finish order */
	uint32_t nc = 0;
	for (uint32_t k = nr; k-- > 0;) {
		uint32_t s = order[k];
		if (comp[s] != UINT32_MAX)
			continue;
		uint32_t sp = 0;
		stk[sp++] = s;
		comp[s] = nc;
		while (sp) {
			uint32_t u = stk[--sp];
			for (uint32_t i = roff[u]; i < roff[u + 1]; i++) {
				uint32_t v = radj[i];
				if (comp[v] == UINT32_MAX) {
					comp[v] = nc;
					stk[sp++] = v;
				}
			}
		}
		nc++;
	}
	res = -1;
	for (size_t i = 0; i < ne; i++) {
		if (!ed[i].tail && comp[ed[i].from] == comp[ed[i].to]) {
			res = ed[i].from;
			break;
		}
	}
out:
	free(ed);
	free(off);
	free(roff);
	free(adj);
	free(radj);
	free(order);
	free(comp);
	free(stk);
	free(it);
	return res;
}

/* Rules reachable from root (iterative). */
static int reachable(const struct alice_grammar *g, uint8_t *mark)
{
	uint32_t *stk = malloc((g->n_rules + 1) * sizeof *stk);
	if (!stk)
		return -1;
	memset(mark, 0, g->n_rules);
	uint32_t sp = 0;
	stk[sp++] = g->root;
	mark[g->root] = 1;
	while (sp) {
		uint32_t r = stk[--sp];
		for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++)
			for (const struct gelem *e = &g->elems[g->alts[a]]; e->type != GELEM_END; e++)
				if (e->type == GELEM_REF && !mark[e->arg]) {
					mark[e->arg] = 1;
					stk[sp++] = e->arg;
				}
	}
	free(stk);
	return 0;
}

struct alice_grammar *alice_grammar_retain(struct alice_grammar *g)
{
	if (g)
		__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
	return g;
}

size_t alice_grammar_source_bytes(const struct alice_grammar *g)
{
	return g ? g->source_bytes : 0;
}

void alice_grammar_free(struct alice_grammar *g)
{
	if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	if (g->names)
		for (uint32_t i = 0; i < g->n_rules; i++)
			free(g->names[i]);
	free(g->names);
	free(g->elems);
	free(g->alt_off);
	free(g->alts);
	free(g->classes);
	free(g->ranges);
	free(g);
}

size_t alice_grammar_rule_count(const struct alice_grammar *g)
{
	return g ? g->n_rules : 0;
}

/* Flatten the parser's rules into the compiled form (takes the names). */
static int build(struct parser *p, struct alice_grammar **out)
{
	struct alice_grammar *g = calloc(1, sizeof *g);
	if (!g)
		return nomem(p);
	g->refs = 1;
	g->source_bytes = p->len;
	g->n_rules = p->n_rules;
	uint64_t n_el = 0, n_alts = 0;
	for (uint32_t r = 0; r < p->n_rules; r++) {
		n_el += p->rules[r].body.n;
		for (uint32_t i = 0; i < p->rules[r].body.n; i++)
			if (p->rules[r].body.v[i].type == GELEM_END)
				n_alts++;
	}
	g->elems = malloc((n_el + 1) * sizeof *g->elems);
	g->alts = malloc((n_alts + 1) * sizeof *g->alts);
	g->alt_off = malloc((p->n_rules + 1) * sizeof *g->alt_off);
	g->names = calloc(p->n_rules + 1, sizeof *g->names);
	if (!g->elems || !g->alts || !g->alt_off || !g->names) {
		alice_grammar_free(g);
		return nomem(p);
	}
	uint32_t ne = 0, na = 0;
	for (uint32_t r = 0; r < p->n_rules; r++) {
		g->alt_off[r] = na;
		g->alts[na++] = ne;
		struct evec *b = &p->rules[r].body;
		for (uint32_t i = 0; i < b->n; i++) {
			g->elems[ne].type = b->v[i].type;
			g->elems[ne].arg = b->v[i].type == GELEM_END ? 0 : b->v[i].arg;
			ne++;
			if (b->v[i].type == GELEM_END && b->v[i].arg == ALT_MARK)
				g->alts[na++] = ne;
		}
		g->names[r] = p->rules[r].name;
		p->rules[r].name = NULL;
	}
	g->alt_off[p->n_rules] = na;
	g->n_elems = ne;
	g->classes = p->classes;
	g->n_classes = p->n_classes;
	g->ranges = p->ranges;
	p->classes = NULL;
	p->ranges = NULL;
	*out = g;
	return 0;
}

enum alice_status alice_grammar_parse(const char *text, size_t len, struct alice_grammar **out,
				      struct alice_error *err, struct alice_grammar_errpos *epos)
{
	struct parser p = {.s = text, .len = text ? len : 0, .err = err, .epos = epos};
	struct alice_grammar *g = NULL;
	uint8_t *m1 = NULL, *m2 = NULL;
	*out = NULL;
	if (epos)
		epos->line = epos->col = 0;
	skip_space(&p, 1);
	if (p.pos >= p.len) {
		fail_at(&p, (size_t)-1, ALICE_ERR_INVALID, "empty grammar (no rules)");
		goto fail;
	}
	while (p.pos < p.len) {
		if (parse_rule(&p) < 0)
			goto fail;
		skip_space(&p, 1);
	}
	int64_t root = -1;
	for (uint32_t r = 0; r < p.n_rules; r++) {
		if (p.rules[r].user && !p.rules[r].defined) {
			fail_at(&p, p.rules[r].def_off, ALICE_ERR_INVALID, "undefined rule '%s'",
				p.rules[r].name);
			goto fail;
		}
		if (p.rules[r].user && strcmp(p.rules[r].name, "root") == 0)
			root = r;
	}
	if (root < 0) {
		fail_at(&p, (size_t)-1, ALICE_ERR_INVALID, "missing 'root' rule");
		goto fail;
	}
	uint32_t *origin = malloc((p.n_rules + 1) * sizeof *origin);
	size_t *def_off = malloc((p.n_rules + 1) * sizeof *def_off);
	if (!origin || !def_off) {
		free(origin);
		free(def_off);
		nomem(&p);
		goto fail;
	}
	for (uint32_t r = 0; r < p.n_rules; r++) {
		origin[r] = p.rules[r].origin;
		def_off[r] = p.rules[r].def_off;
	}
	int brc = build(&p, &g);
	if (brc < 0) {
		free(origin);
		free(def_off);
		goto fail;
	}
	g->root = (uint32_t)root;
	m1 = malloc(g->n_rules + 1);
	m2 = malloc(g->n_rules + 1);
	int64_t lr = -2;
	if (m1 && m2 && fixpoint(g, 1, m1) == 0)
		lr = find_left_recursion(g, m1);
	if (lr == -2) {
		nomem(&p);
	} else if (lr >= 0) {
		uint32_t o = origin[lr];
		fail_at(&p, def_off[o], ALICE_ERR_INVALID, "left recursion in rule '%s'", g->names[o]);
	} else if (fixpoint(g, 0, m1) < 0 || reachable(g, m2) < 0) {
		nomem(&p);
	} else {
		for (uint32_t r = 0; r < g->n_rules; r++) {
			if (m2[r] && !m1[r]) {
				uint32_t o = origin[r];
				fail_at(&p, def_off[o], ALICE_ERR_INVALID,
					"rule '%s' can never finish (every alternative recurses forever)",
					g->names[o]);
				break;
			}
		}
	}
	free(origin);
	free(def_off);
	if (p.failed)
		goto fail;
	free(m1);
	free(m2);
	for (uint32_t r = 0; r < p.n_rules; r++)
		free(p.rules[r].body.v);
	free(p.rules);
	free(p.uhash);
	*out = g;
	return ALICE_OK;
fail:
	free(m1);
	free(m2);
	alice_grammar_free(g);
	for (uint32_t r = 0; r < p.n_rules; r++) {
		free(p.rules[r].name);
		free(p.rules[r].body.v);
	}
	free(p.rules);
	free(p.ranges);
	free(p.classes);
	free(p.uhash);
	return p.st ? p.st : ALICE_ERR_INVALID;
}
