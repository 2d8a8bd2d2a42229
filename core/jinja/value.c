/* value.c — the arena and the value model of the Jinja interpreter: Python's
 * str(), repr(), ==, ordering and truthiness, json.dumps for tojson, and the
 * conversion of a json-c context. */
#include "jinja/jinja_internal.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jblock { struct jblock *next; size_t cap, used; _Alignas(16) unsigned char mem[]; };

void *jarena_alloc(struct jarena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	if (a->limit && a->used + n > a->limit) {
		alice_error_set(a->err, "template render exceeded its memory limit (%zu bytes)", a->limit);
		longjmp(*a->jb, 2);
	}
	struct jblock *b = a->head;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		b = malloc(sizeof *b + cap);
		if (!b) {
			alice_error_set(a->err, "out of memory");
			longjmp(*a->jb, 3);
		}
		b->cap = cap;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = b->mem + b->used;
	b->used += n;
	a->used += n;
	memset(p, 0, n);
	return p;
}

void jarena_free(struct jarena *a)
{
	struct jblock *b = a->head;
	while (b) {
		struct jblock *n = b->next;
		free(b);
		b = n;
	}
	a->head = NULL;
	a->used = 0;
}

void jsb_addn(struct jsb *b, const void *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *np = jarena_alloc(b->a, cap);
		if (b->n)
			memcpy(np, b->p, b->n);
		b->p = np;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
	b->p[b->n] = 0;
}

void jsb_add(struct jsb *b, const char *s) { jsb_addn(b, s, strlen(s)); }

void jsb_addf(struct jsb *b, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof buf) {
		jsb_addn(b, buf, (size_t)n);
		return;
	}
	char *big = jarena_alloc(b->a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	jsb_addn(b, big, (size_t)n);
}

struct jstr *jstr_new(struct jarena *a, const char *p, size_t n)
{
	struct jstr *s = jarena_alloc(a, sizeof *s + n + 1);
	s->n = n;
	if (n)
		memcpy(s->p, p, n);
	s->p[n] = 0;
	return s;
}

struct jv jv_undef(struct jstr *name) { struct jv v = {.t = JT_UNDEF}; v.s = name; return v; }
struct jv jv_none(void) { return (struct jv){.t = JT_NONE}; }
struct jv jv_bool(bool b) { struct jv v = {.t = JT_BOOL}; v.b = b; return v; }
struct jv jv_int(int64_t i) { struct jv v = {.t = JT_INT}; v.i = i; return v; }
struct jv jv_float(double f) { struct jv v = {.t = JT_FLOAT}; v.f = f; return v; }
struct jv jv_str(struct jrender *r, const char *p, size_t n)
{
	struct jv v = {.t = JT_STR};
	v.s = jstr_new(&r->arena, p, n);
	return v;
}
struct jv jv_cstr(struct jrender *r, const char *p) { return jv_str(r, p, strlen(p)); }
struct jv jv_list(struct jrender *r)
{
	struct jv v = {.t = JT_LIST};
	v.l = jarena_alloc(&r->arena, sizeof *v.l);
	return v;
}
struct jv jv_dict(struct jrender *r)
{
	struct jv v = {.t = JT_DICT};
	v.d = jarena_alloc(&r->arena, sizeof *v.d);
	return v;
}

struct jv jv_sb_take(struct jrender *r, struct jsb *b)
{
	struct jv v = jv_str(r, b->p ? b->p : "", b->n);
	b->n = 0;
	return v;
}

void jlist_push(struct jrender *r, struct jlist *l, struct jv v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct jv *nv = jarena_alloc(&r->arena, cap * sizeof *nv);
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof *nv);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
}

static bool key_eq(struct jv a, struct jv b)
{
	if (a.t == JT_STR && b.t == JT_STR)
		return a.s->n == b.s->n && memcmp(a.s->p, b.s->p, a.s->n) == 0;
	return jv_eq(a, b);
}

