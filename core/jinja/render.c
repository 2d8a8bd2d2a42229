/* render.c — the tree-walking renderer: statements, expressions, scopes,
 * macros, loops, attribute/item lookup, and the global functions (range,
 * namespace, dict, raise_exception, strftime_now). */
#include "jinja/jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FN_RANGE = 1, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME };

_Noreturn void jfail(struct jrender *r, enum alice_status st, const char *fmt, ...)
{
	char msg[ALICE_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (r->line > 0)
		alice_error_set(r->err, "%s (template line %d)", msg, r->line);
	else
		alice_error_set(r->err, "%s", msg);
	r->st = st;
	longjmp(r->jb, 1);
}

void jstep(struct jrender *r)
{
	if (++r->steps > r->max_steps)
		jfail(r, ALICE_ERR_RANGE, "template render exceeded its step budget (%llu)",
		      (unsigned long long)r->max_steps);
}

void jenter(struct jrender *r)
{
	if (++r->edepth > JINJA_MAX_EDEPTH)
		jfail(r, ALICE_ERR_RANGE, "RecursionError: expression or value nested deeper than %d",
		      JINJA_MAX_EDEPTH);
}

_Noreturn static void undef_fail(struct jrender *r, struct jv u)
{
	jfail(r, ALICE_ERR_INVALID, "UndefinedError: %s", u.s ? u.s->p : "value is undefined");
}

static struct jv undef_msg(struct jrender *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static struct jv undef_msg(struct jrender *r, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return jv_undef(jstr_new(&r->arena, msg, strlen(msg)));
}

struct jv *jarg(struct jargs *a, int pos, const char *name)
{
	for (int i = 0; i < a->n; i++)
		if (a->names[i] && name && !strcmp(a->names[i]->p, name))
			return &a->v[i];
	int k = 0;
	for (int i = 0; i < a->n; i++)
		if (!a->names[i] && k++ == pos)
			return &a->v[i];
	return NULL;
}

/* ---- lookup ---- */
static struct jv obj_desc(struct jrender *r, struct jv obj, struct jv key)
{
	struct jsb b = {.a = &r->arena};
	if (obj.t == JT_DICT)
		jsb_add(&b, "'dict object'");
	else if (obj.t == JT_LIST)
		jsb_add(&b, "'list object'");
	else if (obj.t == JT_STR)
		jsb_add(&b, "'str object'");
	else if (obj.t == JT_NONE)
		jsb_add(&b, "'None'");
	else
		jsb_addf(&b, "'%s object'", jv_typename(obj));
	jsb_add(&b, " has no attribute ");
	jv_repr_append(r, &b, key);
	struct jv v = jv_sb_take(r, &b);
	return jv_undef(v.s);
}

static struct jv method_of(struct jrender *r, struct jv obj, const char *name)
{
	struct jv m = {.t = JT_METHOD};
	m.mt = jarena_alloc(&r->arena, sizeof *m.mt);
	m.mt->self = obj;
	m.mt->name = jstr_new(&r->arena, name, strlen(name))->p;
	return m;
}

static bool item_of(struct jrender *r, struct jv obj, struct jv key, struct jv *out)
{
	if (obj.t == JT_DICT) {
		struct jv *v = jdict_get(obj.d, key);
		if (v) {
			*out = *v;
			return true;
		}
		return false;
	}
	if (obj.t == JT_STR && (key.t == JT_INT || key.t == JT_BOOL))
		obj = jinja_iterable(r, obj); /* index code points, as Python does */
	if ((obj.t == JT_LIST || obj.t == JT_STR) && (key.t == JT_INT || key.t == JT_BOOL)) {
		int64_t n = obj.t == JT_LIST ? (int64_t)obj.l->n : (int64_t)obj.s->n;
		int64_t i = key.t == JT_INT ? key.i : key.b;
		if (i < 0)
			i += n;
		if (i < 0 || i >= n)
			return false;
		if (obj.t == JT_LIST && !obj.gen)
			*out = obj.l->v[i];
		else
			return false;
		return true;
	}
	return false;
}

struct jv jinja_getattr(struct jrender *r, struct jv obj, struct jv key, bool attr)
{
	jstep(r);
	if (obj.t == JT_UNDEF)
		undef_fail(r, obj);
	if (obj.t == JT_NS) {
		struct jv *v = key.t == JT_STR ? jdict_get(obj.d, key) : NULL;
		return v ? *v : obj_desc(r, obj, key);
	}
	struct jv out;
	if (attr) {
		if (key.t == JT_STR && jinja_has_method(obj, key.s->p))
			return method_of(r, obj, key.s->p);
		if (item_of(r, obj, key, &out))
			return out;
	} else {
		if (item_of(r, obj, key, &out))
			return out;
		if (key.t == JT_STR && jinja_has_method(obj, key.s->p))
			return method_of(r, obj, key.s->p);
	}
	return obj_desc(r, obj, key); /* an Undefined that fails only when used */
}

struct jv jinja_iterable(struct jrender *r, struct jv v)
{
	switch (v.t) {
	case JT_UNDEF: return jv_list(r);
	case JT_LIST: return v;
	case JT_DICT: {
		struct jv l = jv_list(r);
		for (size_t i = 0; i < v.d->n; i++)
			jlist_push(r, l.l, v.d->k[i]);
		return l;
	}
	case JT_STR: {
		struct jv l = jv_list(r);
		for (size_t i = 0; i < v.s->n;) { /* one UTF-8 character each */
			size_t n = 1;
			unsigned char c = (unsigned char)v.s->p[i];
			if (c >= 0xF0) n = 4;
			else if (c >= 0xE0) n = 3;
			else if (c >= 0xC0) n = 2;
			if (i + n > v.s->n)
				n = v.s->n - i;
			jlist_push(r, l.l, jv_str(r, v.s->p + i, n));
			i += n;
		}
		return l;
	}
	default:
		jfail(r, ALICE_ERR_INVALID, "TypeError: '%s' object is not iterable", jv_typename(v));
	}
}

/* ---- scopes ---- */
struct ctx {
	struct jrender *r;
	struct jscope *scope;
	struct jsb *out;
};

static struct jscope *scope_new(struct jrender *r, struct jscope *parent)
{
	struct jscope *s = jarena_alloc(&r->arena, sizeof *s);
	s->parent = parent;
	return s;
}

static void scope_set(struct jrender *r, struct jscope *s, struct jstr *name, struct jv v)
{
	struct jv k = {.t = JT_STR};
	k.s = name;
	jdict_set(r, &s->vars, k, v);
}

static struct jv lookup(struct ctx *c, struct jstr *name)
{
	struct jv k = {.t = JT_STR};
	k.s = name;
	for (struct jscope *s = c->scope; s; s = s->parent) {
		struct jv *v = jdict_get(&s->vars, k);
		if (v)
			return *v;
	}
	static const struct { const char *n; int fn; } g[] = {
		{"range", FN_RANGE}, {"namespace", FN_NAMESPACE}, {"dict", FN_DICT},
		{"raise_exception", FN_RAISE}, {"strftime_now", FN_STRFTIME},
	};
	for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
		if (!strcmp(name->p, g[i].n)) {
			struct jv f = {.t = JT_FUNC};
			f.fn = g[i].fn;
			return f;
		}
	return undef_msg(c->r, "'%s' is undefined", name->p);
}

/* ---- expressions ---- */
static struct jv eval(struct ctx *c, const struct jn *n);
static int exec_block(struct ctx *c, const struct jn *n);

static void eval_args(struct ctx *c, const struct jn *n, struct jargs *a)
{
	a->n = n->nk;
	a->v = n->nk ? jarena_alloc(&c->r->arena, (size_t)n->nk * sizeof *a->v) : NULL;
	a->names = n->names;
	for (int i = 0; i < n->nk; i++)
		a->v[i] = eval(c, n->kids[i]);
}

static int run_for(struct ctx *c, const struct jn *n, struct jv iter, int depth);

static struct jv call_macro(struct jrender *r, struct jmacro *mac, struct jargs *a, struct jv *caller)
{
	const struct jn *m = mac->node;
	if (++r->depth > r->max_depth)
		jfail(r, ALICE_ERR_RANGE, "RecursionError: calls nested deeper than %d", r->max_depth);
	struct ctx c = {.r = r, .scope = scope_new(r, mac->closure)};
	struct jsb b = {.a = &r->arena};
	jsb_addn(&b, "", 0);
	c.out = &b;
	int line = r->line;
	if (m->k == JK_FOR) { /* loop(items) of a recursive for */
		if (a->n != 1 || a->names[0])
			jfail(r, ALICE_ERR_INVALID, "TypeError: loop() takes exactly one positional argument");
		run_for(&c, m, a->v[0], mac->loop_depth + 1);
		r->line = line;
		r->depth--;
		return jv_sb_take(r, &b);
	}
	int pos = 0;
	for (int i = 0; i < a->n; i++)
		if (!a->names[i]) {
			if (pos >= m->nk)
				jfail(r, ALICE_ERR_INVALID, "TypeError: macro '%s' takes not more than %d argument(s)",
				      m->s->p, m->nk);
			pos++;
		} else {
			bool known = false;
			for (int k = 0; k < m->nk; k++)
				known |= !strcmp(m->names[k]->p, a->names[i]->p);
			if (!known)
				jfail(r, ALICE_ERR_INVALID, "TypeError: macro '%s' takes no keyword argument '%s'",
				      m->s->p, a->names[i]->p);
		}
	for (int k = 0; k < m->nk; k++) {
		struct jv *v = jarg(a, k, m->names[k]->p);
		struct jv val;
		if (v)
			val = *v;
		else if (m->kids[k])
			val = eval(&c, m->kids[k]);
		else
			val = undef_msg(r, "parameter '%s' was not provided", m->names[k]->p);
		scope_set(r, c.scope, m->names[k], val);
	}
	if (caller)
		scope_set(r, c.scope, jstr_new(&r->arena, "caller", 6), *caller);
	exec_block(&c, m->a);
	r->line = line;
	r->depth--;
	return jv_sb_take(r, &b);
}

static struct jv fn_range(struct jrender *r, struct jargs *a)
{
	int64_t v[3] = {0, 0, 1};
	int n = a->n;
	if (n < 1 || n > 3)
		jfail(r, ALICE_ERR_INVALID, "TypeError: range expected 1 to 3 arguments, got %d", n);
	for (int i = 0; i < n; i++) {
		if (a->v[i].t != JT_INT && a->v[i].t != JT_BOOL)
			jfail(r, ALICE_ERR_INVALID, "TypeError: '%s' object cannot be interpreted as an integer",
			      jv_typename(a->v[i]));
		v[n == 1 ? 1 : i] = a->v[i].t == JT_INT ? a->v[i].i : a->v[i].b;
	}
	if (v[2] == 0)
		jfail(r, ALICE_ERR_INVALID, "ValueError: range() arg 3 must not be zero");
	struct jv l = jv_list(r);
	for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
		jstep(r);
		jlist_push(r, l.l, jv_int(i));
	}
	return l;
}

static struct jv fn_strftime(struct jrender *r, struct jargs *a)
{
	if (a->n < 1 || a->v[0].t != JT_STR)
		jfail(r, ALICE_ERR_INVALID, "TypeError: strftime_now expects a format string");
	time_t t = r->now >= 0 ? (time_t)r->now : time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	char buf[512];
	size_t n = strftime(buf, sizeof buf, a->v[0].s->p, &tm);
	return jv_str(r, buf, n);
}

struct jv jcall_value(struct jrender *r, struct jv fn, struct jargs *a)
{
	jstep(r);
	switch (fn.t) {
	case JT_MACRO: return call_macro(r, fn.m, a, NULL);
	case JT_DICT: { /* the loop variable of a recursive loop */
		struct jv *lc = jdict_getc(fn.d, "\001call");
		if (lc && lc->t == JT_MACRO)
			return call_macro(r, lc->m, a, NULL);
		break;
	}
	case JT_METHOD:
		if (!strcmp(fn.mt->name, "cycle") && fn.mt->self.t == JT_DICT) {
			struct jv *i0 = jdict_getc(fn.mt->self.d, "index0");
			if (!a->n)
				jfail(r, ALICE_ERR_INVALID, "TypeError: no items for cycling given");
			return a->v[i0 && i0->t == JT_INT ? i0->i % a->n : 0];
		}
		return jinja_method(r, fn.mt->self, fn.mt->name, a);
	case JT_FUNC:
		switch (fn.fn) {
		case FN_RANGE: return fn_range(r, a);
		case FN_NAMESPACE:
		case FN_DICT: {
			struct jv d = jv_dict(r);
			for (int i = 0; i < a->n; i++) {
				if (!a->names[i]) {
					if (a->v[i].t == JT_DICT || a->v[i].t == JT_NS) {
						for (size_t k = 0; k < a->v[i].d->n; k++)
							jdict_set(r, d.d, a->v[i].d->k[k], a->v[i].d->v[k]);
						continue;
					}
					jfail(r, ALICE_ERR_INVALID, "TypeError: %s() takes keyword arguments",
					      fn.fn == FN_DICT ? "dict" : "namespace");
				}
				struct jv k = {.t = JT_STR};
				k.s = a->names[i];
				jdict_set(r, d.d, k, a->v[i]);
			}
			if (fn.fn == FN_NAMESPACE)
				d.t = JT_NS;
			return d;
		}
		case FN_RAISE: {
			struct jv m = a->n ? jv_to_str(r, a->v[0]) : jv_cstr(r, "");
			jfail(r, ALICE_ERR_INVALID, "TemplateError: %s", m.s->p);
		}
		case FN_STRFTIME: return fn_strftime(r, a);
		}
		break;
	case JT_UNDEF: undef_fail(r, fn);
	default: break;
	}
	jfail(r, ALICE_ERR_INVALID, "TypeError: '%s' object is not callable", jv_typename(fn));
}

static int64_t slice_idx(struct jrender *r, struct jv v, int64_t n, int64_t def, int64_t step)
{
	if (v.t == JT_NONE || v.t == JT_UNDEF)
		return def;
	if (v.t != JT_INT && v.t != JT_BOOL)
		jfail(r, ALICE_ERR_INVALID, "TypeError: slice indices must be integers or None");
	int64_t i = v.t == JT_INT ? v.i : v.b;
	if (i < 0) {
		i += n;
		if (i < 0)
			i = step < 0 ? -1 : 0;
	} else if (i >= n) {
		i = step < 0 ? n - 1 : n;
	}
	return i;
}

static struct jv eval_slice(struct ctx *c, const struct jn *n)
{
	struct jrender *r = c->r;
	struct jv o = eval(c, n->a);
	struct jv a = n->b ? eval(c, n->b) : jv_none();
	struct jv b = n->c ? eval(c, n->c) : jv_none();
	struct jv s = n->d ? eval(c, n->d) : jv_none();
	int64_t step = 1;
	if (s.t == JT_INT)
		step = s.i;
	else if (s.t != JT_NONE)
		jfail(r, ALICE_ERR_INVALID, "TypeError: slice indices must be integers or None");
	if (step == 0)
		jfail(r, ALICE_ERR_INVALID, "ValueError: slice step cannot be zero");
	if (o.t == JT_UNDEF)
		undef_fail(r, o);
	if (o.t != JT_LIST && o.t != JT_STR)
		jfail(r, ALICE_ERR_INVALID, "TypeError: '%s' object is not subscriptable", jv_typename(o));
	bool str = o.t == JT_STR;
	if (str)
		o = jinja_iterable(r, o); /* slice code points, as Python does */
	int64_t len = (int64_t)o.l->n;
	int64_t i0 = slice_idx(r, a, len, step > 0 ? 0 : len - 1, step);
	int64_t i1 = slice_idx(r, b, len, step > 0 ? len : -1, step);
	if (!str) {
		struct jv l = jv_list(r);
		for (int64_t i = i0; step > 0 ? i < i1 : i > i1; i += step)
			jlist_push(r, l.l, o.l->v[i]);
		return l;
	}
	struct jsb sb = {.a = &r->arena};
	jsb_addn(&sb, "", 0);
	for (int64_t i = i0; step > 0 ? i < i1 : i > i1; i += step)
		jsb_addn(&sb, o.l->v[i].s->p, o.l->v[i].s->n);
	return jv_sb_take(r, &sb);
}

static double fnum(struct jv v) { return v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : v.t == JT_BOOL ? (double)v.b : 0; }
static bool isnum(struct jv v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
static int64_t inum(struct jv v) { return v.t == JT_INT ? v.i : v.t == JT_BOOL ? v.b : 0; }

struct jv jinja_str_format(struct jrender *r, struct jv fmt, struct jv args);

static bool contains(struct jrender *r, struct jv hay, struct jv needle)
{
	switch (hay.t) {
	case JT_STR:
		if (needle.t != JT_STR)
			jfail(r, ALICE_ERR_INVALID, "TypeError: 'in <string>' requires string as left operand, not %s",
			      jv_typename(needle));
		if (needle.s->n == 0)
			return true;
		if (needle.s->n > hay.s->n)
			return false;
		for (size_t i = 0; i + needle.s->n <= hay.s->n; i++)
			if (!memcmp(hay.s->p + i, needle.s->p, needle.s->n))
				return true;
		return false;
	case JT_LIST:
		for (size_t i = 0; i < hay.l->n; i++)
			if (jv_eq(hay.l->v[i], needle))
				return true;
		return false;
	case JT_DICT:
		if (needle.t == JT_LIST || needle.t == JT_DICT || needle.t == JT_NS)
			jfail(r, ALICE_ERR_INVALID, "TypeError: unhashable type: '%s'", jv_typename(needle));
		return jdict_get(hay.d, needle) != NULL;
	case JT_UNDEF: return false;
	default:
		jfail(r, ALICE_ERR_INVALID, "TypeError: argument of type '%s' is not iterable", jv_typename(hay));
	}
}

static struct jv binop(struct jrender *r, int op, struct jv a, struct jv b)
{
	switch (op) {
	case JO_EQ: return jv_bool(jv_eq(a, b));
	case JO_NE: return jv_bool(!jv_eq(a, b));
	case JO_LT: return jv_bool(jv_cmp(r, a, b) < 0);
	case JO_LE: return jv_bool(jv_cmp(r, a, b) <= 0);
	case JO_GT: return jv_bool(jv_cmp(r, a, b) > 0);
	case JO_GE: return jv_bool(jv_cmp(r, a, b) >= 0);
	case JO_IN: return jv_bool(contains(r, b, a));
	case JO_NOTIN: return jv_bool(!contains(r, b, a));
	case JO_CAT: {
		struct jsb s = {.a = &r->arena};
		jsb_addn(&s, "", 0);
		jv_str_append(r, &s, a);
		jv_str_append(r, &s, b);
		return jv_sb_take(r, &s);
	}
	default: break;
	}
	if (a.t == JT_UNDEF)
		undef_fail(r, a);
	if (b.t == JT_UNDEF)
		undef_fail(r, b);
	if (isnum(a) && isnum(b)) {
		bool fl = a.t == JT_FLOAT || b.t == JT_FLOAT;
		double x = fnum(a), y = fnum(b);
		int64_t i = inum(a), j = inum(b);
		switch (op) {
		case JO_ADD: return fl ? jv_float(x + y) : jv_int((int64_t)((uint64_t)i + (uint64_t)j));
		case JO_SUB: return fl ? jv_float(x - y) : jv_int((int64_t)((uint64_t)i - (uint64_t)j));
		case JO_MUL: return fl ? jv_float(x * y) : jv_int((int64_t)((uint64_t)i * (uint64_t)j));
		case JO_DIV:
			if (y == 0)
				jfail(r, ALICE_ERR_INVALID, "ZeroDivisionError: division by zero");
			return jv_float(x / y);
		case JO_FDIV:
		case JO_MOD:
			if (y == 0)
				jfail(r, ALICE_ERR_INVALID, "ZeroDivisionError: integer division or modulo by zero");
			if (fl) {
				double q = floor(x / y), m = fmod(x, y);
				if (m != 0 && ((m < 0) != (y < 0)))
					m += y;
				return op == JO_FDIV ? jv_float(q) : jv_float(m);
			} else {
				if (i == INT64_MIN && j == -1)
					jfail(r, ALICE_ERR_RANGE, "OverflowError: integer overflow");
				int64_t q = i / j, m = i % j;
				if (m != 0 && ((m < 0) != (j < 0))) {
					q--;
					m += j;
				}
				return op == JO_FDIV ? jv_int(q) : jv_int(m);
			}
		case JO_POW:
			if (!fl && j >= 0) {
				int64_t res = 1;
				for (int64_t k = 0; k < j && k < 64; k++)
					res = (int64_t)((uint64_t)res * (uint64_t)i);
				return jv_int(res);
			}
			return jv_float(pow(x, y));
		}
	}
	if (op == JO_ADD && a.t == JT_STR && b.t == JT_STR) {
		/* Markup + str escapes the str, as markupsafe does */
		bool safe = a.safe || b.safe;
		if (safe) {
			a = jinja_html_escape(r, a);
			b = jinja_html_escape(r, b);
		}
		struct jsb s = {.a = &r->arena};
		jsb_addn(&s, "", 0);
		jsb_addn(&s, a.s->p, a.s->n);
		jsb_addn(&s, b.s->p, b.s->n);
		struct jv o = jv_sb_take(r, &s);
		o.safe = safe;
		return o;
	}
	if (op == JO_ADD && a.t == JT_LIST && b.t == JT_LIST && !a.gen && !b.gen) {
		struct jv l = jv_list(r);
		for (size_t i = 0; i < a.l->n; i++)
			jlist_push(r, l.l, a.l->v[i]);
		for (size_t i = 0; i < b.l->n; i++)
			jlist_push(r, l.l, b.l->v[i]);
		return l;
	}
	if (op == JO_MUL && (b.t == JT_STR || b.t == JT_LIST) && (a.t == JT_INT || a.t == JT_BOOL)) {
		struct jv t = a; /* n * seq is seq * n */
		a = b;
		b = t;
	}
	if (op == JO_MUL && (a.t == JT_STR || a.t == JT_LIST) && (b.t == JT_INT || b.t == JT_BOOL)) {
		int64_t k = inum(b);
		if (k > 0 && (a.t == JT_STR ? a.s->n : a.l->n) * (uint64_t)k > r->arena.limit)
			jfail(r, ALICE_ERR_RANGE, "MemoryError: repetition too large");
		if (a.t == JT_STR) {
			struct jsb s = {.a = &r->arena};
			jsb_addn(&s, "", 0);
			for (int64_t i = 0; i < k; i++)
				jsb_addn(&s, a.s->p, a.s->n);
			return jv_sb_take(r, &s);
		}
		struct jv l = jv_list(r);
		for (int64_t i = 0; i < k; i++)
			for (size_t j = 0; j < a.l->n; j++)
				jlist_push(r, l.l, a.l->v[j]);
		return l;
	}
	if (op == JO_MOD && a.t == JT_STR)
		return jinja_str_format(r, a, b);
	static const char *ops[] = {"", "+", "-", "*", "/", "//", "%", "**"};
	jfail(r, ALICE_ERR_INVALID, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
	      op < 8 ? ops[op] : "?", jv_typename(a), jv_typename(b));
}

static struct jv apply_filter(struct ctx *c, const struct jn *f, struct jv subject)
{
	if (f->a)
		subject = apply_filter(c, f->a, subject);
	struct jargs a;
	eval_args(c, f, &a);
	c->r->line = f->line;
	return jinja_filter(c->r, f->s->p, subject, &a);
}

static struct jv eval_node(struct ctx *c, const struct jn *n);

static struct jv eval(struct ctx *c, const struct jn *n)
{
	jenter(c->r);
	struct jv v = eval_node(c, n);
	jleave(c->r);
	return v;
}

static struct jv eval_node(struct ctx *c, const struct jn *n)
{
	struct jrender *r = c->r;
	jstep(r);
	switch (n->k) {
	case JK_LIT: return n->lit;
	case JK_NAME: return lookup(c, n->s);
	case JK_ATTR: {
		struct jv o = eval(c, n->a);
		struct jv k = {.t = JT_STR};
		k.s = n->s;
		r->line = n->line;
		return jinja_getattr(r, o, k, true);
	}
	case JK_ITEM: {
		struct jv o = eval(c, n->a);
		struct jv k = eval(c, n->b);
		r->line = n->line;
		return jinja_getattr(r, o, k, false);
	}
	case JK_SLICE: return eval_slice(c, n);
	case JK_CALL: {
		struct jv fn = eval(c, n->a);
		struct jargs a;
		eval_args(c, n, &a);
		r->line = n->line;
		return jcall_value(r, fn, &a);
	}
	case JK_FILTER: {
		struct jv v = eval(c, n->a);
		struct jargs a;
		eval_args(c, n, &a);
		r->line = n->line;
		return jinja_filter(r, n->s->p, v, &a);
	}
	case JK_TEST: {
		struct jv v = eval(c, n->a);
		struct jargs a;
		eval_args(c, n, &a);
		r->line = n->line;
		bool res = jinja_test(r, n->s->p, v, &a);
		return jv_bool(n->neg ? !res : res);
	}
	case JK_BIN: {
		struct jv a = eval(c, n->a);
		struct jv b = eval(c, n->b);
		r->line = n->line;
		return binop(r, n->op, a, b);
	}
	case JK_NOT: return jv_bool(!jv_truthy(eval(c, n->a)));
	case JK_NEG: case JK_POS: {
		struct jv v = eval(c, n->a);
		r->line = n->line;
		if (v.t == JT_INT)
			return n->k == JK_NEG ? jv_int((int64_t)(0 - (uint64_t)v.i)) : v;
		if (v.t == JT_FLOAT)
			return n->k == JK_NEG ? jv_float(-v.f) : v;
		if (v.t == JT_BOOL)
			return jv_int(n->k == JK_NEG ? -(int64_t)v.b : v.b);
		if (v.t == JT_UNDEF)
			undef_fail(r, v);
		jfail(r, ALICE_ERR_INVALID, "TypeError: bad operand type for unary %s: '%s'",
		      n->k == JK_NEG ? "-" : "+", jv_typename(v));
	}
	case JK_AND: {
		struct jv a = eval(c, n->a);
		return jv_truthy(a) ? eval(c, n->b) : a;
	}
	case JK_OR: {
		struct jv a = eval(c, n->a);
		return jv_truthy(a) ? a : eval(c, n->b);
	}
	case JK_COND:
		if (jv_truthy(eval(c, n->a)))
			return eval(c, n->b);
		return n->c ? eval(c, n->c) : jv_undef(NULL);
	case JK_LIST: case JK_TUPLE: {
		struct jv l = jv_list(r);
		l.tuple = n->k == JK_TUPLE;
		for (int i = 0; i < n->nk; i++)
			jlist_push(r, l.l, eval(c, n->kids[i]));
		return l;
	}
	case JK_DICT: {
		struct jv d = jv_dict(r);
		for (int i = 0; i < n->nk; i++) {
			struct jv k = eval(c, n->kids[i]);
			jdict_set(r, d.d, k, eval(c, n->kids2[i]));
		}
		return d;
	}
	default: break;
	}
	jfail(r, ALICE_ERR_INVALID, "internal error: unknown expression node %d", n->k);
}

/* ---- statements ---- */
enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static void emit(struct ctx *c, const char *p, size_t n)
{
	if (c->out->n + n > c->r->max_output)
		jfail(c->r, ALICE_ERR_RANGE, "template output exceeded its limit (%zu bytes)", c->r->max_output);
	jsb_addn(c->out, p, n);
}

static void assign(struct ctx *c, struct jstr **names, int nn, struct jv v)
{
	if (nn == 1) {
		scope_set(c->r, c->scope, names[0], v);
		return;
	}
	if (v.t != JT_LIST)
		v = jinja_iterable(c->r, v);
	if ((int)v.l->n != nn)
		jfail(c->r, ALICE_ERR_INVALID, "ValueError: cannot unpack %zu values into %d names", v.l->n, nn);
	for (int i = 0; i < nn; i++)
		scope_set(c->r, c->scope, names[i], v.l->v[i]);
}

/* The loop variable: one object per loop whose fields advance, as jinja2's
 * LoopContext does. */
static const char *const loop_keys[] = {"index", "index0", "revindex", "revindex0", "first", "last",
					"length", "depth", "depth0", "previtem", "nextitem", "cycle"};
enum { LOOP_NKEYS = sizeof loop_keys / sizeof loop_keys[0] };

static struct jv loop_new(struct jrender *r)
{
	struct jv d = jv_dict(r);
	for (int k = 0; k < LOOP_NKEYS; k++)
		jdict_set(r, d.d, jv_cstr(r, loop_keys[k]), jv_none());
	return d;
}

static void loop_advance(struct jrender *r, struct jv d, struct jv items, size_t i)
{
	size_t n = items.l->n;
	struct jv *v = d.d->v; /* in loop_keys order */
	v[0] = jv_int((int64_t)i + 1);
	v[1] = jv_int((int64_t)i);
	v[2] = jv_int((int64_t)(n - i));
	v[3] = jv_int((int64_t)(n - i - 1));
	v[4] = jv_bool(i == 0);
	v[5] = jv_bool(i + 1 == n);
	v[6] = jv_int((int64_t)n);
	v[9] = i > 0 ? items.l->v[i - 1] : jv_undef(NULL);
	v[10] = i + 1 < n ? items.l->v[i + 1] : jv_undef(NULL);
	if (v[11].t != JT_METHOD) { /* loop.cycle(a, b, ...): a method of the loop itself */
		v[11].t = JT_METHOD;
		v[11].mt = jarena_alloc(&r->arena, sizeof *v[11].mt);
		v[11].mt->self = d;
		v[11].mt->name = "cycle";
	}
}

static int run_for(struct ctx *c, const struct jn *n, struct jv iter, int depth)
{
	struct jrender *r = c->r;
	struct jv src = jinja_iterable(r, iter);
	if (src.t == JT_LIST && src.gen)
		src.gen = 0;
	struct jscope *saved = c->scope;
	c->scope = scope_new(r, saved);
	if (++r->depth > r->max_depth)
		jfail(r, ALICE_ERR_RANGE, "RecursionError: loops nested deeper than %d", r->max_depth);
	struct jv items = src;
	if (n->b) { /* for x in xs if cond: filter first, loop.* count what is left */
		items = jv_list(r);
		for (size_t i = 0; i < src.l->n; i++) {
			assign(c, n->names, n->nk, src.l->v[i]);
			if (jv_truthy(eval(c, n->b)))
				jlist_push(r, items.l, src.l->v[i]);
		}
	}
	size_t count = items.l->n;
	struct jstr *loopname = jstr_new(&r->arena, "loop", 4);
	struct jv loop = loop_new(r);
	loop.d->v[7] = jv_int(depth);
	loop.d->v[8] = jv_int(depth - 1);
	if (n->neg) { /* recursive: loop(items) renders the body again, one level down */
		struct jv m = {.t = JT_MACRO};
		m.m = jarena_alloc(&r->arena, sizeof *m.m);
		m.m->node = n;
		m.m->closure = saved;
		m.m->loop_depth = depth;
		jdict_set(r, loop.d, jv_cstr(r, "\001call"), m);
	}
	scope_set(r, c->scope, loopname, loop);
	for (size_t i = 0; i < count; i++) {
		jstep(r);
		assign(c, n->names, n->nk, items.l->v[i]);
		loop_advance(r, loop, items, i);
		int fl = exec_block(c, n->c);
		if (fl == FLOW_BREAK)
			break;
	}
	r->depth--;
	c->scope = saved;
	if (count == 0 && n->d)
		return exec_block(c, n->d);
	return FLOW_NORMAL;
}

static int exec_for(struct ctx *c, const struct jn *n) { return run_for(c, n, eval(c, n->a), 1); }

static struct jv render_to_string(struct ctx *c, const struct jn *body)
{
	struct jsb b = {.a = &c->r->arena};
	jsb_addn(&b, "", 0);
	struct jsb *saved = c->out;
	c->out = &b;
	exec_block(c, body);
	c->out = saved;
	return jv_sb_take(c->r, &b);
}

static int exec_stmt(struct ctx *c, const struct jn *n)
{
	struct jrender *r = c->r;
	jstep(r);
	r->line = n->line;
	switch (n->k) {
	case JK_TEXT: emit(c, n->s->p, n->s->n); return FLOW_NORMAL;
	case JK_OUT: {
		struct jv v = eval(c, n->a);
		if (v.t == JT_STR) {
			emit(c, v.s->p, v.s->n);
		} else {
			struct jsb b = {.a = &r->arena};
			jv_str_append(r, &b, v);
			struct jv s = jv_sb_take(r, &b);
			emit(c, s.s->p, s.s->n);
		}
		return FLOW_NORMAL;
	}
	case JK_BLOCK: return exec_block(c, n);
	case JK_IF:
		for (int i = 0; i < n->nk; i++)
			if (jv_truthy(eval(c, n->kids[i])))
				return exec_block(c, n->kids2[i]);
		return n->a ? exec_block(c, n->a) : FLOW_NORMAL;
	case JK_FOR: return exec_for(c, n);
	case JK_SET: {
		struct jv v = eval(c, n->a);
		if (n->c) {
			struct jv ns = lookup(c, n->c->s);
			if (ns.t != JT_NS)
				jfail(r, ALICE_ERR_INVALID, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
			struct jv k = {.t = JT_STR};
			k.s = n->names[0];
			jdict_set(r, ns.d, k, v);
			return FLOW_NORMAL;
		}
		assign(c, n->names, n->nk, v);
		return FLOW_NORMAL;
	}
	case JK_SETBLOCK: {
		struct jv v = render_to_string(c, n->a);
		if (n->b)
			v = apply_filter(c, n->b, v);
		scope_set(r, c->scope, n->s, v);
		return FLOW_NORMAL;
	}
	case JK_FILTERBLOCK: {
		struct jv v = apply_filter(c, n->b, render_to_string(c, n->a));
		v = jv_to_str(r, v);
		emit(c, v.s->p, v.s->n);
		return FLOW_NORMAL;
	}
	case JK_MACRO: {
		struct jv m = {.t = JT_MACRO};
		m.m = jarena_alloc(&r->arena, sizeof *m.m);
		m.m->node = n;
		m.m->closure = c->scope;
		scope_set(r, c->scope, n->s, m);
		return FLOW_NORMAL;
	}
	case JK_CALLBLOCK: {
		struct jv caller = {.t = JT_MACRO};
		caller.m = jarena_alloc(&r->arena, sizeof *caller.m);
		caller.m->node = n;
		caller.m->closure = c->scope;
		struct jv fn = eval(c, n->b->a);
		struct jargs a;
		eval_args(c, n->b, &a);
		r->line = n->line;
		if (fn.t != JT_MACRO)
			jfail(r, ALICE_ERR_INVALID, "TypeError: a call block needs a macro, not %s", jv_typename(fn));
		struct jv v = call_macro(r, fn.m, &a, &caller);
		emit(c, v.s->p, v.s->n);
		return FLOW_NORMAL;
	}
	case JK_BREAK: return FLOW_BREAK;
	case JK_CONTINUE: return FLOW_CONTINUE;
	default: break;
	}
	jfail(r, ALICE_ERR_INVALID, "internal error: unknown statement node %d", n->k);
}

static int exec_block(struct ctx *c, const struct jn *n)
{
	for (int i = 0; i < n->nk; i++) {
		int fl = exec_stmt(c, n->kids[i]);
		if (fl != FLOW_NORMAL)
			return fl;
	}
	return FLOW_NORMAL;
}

struct jv jinja_render_root(struct jrender *r, const struct jn *root)
{
	struct jsb b = {.a = &r->arena};
	jsb_addn(&b, "", 0);
	struct ctx c = {.r = r, .scope = r->globals, .out = &b};
	exec_block(&c, root);
	return jv_sb_take(r, &b);
}
