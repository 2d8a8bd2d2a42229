/* filters.c — jinja2's built-in filters as templates use them (tojson is
 * transformers' json.dumps(ensure_ascii=False)). map/select/reject/
 * selectattr/rejectattr return generators, as in Python: tojson refuses
 * them until |list. */
#include "jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jv jinja_strip(struct jrender *r, struct jv s, struct jv chars, bool left, bool right);
struct jv jinja_str_replace(struct jrender *r, struct jv s, struct jv old, struct jv new, int64_t count);
struct jv jinja_case(struct jrender *r, struct jv s, int mode);
struct jv jinja_str_format(struct jrender *r, struct jv fmt, struct jv args);

static const char *const filters[] = {
	"tojson", "trim", "length", "count", "join", "map", "select", "reject", "selectattr",
	"rejectattr", "first", "last", "default", "d", "capitalize", "string", "int", "float", "list",
	"unique", "upper", "lower", "title", "replace", "items", "dictsort", "safe", "indent",
	"wordcount", "abs", "round", "sum", "min", "max", "sort", "reverse", "escape", "e", "format",
	"attr", "center", "batch", "truncate", NULL,
};

bool jinja_has_filter(const char *name)
{
	for (int i = 0; filters[i]; i++)
		if (!strcmp(filters[i], name))
			return true;
	return false;
}

static struct jv *opt(struct jargs *a, int pos, const char *name) { return jarg(a, pos, name); }

static bool bopt(struct jargs *a, int pos, const char *name, bool def)
{
	struct jv *v = opt(a, pos, name);
	return v ? jv_truthy(*v) : def;
}

static struct jv str_of(struct jrender *r, struct jv v) { return jv_to_str(r, v); }

static size_t utf8_len(struct jv s)
{
	size_t n = 0;
	for (size_t i = 0; i < s.s->n; i++)
		n += ((unsigned char)s.s->p[i] & 0xC0) != 0x80;
	return n;
}

/* the sort key of jinja2's case-insensitive comparisons */
static struct jv fold(struct jrender *r, struct jv v, bool cs)
{
	return !cs && v.t == JT_STR ? jinja_case(r, v, 0) : v;
}

struct sortctx { struct jrender *r; struct jv *keys; bool rev; };

static void msort(struct sortctx *s, size_t *idx, size_t *tmp, size_t n)
{
	if (n < 2)
		return;
	size_t h = n / 2;
	msort(s, idx, tmp, h);
	msort(s, idx + h, tmp, n - h);
	size_t i = 0, j = h, k = 0;
	while (i < h && j < n) {
		int c = jv_cmp(s->r, s->keys[idx[j]], s->keys[idx[i]]);
		if (s->rev)
			c = -c;
		tmp[k++] = c < 0 ? idx[j++] : idx[i++];
	}
	while (i < h)
		tmp[k++] = idx[i++];
	while (j < n)
		tmp[k++] = idx[j++];
	memcpy(idx, tmp, n * sizeof *idx);
}

static struct jv sorted(struct jrender *r, struct jv items, struct jv *keys, bool rev)
{
	size_t n = items.l->n;
	size_t *idx = jarena_alloc(&r->arena, (n + 1) * sizeof *idx);
	size_t *tmp = jarena_alloc(&r->arena, (n + 1) * sizeof *tmp);
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	struct sortctx s = {r, keys, rev};
	msort(&s, idx, tmp, n);
	struct jv l = jv_list(r);
	for (size_t i = 0; i < n; i++)
		jlist_push(r, l.l, items.l->v[idx[i]]);
	return l;
}

/* getattr with jinja2's dotted attribute paths ("a.b", "0") */
static struct jv attr_path(struct jrender *r, struct jv v, struct jv path)
{
	if (path.t != JT_STR)
		return jinja_getattr(r, v, path, false);
	const char *p = path.s->p, *e = p + path.s->n;
	while (1) {
		const char *dot = memchr(p, '.', (size_t)(e - p));
		size_t n = dot ? (size_t)(dot - p) : (size_t)(e - p);
		struct jv k = jv_str(r, p, n);
		bool digits = n > 0;
		for (size_t i = 0; i < n; i++)
			digits &= p[i] >= '0' && p[i] <= '9';
		if (digits)
			k = jv_int(strtoll(k.s->p, NULL, 10));
		if (v.t == JT_UNDEF)
			return v;
		v = jinja_getattr(r, v, k, false);
		if (!dot)
			return v;
		p = dot + 1;
	}
}