struct jv *jdict_get(struct jdict *d, struct jv k)
{
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(d->k[i], k))
			return &d->v[i];
	return NULL;
}

struct jv *jdict_getc(struct jdict *d, const char *k)
{
	size_t n = strlen(k);
	for (size_t i = 0; i < d->n; i++)
		if (d->k[i].t == JT_STR && d->k[i].s->n == n && memcmp(d->k[i].s->p, k, n) == 0)
			return &d->v[i];
	return NULL;
}

void jdict_set(struct jrender *r, struct jdict *d, struct jv k, struct jv v)
{
	struct jv *e = jdict_get(d, k);
	if (e) {
		*e = v;
		return;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		struct jv *nk = jarena_alloc(&r->arena, cap * sizeof *nk);
		struct jv *nv = jarena_alloc(&r->arena, cap * sizeof *nv);
		if (d->n) {
			memcpy(nk, d->k, d->n * sizeof *nk);
			memcpy(nv, d->v, d->n * sizeof *nv);
		}
		d->k = nk;
		d->v = nv;
		d->cap = cap;
	}
	d->k[d->n] = k;
	d->v[d->n++] = v;
}

bool jv_truthy(struct jv v)
{
	switch (v.t) {
	case JT_UNDEF: case JT_NONE: return false;
	case JT_BOOL: return v.b;
	case JT_INT: return v.i != 0;
	case JT_FLOAT: return v.f != 0;
	case JT_STR: return v.s->n != 0;
	case JT_LIST: return v.l->n != 0;
	case JT_DICT: return v.d->n != 0;
	default: return true;
	}
}

static bool is_num(struct jv v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
static double num_f(struct jv v) { return v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : (double)v.b; }
static int64_t num_i(struct jv v) { return v.t == JT_INT ? v.i : (int64_t)v.b; }

static bool eq_d(struct jv a, struct jv b, int depth);

bool jv_eq(struct jv a, struct jv b) { return eq_d(a, b, 0); }

/* Beyond JINJA_MAX_EDEPTH levels two values count as different (Python
 * would raise RecursionError; this keeps the C stack bounded). */
static bool eq_d(struct jv a, struct jv b, int depth)
{
	if (depth > JINJA_MAX_EDEPTH)
		return false;
	if (is_num(a) && is_num(b)) {
		if (a.t == JT_FLOAT || b.t == JT_FLOAT)
			return num_f(a) == num_f(b);
		return num_i(a) == num_i(b);
	}
	if (a.t != b.t)
		return false;
	switch (a.t) {
	case JT_UNDEF: case JT_NONE: return true;
	case JT_STR: return key_eq(a, b);
	case JT_LIST:
		if (a.l->n != b.l->n)
			return false;
		for (size_t i = 0; i < a.l->n; i++)
			if (!eq_d(a.l->v[i], b.l->v[i], depth + 1))
				return false;
		return true;
	case JT_DICT:
		if (a.d->n != b.d->n)
			return false;
		for (size_t i = 0; i < a.d->n; i++) {
			struct jv *o = jdict_get(b.d, a.d->k[i]);
			if (!o || !eq_d(a.d->v[i], *o, depth + 1))
				return false;
		}
		return true;
	case JT_NS: return a.d == b.d;
	case JT_MACRO: return a.m->node == b.m->node;
	case JT_FUNC: return a.fn == b.fn;
	default: return false;
	}
}

const char *jv_typename(struct jv v)
{
	static const char *n[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
				  "Namespace", "Macro", "builtin_function_or_method", "method"};
	if (v.t == JT_LIST && v.gen)
		return "generator";
	if (v.t == JT_LIST && v.tuple)
		return "tuple";
	return n[v.t];
}

int jv_cmp(struct jrender *r, struct jv a, struct jv b)
{
	if (is_num(a) && is_num(b)) {
		if (a.t == JT_FLOAT || b.t == JT_FLOAT) {
			double x = num_f(a), y = num_f(b);
			return x < y ? -1 : x > y;
		}
		int64_t x = num_i(a), y = num_i(b);
		return x < y ? -1 : x > y;
	}
	if (a.t == JT_STR && b.t == JT_STR) {
		size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
		int c = memcmp(a.s->p, b.s->p, n);
		if (c)
			return c < 0 ? -1 : 1;
		return a.s->n < b.s->n ? -1 : a.s->n > b.s->n;
	}
	if (a.t == JT_LIST && b.t == JT_LIST) {
		for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
			if (!jv_eq(a.l->v[i], b.l->v[i])) {
				jenter(r);
				int c = jv_cmp(r, a.l->v[i], b.l->v[i]);
				jleave(r);
				return c;
			}
		}
		return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
	}
	jfail(r, ALICE_ERR_INVALID, "TypeError: '<' not supported between instances of '%s' and '%s'",
	      jv_typename(a), jv_typename(b));
}