static struct jargs rest(struct jargs *a, int skip)
{
	struct jargs o = *a;
	int k = 0;
	for (int i = 0; i < a->n && k < skip; i++)
		if (!a->names[i]) {
			k++;
			o.v = a->v + i + 1;
			o.names = a->names + i + 1;
			o.n = a->n - i - 1;
		}
	return o;
}

static struct jv select_common(struct jrender *r, struct jv v, struct jargs *a, bool attr, bool want)
{
	/* jinja2 iterates only a truthy sequence: none|selectattr(...) is empty */
	struct jv items = jv_truthy(v) ? jinja_iterable(r, v) : jv_list(r);
	struct jv out = jv_list(r);
	out.gen = 1;
	struct jv *an = attr ? opt(a, 0, NULL) : NULL;
	if (attr && !an)
		jfail(r, ALICE_ERR_INVALID, "TypeError: selectattr needs an attribute");
	struct jv *tn = opt(a, attr ? 1 : 0, NULL);
	struct jargs targs = rest(a, attr ? 2 : 1);
	for (size_t i = 0; i < items.l->n; i++) {
		struct jv x = items.l->v[i];
		if (attr)
			x = attr_path(r, x, *an);
		bool ok;
		if (!tn)
			ok = jv_truthy(x);
		else {
			if (tn->t != JT_STR)
				jfail(r, ALICE_ERR_INVALID, "TypeError: test name must be a string");
			ok = jinja_test(r, tn->s->p, x, &targs);
		}
		if (ok == want)
			jlist_push(r, out.l, items.l->v[i]);
	}
	return out;
}

static struct jv f_tojson(struct jrender *r, struct jv v, struct jargs *a)
{
	struct jv *ind = opt(a, 0, "indent");
	int indent = -1;
	if (ind && ind->t == JT_INT)
		indent = ind->i < 0 ? 0 : ind->i > 64 ? 64 : (int)ind->i;
	else if (ind && ind->t != JT_NONE)
		jfail(r, ALICE_ERR_INVALID, "TypeError: tojson indent must be an integer");
	const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
	struct jv *sep = opt(a, 1, "separators");
	if (sep && sep->t == JT_LIST && sep->l->n == 2 && sep->l->v[0].t == JT_STR && sep->l->v[1].t == JT_STR) {
		isep = sep->l->v[0].s->p;
		ksep = sep->l->v[1].s->p;
	} else if (sep && sep->t != JT_NONE) {
		jfail(r, ALICE_ERR_INVALID, "TypeError: tojson separators must be a pair of strings");
	}
	struct jsb b = {.a = &r->arena};
	jsb_addn(&b, "", 0);
	jv_tojson(r, &b, v, indent, isep, ksep, bopt(a, 2, "sort_keys", false), 0);
	return jv_sb_take(r, &b);
}

static struct jv f_indent(struct jrender *r, struct jv v, struct jargs *a)
{
	/* jinja2 does s += "\n"; s.splitlines(): a list grows, anything else fails */
	if (v.t == JT_LIST)
		jfail(r, ALICE_ERR_INVALID, "AttributeError: 'list' object has no attribute 'splitlines'");
	if (v.t != JT_STR)
		jfail(r, ALICE_ERR_INVALID, "TypeError: unsupported operand type(s) for +=: '%s' and 'str'",
		      jv_typename(v));
	struct jv s = v;
	struct jv *w = opt(a, 0, "width");
	struct jv ind;
	if (!w)
		ind = jv_cstr(r, "    ");
	else if (w->t == JT_STR)
		ind = *w;
	else if (w->t == JT_INT) {
		int64_t n = w->i < 0 ? 0 : w->i > 1024 ? 1024 : w->i;
		struct jsb t = {.a = &r->arena};
		jsb_addn(&t, "", 0);
		for (int64_t i = 0; i < n; i++)
			jsb_add(&t, " ");
		ind = jv_sb_take(r, &t);
	} else
		jfail(r, ALICE_ERR_INVALID, "TypeError: indent width must be an int or a string");
	bool first = bopt(a, 1, "first", false), blank = bopt(a, 2, "blank", false);
	/* s + "\n", split into lines */
	struct jv lines = jv_list(r);
	size_t st = 0, n = s.s->n;
	const char *p = s.s->p;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
			jlist_push(r, lines.l, jv_str(r, p + st, i - st));
			if (c == '\r' && i + 1 < n && p[i + 1] == '\n')
				i++;
			st = i + 1;
		}
	}
	jlist_push(r, lines.l, jv_str(r, p + st, n - st)); /* the line the added "\n" ends */
	struct jsb b = {.a = &r->arena};
	jsb_addn(&b, "", 0);
	if (first)
		jsb_addn(&b, ind.s->p, ind.s->n);
	for (size_t i = 0; i < lines.l->n; i++) {
		struct jv ln = lines.l->v[i];
		if (i) {
			jsb_add(&b, "\n");
			if (blank || ln.s->n)
				jsb_addn(&b, ind.s->p, ind.s->n);
		}
		jsb_addn(&b, ln.s->p, ln.s->n);
	}
	return jv_sb_take(r, &b);
}

static struct jv f_int(struct jrender *r, struct jv v, struct jargs *a)
{
	struct jv *d = opt(a, 0, "default");
	struct jv def = d ? *d : jv_int(0);
	switch (v.t) {
	case JT_INT: return v;
	case JT_BOOL: return jv_int(v.b);
	case JT_FLOAT: return isfinite(v.f) ? jv_int((int64_t)v.f) : def;
	case JT_STR: {
		char *end;
		const char *p = v.s->p;
		if (strpbrk(p, "xXpP")) /* no hex: int(s, 10) and float(s) refuse it */
			return def;
		long long i = strtoll(p, &end, 10);
		while (*end == ' ' || *end == '\t' || *end == '\n')
			end++;
		if (end != p && !*end)
			return jv_int(i);
		double f = strtod(p, &end);
		while (*end == ' ' || *end == '\t' || *end == '\n')
			end++;
		if (end != p && !*end && isfinite(f))
			return jv_int((int64_t)f);
		return def;
	}
	default: return def;
	}
}

static struct jv f_float(struct jrender *r, struct jv v, struct jargs *a)
{
	struct jv *d = opt(a, 0, "default");
	struct jv def = d ? *d : jv_float(0);
	(void)r;
	switch (v.t) {
	case JT_INT: return jv_float((double)v.i);
	case JT_BOOL: return jv_float(v.b);
	case JT_FLOAT: return v;
	case JT_STR: {
		char *end;
		if (strpbrk(v.s->p, "xXpP"))
			return def;
		double f = strtod(v.s->p, &end);
		while (*end == ' ' || *end == '\t' || *end == '\n')
			end++;
		return end != v.s->p && !*end ? jv_float(f) : def;
	}
	default: return def;
	}
}

static struct jv f_minmax(struct jrender *r, struct jv v, struct jargs *a, bool max)
{
	struct jv items = jinja_iterable(r, v);
	bool cs = bopt(a, 0, "case_sensitive", false);
	struct jv *attr = opt(a, 1, "attribute");
	if (!items.l->n)
		return jv_undef(NULL);
	struct jv best = items.l->v[0], bk = fold(r, attr ? attr_path(r, best, *attr) : best, cs);
	for (size_t i = 1; i < items.l->n; i++) {
		struct jv k = fold(r, attr ? attr_path(r, items.l->v[i], *attr) : items.l->v[i], cs);
		int c = jv_cmp(r, k, bk);
		if (max ? c > 0 : c < 0) {
			best = items.l->v[i];
			bk = k;
		}
	}
	return best;
}

static struct jv filter_more(struct jrender *r, const char *name, struct jv v, struct jargs *a);