/* Python's repr() of a float: the shortest digits that read back the same,
 * positional for exponents in [-4, 16), scientific otherwise. */
void jv_fmt_float(struct jsb *b, double f)
{
	if (isnan(f)) {
		jsb_add(b, "nan");
		return;
	}
	if (isinf(f)) {
		jsb_add(b, f < 0 ? "-inf" : "inf");
		return;
	}
	char buf[64];
	int prec;
	for (prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
		if (strtod(buf, NULL) == f)
			break;
	}
	/* buf: [-]d[.ddd]e[+-]XX */
	char digits[32];
	int nd = 0;
	const char *p = buf;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[nd++] = *p;
	int exp = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	if (neg)
		jsb_add(b, "-");
	if (exp < -4 || exp >= 16) {
		jsb_addn(b, digits, 1);
		if (nd > 1) {
			jsb_add(b, ".");
			jsb_addn(b, digits + 1, nd - 1);
		}
		jsb_addf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	} else if (exp < 0) {
		jsb_add(b, "0.");
		for (int i = 0; i < -exp - 1; i++)
			jsb_add(b, "0");
		jsb_addn(b, digits, nd);
	} else {
		for (int i = 0; i <= exp; i++)
			jsb_addn(b, i < nd ? &digits[i] : "0", 1);
		jsb_add(b, ".");
		if (nd > exp + 1)
			jsb_addn(b, digits + exp + 1, nd - exp - 1);
		else
			jsb_add(b, "0");
	}
}

static void repr_str(struct jsb *b, const struct jstr *s)
{
	bool sq = memchr(s->p, '\'', s->n) != NULL, dq = memchr(s->p, '"', s->n) != NULL;
	char q = sq && !dq ? '"' : '\'';
	jsb_addn(b, &q, 1);
	for (size_t i = 0; i < s->n; i++) {
		unsigned char c = (unsigned char)s->p[i];
		if (c == '\\')
			jsb_add(b, "\\\\");
		else if (c == (unsigned char)q)
			jsb_addf(b, "\\%c", q);
		else if (c == '\n')
			jsb_add(b, "\\n");
		else if (c == '\r')
			jsb_add(b, "\\r");
		else if (c == '\t')
			jsb_add(b, "\\t");
		else if (c < 0x20 || c == 0x7f)
			jsb_addf(b, "\\x%02x", c);
		else
			jsb_addn(b, &s->p[i], 1);
	}
	jsb_addn(b, &q, 1);
}

static void repr_rec(struct jrender *r, struct jsb *b, struct jv v);

void jv_repr_append(struct jrender *r, struct jsb *b, struct jv v)
{
	jenter(r);
	repr_rec(r, b, v);
	jleave(r);
}