struct jv jinja_filter(struct jrender *r, const char *name, struct jv v, struct jargs *a)
{
	jstep(r);
	if (!strcmp(name, "tojson")) return f_tojson(r, v, a);
	if (!strcmp(name, "safe")) {
		v = str_of(r, v);
		v.safe = 1;
		return v;
	}
	if (!strcmp(name, "default") || !strcmp(name, "d")) {
		struct jv *d = opt(a, 0, "default_value");
		bool boolean = bopt(a, 1, "boolean", false);
		if (v.t == JT_UNDEF || (boolean && !jv_truthy(v)))
			return d ? *d : jv_cstr(r, "");
		return v;
	}
	if (!strcmp(name, "trim")) {
		struct jv *c = opt(a, 0, "chars");
		return jinja_strip(r, str_of(r, v), c ? *c : jv_none(), true, true);
	}
	if (!strcmp(name, "length") || !strcmp(name, "count")) {
		switch (v.t) {
		case JT_UNDEF: return jv_int(0);
		case JT_STR: return jv_int((int64_t)utf8_len(v));
		case JT_LIST:
			if (v.gen)
				break;
			return jv_int((int64_t)v.l->n);
		case JT_DICT: case JT_NS: return jv_int((int64_t)v.d->n);
		default: break;
		}
		jfail(r, ALICE_ERR_INVALID, "TypeError: object of type '%s' has no len()", jv_typename(v));
	}
	if (!strcmp(name, "string")) return str_of(r, v);
	if (!strcmp(name, "upper")) return jinja_case(r, str_of(r, v), 1);
	if (!strcmp(name, "lower")) return jinja_case(r, str_of(r, v), 0);
	if (!strcmp(name, "title")) return jinja_case(r, str_of(r, v), 4);
	if (!strcmp(name, "capitalize")) return jinja_case(r, str_of(r, v), 3);
	if (!strcmp(name, "replace")) {
		struct jv *o = opt(a, 0, "old"), *n = opt(a, 1, "new"), *c = opt(a, 2, "count");
		if (!o || !n)
			jfail(r, ALICE_ERR_INVALID, "TypeError: replace needs old and new");
		return jinja_str_replace(r, str_of(r, v), str_of(r, *o), str_of(r, *n),
					 c && c->t == JT_INT ? c->i : -1);
	}
	if (!strcmp(name, "join")) {
		struct jv items = jinja_iterable(r, v);
		struct jv *d = opt(a, 0, "d"), *attr = opt(a, 1, "attribute");
		struct jsb b = {.a = &r->arena};
		jsb_addn(&b, "", 0);
		for (size_t i = 0; i < items.l->n; i++) {
			if (i && d)
				jv_str_append(r, &b, *d);
			jv_str_append(r, &b, attr ? attr_path(r, items.l->v[i], *attr) : items.l->v[i]);
		}
		return jv_sb_take(r, &b);
	}
	if (!strcmp(name, "list")) {
		struct jv items = jinja_iterable(r, v);
		struct jv l = jv_list(r);
		for (size_t i = 0; i < items.l->n; i++)
			jlist_push(r, l.l, items.l->v[i]);
		return l;
	}
	if (!strcmp(name, "first") || !strcmp(name, "last")) {
		if (name[0] == 'l' && v.t == JT_LIST && v.gen)
			jfail(r, ALICE_ERR_INVALID, "TypeError: 'generator' object is not reversible");
		struct jv items = jinja_iterable(r, v);
		if (!items.l->n)
			return jv_undef(NULL);
		return items.l->v[name[0] == 'f' ? 0 : items.l->n - 1];
	}
	if (!strcmp(name, "items")) {
		if (v.t == JT_UNDEF)
			return jv_list(r);
		if (v.t != JT_DICT)
			jfail(r, ALICE_ERR_INVALID, "TypeError: items filter needs a mapping, got %s", jv_typename(v));
		return jinja_method(r, v, "items", a);
	}
	if (!strcmp(name, "dictsort")) {
		if (v.t != JT_DICT)
			jfail(r, ALICE_ERR_INVALID, "FilterArgumentError: dictsort needs a mapping");
		bool cs = bopt(a, 0, "case_sensitive", false);
		struct jv *by = opt(a, 1, "by");
		bool byval = by && by->t == JT_STR && !strcmp(by->s->p, "value");
		struct jv items = jinja_method(r, v, "items", a);
		struct jv *keys = jarena_alloc(&r->arena, (items.l->n + 1) * sizeof *keys);
		for (size_t i = 0; i < items.l->n; i++)
			keys[i] = fold(r, items.l->v[i].l->v[byval ? 1 : 0], cs);
		return sorted(r, items, keys, bopt(a, 2, "reverse", false));
	}
	if (!strcmp(name, "sort")) {
		struct jv items = jinja_iterable(r, v);
		bool rev = bopt(a, 0, "reverse", false), cs = bopt(a, 1, "case_sensitive", false);
		struct jv *attr = opt(a, 2, "attribute");
		struct jv *keys = jarena_alloc(&r->arena, (items.l->n + 1) * sizeof *keys);
		for (size_t i = 0; i < items.l->n; i++)
			keys[i] = fold(r, attr ? attr_path(r, items.l->v[i], *attr) : items.l->v[i], cs);
		return sorted(r, items, keys, rev);
	}
	if (!strcmp(name, "unique")) {
		struct jv items = jinja_iterable(r, v);
		bool cs = bopt(a, 0, "case_sensitive", false);
		struct jv *attr = opt(a, 1, "attribute");
		struct jv seen = jv_list(r), out = jv_list(r);
		out.gen = 1;
		for (size_t i = 0; i < items.l->n; i++) {
			struct jv k = fold(r, attr ? attr_path(r, items.l->v[i], *attr) : items.l->v[i], cs);
			bool dup = false;
			for (size_t j = 0; j < seen.l->n && !dup; j++)
				dup = jv_eq(seen.l->v[j], k);
			if (!dup) {
				jlist_push(r, seen.l, k);
				jlist_push(r, out.l, items.l->v[i]);
			}
		}
		return out;
	}
	if (!strcmp(name, "reverse")) {
		if (v.t == JT_STR) {
			struct jv o = jv_str(r, v.s->p, v.s->n);
			for (size_t i = 0; i < o.s->n / 2; i++) {
				char t = o.s->p[i];
				o.s->p[i] = o.s->p[o.s->n - 1 - i];
				o.s->p[o.s->n - 1 - i] = t;
			}
			return o;
		}
		struct jv items = jinja_iterable(r, v);
		struct jv l = jv_list(r);
		l.gen = 1;
		for (size_t i = items.l->n; i > 0; i--)
			jlist_push(r, l.l, items.l->v[i - 1]);
		return l;
	}
	if (!strcmp(name, "map")) {
		struct jv items = jv_truthy(v) ? jinja_iterable(r, v) : jv_list(r);
		struct jv out = jv_list(r);
		out.gen = 1;
		struct jv *attr = jarg(a, -1, "attribute");
		if (attr) {
			struct jv *def = jarg(a, -1, "default");
			for (size_t i = 0; i < items.l->n; i++) {
				struct jv x = attr_path(r, items.l->v[i], *attr);
				if (x.t == JT_UNDEF && def)
					x = *def;
				jlist_push(r, out.l, x);
			}
			return out;
		}
		struct jv *fn = opt(a, 0, NULL);
		if (!fn || fn->t != JT_STR)
			jfail(r, ALICE_ERR_INVALID, "TypeError: map needs a filter name or attribute=");
		struct jargs fa = rest(a, 1);
		for (size_t i = 0; i < items.l->n; i++)
			jlist_push(r, out.l, jinja_filter(r, fn->s->p, items.l->v[i], &fa));
		return out;
	}
	if (!strcmp(name, "select")) return select_common(r, v, a, false, true);
	if (!strcmp(name, "reject")) return select_common(r, v, a, false, false);
	if (!strcmp(name, "selectattr")) return select_common(r, v, a, true, true);
	if (!strcmp(name, "rejectattr")) return select_common(r, v, a, true, false);
	if (!strcmp(name, "indent")) return f_indent(r, v, a);
	if (!strcmp(name, "int")) return f_int(r, v, a);
	if (!strcmp(name, "float")) return f_float(r, v, a);
	if (!strcmp(name, "wordcount")) {
		struct jv s = str_of(r, v);
		int64_t n = 0;
		bool in = false;
		for (size_t i = 0; i < s.s->n; i++) {
			unsigned char c = (unsigned char)s.s->p[i];
			bool w = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
			if (w && !in)
				n++;
			in = w;
		}
		return jv_int(n);
	}
	if (!strcmp(name, "abs")) {
		if (v.t == JT_INT) return jv_int(v.i < 0 ? (int64_t)(0 - (uint64_t)v.i) : v.i);
		if (v.t == JT_FLOAT) return jv_float(fabs(v.f));
		if (v.t == JT_BOOL) return jv_int(v.b);
		jfail(r, ALICE_ERR_INVALID, "TypeError: bad operand type for abs(): '%s'", jv_typename(v));
	}
	if (!strcmp(name, "round")) {
		struct jv *pr = opt(a, 0, "precision");
		struct jv *m = opt(a, 1, "method");
		double x = v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : v.t == JT_BOOL ? v.b : NAN;
		if (isnan(x) && v.t != JT_FLOAT)
			jfail(r, ALICE_ERR_INVALID, "TypeError: round needs a number");
		int p = pr && pr->t == JT_INT ? (int)(pr->i > 15 ? 15 : pr->i < -15 ? -15 : pr->i) : 0;
		if ((v.t == JT_INT || v.t == JT_BOOL) && p >= 0) /* round(int, n) is that int */
			return jv_int(v.t == JT_INT ? v.i : v.b);
		double k = pow(10, p), y = x * k;
		const char *mm = m && m->t == JT_STR ? m->s->p : "common";
		if (!strcmp(mm, "floor")) y = floor(y);
		else if (!strcmp(mm, "ceil")) y = ceil(y);
		else y = round(y);
		return jv_float(y / k);
	}
	if (!strcmp(name, "sum")) {
		struct jv items = jinja_iterable(r, v);
		struct jv *attr = opt(a, 0, "attribute"), *start = opt(a, 1, "start");
		struct jv acc = start ? *start : jv_int(0);
		for (size_t i = 0; i < items.l->n; i++) {
			struct jv x = attr ? attr_path(r, items.l->v[i], *attr) : items.l->v[i];
			if ((acc.t != JT_INT && acc.t != JT_FLOAT && acc.t != JT_BOOL) ||
			    (x.t != JT_INT && x.t != JT_FLOAT && x.t != JT_BOOL))
				jfail(r, ALICE_ERR_INVALID, "TypeError: unsupported operand type(s) for +: '%s' and '%s'",
				      jv_typename(acc), jv_typename(x));
			if (acc.t == JT_FLOAT || x.t == JT_FLOAT)
				acc = jv_float((acc.t == JT_FLOAT ? acc.f : acc.t == JT_INT ? (double)acc.i : acc.b) +
					       (x.t == JT_FLOAT ? x.f : x.t == JT_INT ? (double)x.i : x.b));
			else
				acc = jv_int((acc.t == JT_INT ? acc.i : acc.b) + (x.t == JT_INT ? x.i : x.b));
		}
		return acc;
	}
	if (!strcmp(name, "min")) return f_minmax(r, v, a, false);
	if (!strcmp(name, "max")) return f_minmax(r, v, a, true);
	if (!strcmp(name, "escape") || !strcmp(name, "e")) {
		struct jv e = jinja_html_escape(r, str_of(r, v));
		e.safe = 1;
		return e;
	}
	return filter_more(r, name, v, a);
}