static void repr_rec(struct jrender *r, struct jsb *b, struct jv v)
{
	jstep(r);
	if (v.t == JT_STR) {
		repr_str(b, v.s);
	} else if (v.t == JT_LIST && !v.gen) {
		jsb_add(b, v.tuple ? "(" : "[");
		for (size_t i = 0; i < v.l->n; i++) {
			if (i)
				jsb_add(b, ", ");
			jv_repr_append(r, b, v.l->v[i]);
		}
		jsb_add(b, v.tuple ? (v.l->n == 1 ? ",)" : ")") : "]");
	} else if (v.t == JT_DICT) {
		jsb_add(b, "{");
		for (size_t i = 0; i < v.d->n; i++) {
			if (i)
				jsb_add(b, ", ");
			jv_repr_append(r, b, v.d->k[i]);
			jsb_add(b, ": ");
			jv_repr_append(r, b, v.d->v[i]);
		}
		jsb_add(b, "}");
	} else if (v.t == JT_UNDEF) {
		jsb_add(b, "Undefined");
	} else {
		jv_str_append(r, b, v);
	}
}

void jv_str_append(struct jrender *r, struct jsb *b, struct jv v)
{
	switch (v.t) {
	case JT_UNDEF: break;
	case JT_NONE: jsb_add(b, "None"); break;
	case JT_BOOL: jsb_add(b, v.b ? "True" : "False"); break;
	case JT_INT: jsb_addf(b, "%lld", (long long)v.i); break;
	case JT_FLOAT: jv_fmt_float(b, v.f); break;
	case JT_STR: jsb_addn(b, v.s->p, v.s->n); break;
	case JT_LIST:
		if (v.gen) {
			jsb_add(b, "<generator object>");
			break;
		}
		/* fall through */
	case JT_DICT: jv_repr_append(r, b, v); break;
	case JT_NS: jsb_add(b, "<Namespace>"); break;
	case JT_MACRO: jsb_add(b, "<Macro>"); break;
	default: jsb_add(b, "<built-in function>"); break;
	}
}

struct jv jv_to_str(struct jrender *r, struct jv v)
{
	if (v.t == JT_STR)
		return v;
	struct jsb b = {.a = &r->arena};
	jv_str_append(r, &b, v);
	return jv_sb_take(r, &b);
}

static void json_str(struct jsb *b, const char *p, size_t n)
{
	jsb_add(b, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		switch (c) {
		case '"': jsb_add(b, "\\\""); break;
		case '\\': jsb_add(b, "\\\\"); break;
		case '\n': jsb_add(b, "\\n"); break;
		case '\r': jsb_add(b, "\\r"); break;
		case '\t': jsb_add(b, "\\t"); break;
		case '\b': jsb_add(b, "\\b"); break;
		case '\f': jsb_add(b, "\\f"); break;
		default:
			if (c < 0x20)
				jsb_addf(b, "\\u%04x", c);
			else
				jsb_addn(b, &p[i], 1);
		}
	}
	jsb_add(b, "\"");
}

static void newline_indent(struct jsb *b, int indent, int level)
{
	jsb_add(b, "\n");
	for (int i = 0; i < indent * level; i++)
		jsb_add(b, " ");
}