/* markupsafe.escape of a str (a Markup is returned as it is) */
struct jv jinja_html_escape(struct jrender *r, struct jv s)
{
	if (s.safe)
		return s;
	{
		struct jsb b = {.a = &r->arena};
		jsb_addn(&b, "", 0);
		for (size_t i = 0; i < s.s->n; i++) {
			char c = s.s->p[i];
			if (c == '&') jsb_add(&b, "&amp;");
			else if (c == '<') jsb_add(&b, "&lt;");
			else if (c == '>') jsb_add(&b, "&gt;");
			else if (c == '"') jsb_add(&b, "&#34;");
			else if (c == '\'') jsb_add(&b, "&#39;");
			else jsb_addn(&b, &c, 1);
		}
		return jv_sb_take(r, &b);
	}
}

static struct jv filter_more(struct jrender *r, const char *name, struct jv v, struct jargs *a)
{
	if (!strcmp(name, "format")) {
		struct jv t = jv_list(r);
		t.tuple = 1;
		bool kw = false;
		for (int i = 0; i < a->n; i++) {
			if (a->names[i])
				kw = true;
			else
				jlist_push(r, t.l, a->v[i]);
		}
		if (kw) {
			struct jv d = jv_dict(r);
			for (int i = 0; i < a->n; i++)
				if (a->names[i]) {
					struct jv k = {.t = JT_STR};
					k.s = a->names[i];
					jdict_set(r, d.d, k, a->v[i]);
				}
			return jinja_str_format(r, str_of(r, v), d);
		}
		return jinja_str_format(r, str_of(r, v), t);
	}
	if (!strcmp(name, "attr")) {
		struct jv *n = opt(a, 0, "name");
		if (!n)
			jfail(r, ALICE_ERR_INVALID, "TypeError: attr needs a name");
		return jinja_getattr(r, v, *n, true);
	}
	if (!strcmp(name, "center")) {
		struct jv s = str_of(r, v);
		struct jv *w = opt(a, 0, "width");
		int64_t width = w && w->t == JT_INT ? (w->i > 4096 ? 4096 : w->i) : 80;
		int64_t len = (int64_t)utf8_len(s);
		if (len >= width)
			return s;
		int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
		struct jsb b = {.a = &r->arena};
		jsb_addn(&b, "", 0);
		for (int64_t i = 0; i < left; i++)
			jsb_add(&b, " ");
		jsb_addn(&b, s.s->p, s.s->n);
		for (int64_t i = 0; i < pad - left; i++)
			jsb_add(&b, " ");
		return jv_sb_take(r, &b);
	}
	if (!strcmp(name, "batch")) {
		struct jv items = jinja_iterable(r, v);
		struct jv *n = opt(a, 0, "linecount"), *fill = opt(a, 1, "fill_with");
		if (!n || n->t != JT_INT || n->i <= 0)
			jfail(r, ALICE_ERR_INVALID, "TypeError: batch needs a positive count");
		struct jv out = jv_list(r), cur = jv_list(r);
		out.gen = 1;
		for (size_t i = 0; i < items.l->n; i++) {
			jlist_push(r, cur.l, items.l->v[i]);
			if ((int64_t)cur.l->n == n->i) {
				jlist_push(r, out.l, cur);
				cur = jv_list(r);
			}
		}
		if (cur.l->n) {
			while (fill && (int64_t)cur.l->n < n->i)
				jlist_push(r, cur.l, *fill);
			jlist_push(r, out.l, cur);
		}
		return out;
	}
	if (!strcmp(name, "truncate")) {
		struct jv s = str_of(r, v);
		struct jv *ln = opt(a, 0, "length"), *kill = opt(a, 1, "killwords"), *end = opt(a, 2, "end"),
			  *leeway = opt(a, 3, "leeway");
		int64_t length = ln && ln->t == JT_INT ? ln->i : 255;
		int64_t lw = leeway && leeway->t == JT_INT ? leeway->i : 5;
		struct jv e = end ? str_of(r, *end) : jv_cstr(r, "...");
		if ((int64_t)s.s->n <= length + lw)
			return s;
		int64_t keep = length - (int64_t)e.s->n;
		if (keep < 0)
			keep = 0;
		size_t cut = (size_t)keep;
		if (!(kill && jv_truthy(*kill))) {
			while (cut > 0 && s.s->p[cut] != ' ')
				cut--;
		}
		struct jsb b = {.a = &r->arena};
		jsb_addn(&b, s.s->p, cut);
		jsb_addn(&b, e.s->p, e.s->n);
		return jv_sb_take(r, &b);
	}
	jfail(r, ALICE_ERR_INVALID, "TemplateAssertionError: No filter named '%s'.", name);
}