void jv_tojson(struct jrender *r, struct jsb *b, struct jv v, int indent, const char *isep,
	       const char *ksep, bool sort, int level)
{
	jstep(r);
	if (level > r->max_depth)
		jfail(r, ALICE_ERR_RANGE, "ValueError: tojson nesting too deep");
	switch (v.t) {
	case JT_NONE: jsb_add(b, "null"); return;
	case JT_BOOL: jsb_add(b, v.b ? "true" : "false"); return;
	case JT_INT: jsb_addf(b, "%lld", (long long)v.i); return;
	case JT_FLOAT:
		if (isnan(v.f))
			jsb_add(b, "NaN");
		else if (isinf(v.f))
			jsb_add(b, v.f < 0 ? "-Infinity" : "Infinity");
		else
			jv_fmt_float(b, v.f);
		return;
	case JT_STR: json_str(b, v.s->p, v.s->n); return;
	case JT_LIST:
		if (v.gen)
			break;
		if (v.l->n == 0) {
			jsb_add(b, "[]");
			return;
		}
		jsb_add(b, "[");
		for (size_t i = 0; i < v.l->n; i++) {
			if (i)
				jsb_add(b, isep);
			if (indent >= 0)
				newline_indent(b, indent, level + 1);
			jv_tojson(r, b, v.l->v[i], indent, isep, ksep, sort, level + 1);
		}
		if (indent >= 0)
			newline_indent(b, indent, level);
		jsb_add(b, "]");
		return;
	case JT_DICT: {
		if (v.d->n == 0) {
			jsb_add(b, "{}");
			return;
		}
		size_t n = v.d->n;
		size_t *ord = jarena_alloc(&r->arena, n * sizeof *ord);
		for (size_t i = 0; i < n; i++)
			ord[i] = i;
		if (sort) /* insertion sort: dicts in templates are small */
			for (size_t i = 1; i < n; i++)
				for (size_t j = i; j > 0 && jv_cmp(r, v.d->k[ord[j - 1]], v.d->k[ord[j]]) > 0; j--) {
					size_t t = ord[j];
					ord[j] = ord[j - 1];
					ord[j - 1] = t;
				}
		jsb_add(b, "{");
		for (size_t i = 0; i < n; i++) {
			struct jv k = v.d->k[ord[i]];
			if (i)
				jsb_add(b, isep);
			if (indent >= 0)
				newline_indent(b, indent, level + 1);
			if (k.t == JT_STR) {
				json_str(b, k.s->p, k.s->n);
			} else if (k.t == JT_INT || k.t == JT_FLOAT || k.t == JT_BOOL || k.t == JT_NONE) {
				struct jsb t = {.a = &r->arena};
				jv_tojson(r, &t, k, -1, isep, ksep, false, level + 1);
				json_str(b, t.p ? t.p : "", t.n);
			} else {
				jfail(r, ALICE_ERR_INVALID, "TypeError: keys must be str, int, float, bool or None, not %s",
				      jv_typename(k));
			}
			jsb_add(b, ksep);
			jv_tojson(r, b, v.d->v[ord[i]], indent, isep, ksep, sort, level + 1);
		}
		if (indent >= 0)
			newline_indent(b, indent, level);
		jsb_add(b, "}");
		return;
	}
	default: break;
	}
	jfail(r, ALICE_ERR_INVALID, "TypeError: Object of type %s is not JSON serializable",
	      v.t == JT_UNDEF ? "Undefined" : jv_typename(v));
}

struct jv jv_from_json(struct jrender *r, const struct json_object *co, int depth)
{
	struct json_object *o = (struct json_object *)co;
	if (depth > 512)
		jfail(r, ALICE_ERR_RANGE, "context nested too deep");
	switch (json_object_get_type(o)) {
	case json_type_null: return jv_none();
	case json_type_boolean: return jv_bool(json_object_get_boolean(o));
	case json_type_int: return jv_int(json_object_get_int64(o));
	case json_type_double: return jv_float(json_object_get_double(o));
	case json_type_string: return jv_str(r, json_object_get_string(o), (size_t)json_object_get_string_len(o));
	case json_type_array: {
		struct jv l = jv_list(r);
		size_t n = json_object_array_length(o);
		for (size_t i = 0; i < n; i++)
			jlist_push(r, l.l, jv_from_json(r, json_object_array_get_idx(o, i), depth + 1));
		return l;
	}
	case json_type_object: {
		struct jv d = jv_dict(r);
		json_object_object_foreach(o, key, val)
			jdict_set(r, d.d, jv_cstr(r, key), jv_from_json(r, val, depth + 1));
		return d;
	}
	}
	return jv_none();
}
