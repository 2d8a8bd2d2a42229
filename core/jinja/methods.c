/* methods.c — the Python methods templates call on strings, dicts and lists
 * (split, strip, startswith, items, get, ...), and str % args. As in
 * jinja2's ImmutableSandboxedEnvironment, methods that modify a list or a
 * dict (append, pop, update, ...) are refused. */
#define _GNU_SOURCE
#include "jinja/jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const str_methods[] = {
	"split", "rsplit", "strip", "lstrip", "rstrip", "startswith", "endswith", "replace", "lower",
	"upper", "title", "capitalize", "find", "rfind", "count", "join", "splitlines", "isdigit",
	"isalpha", "isalnum", "isspace", "islower", "isupper", "format", "index", NULL,
};
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const list_methods[] = {"count", "index", "copy", NULL};
static const char *const unsafe_methods[] = {
	"append", "pop", "insert", "extend", "remove", "update", "setdefault", "clear", "sort",
	"reverse", "popitem", "add", "discard", NULL,
};

static bool in_set(const char *const *set, const char *name)
{
	for (int i = 0; set[i]; i++)
		if (!strcmp(set[i], name))
			return true;
	return false;
}

bool jinja_has_method(struct jv self, const char *name)
{
	switch (self.t) {
	case JT_STR: return in_set(str_methods, name);
	case JT_DICT: return in_set(dict_methods, name) || in_set(unsafe_methods, name);
	case JT_LIST: return !self.gen && (in_set(list_methods, name) || in_set(unsafe_methods, name));
	default: return false;
	}
}

static bool py_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }

static struct jv sarg(struct jrender *r, struct jargs *a, int pos, const char *name, bool required)
{
	struct jv *v = jarg(a, pos, name);
	if (!v || v->t == JT_NONE) {
		if (required)
			jfail(r, ALICE_ERR_INVALID, "TypeError: missing argument '%s'", name);
		return jv_none();
	}
	if (v->t != JT_STR)
		jfail(r, ALICE_ERR_INVALID, "TypeError: argument '%s' must be str, not %s", name, jv_typename(*v));
	return *v;
}

static int64_t iarg(struct jrender *r, struct jargs *a, int pos, const char *name, int64_t def)
{
	struct jv *v = jarg(a, pos, name);
	if (!v || v->t == JT_NONE)
		return def;
	if (v->t != JT_INT && v->t != JT_BOOL)
		jfail(r, ALICE_ERR_INVALID, "TypeError: argument '%s' must be int, not %s", name, jv_typename(*v));
	return v->t == JT_INT ? v->i : v->b;
}

struct jv jinja_strip(struct jrender *r, struct jv s, struct jv chars, bool left, bool right)
{
	size_t b = 0, e = s.s->n;
	const char *p = s.s->p;
#define STRIPPABLE(c) (chars.t == JT_STR ? memchr(chars.s->p, (c), chars.s->n) != NULL : py_space((unsigned char)(c)))
	if (left)
		while (b < e && STRIPPABLE(p[b]))
			b++;
	if (right)
		while (e > b && STRIPPABLE(p[e - 1]))
			e--;
#undef STRIPPABLE
	if (b == 0 && e == s.s->n)
		return s;
	return jv_str(r, p + b, e - b);
}

static struct jv str_split(struct jrender *r, struct jv s, struct jv sep, int64_t maxsplit, bool rev)
{
	struct jv l = jv_list(r);
	const char *p = s.s->p;
	size_t n = s.s->n;
	if (sep.t == JT_NONE) {
		if (!rev) {
			size_t i = 0;
			while (1) {
				while (i < n && py_space((unsigned char)p[i]))
					i++;
				if (i >= n)
					break;
				if (maxsplit >= 0 && (int64_t)l.l->n >= maxsplit) {
					size_t e = n;
					while (e > i && py_space((unsigned char)p[e - 1]))
						e--;
					jlist_push(r, l.l, jv_str(r, p + i, e - i));
					break;
				}
				size_t st = i;
				while (i < n && !py_space((unsigned char)p[i]))
					i++;
				jlist_push(r, l.l, jv_str(r, p + st, i - st));
			}
			return l;
		}
		/* rsplit(None): collect from the right, then reverse */
		struct jv t = jv_list(r);
		size_t i = n;
		while (1) {
			while (i > 0 && py_space((unsigned char)p[i - 1]))
				i--;
			if (i == 0)
				break;
			if (maxsplit >= 0 && (int64_t)t.l->n >= maxsplit) {
				size_t b = 0;
				while (b < i && py_space((unsigned char)p[b]))
					b++;
				jlist_push(r, t.l, jv_str(r, p + b, i - b));
				break;
			}
			size_t e = i;
			while (i > 0 && !py_space((unsigned char)p[i - 1]))
				i--;
			jlist_push(r, t.l, jv_str(r, p + i, e - i));
		}
		for (size_t k = t.l->n; k > 0; k--)
			jlist_push(r, l.l, t.l->v[k - 1]);
		return l;
	}
	size_t m = sep.s->n;
	if (m == 0)
		jfail(r, ALICE_ERR_INVALID, "ValueError: empty separator");
	if (!rev) {
		size_t st = 0;
		for (size_t i = 0; i + m <= n;) {
			if ((maxsplit < 0 || (int64_t)l.l->n < maxsplit) && !memcmp(p + i, sep.s->p, m)) {
				jlist_push(r, l.l, jv_str(r, p + st, i - st));
				i += m;
				st = i;
			} else {
				i++;
			}
			jstep(r);
		}
		jlist_push(r, l.l, jv_str(r, p + st, n - st));
		return l;
	}
	struct jv t = jv_list(r);
	size_t e = n;
	for (size_t i = n; i >= m;) {
		if ((maxsplit < 0 || (int64_t)t.l->n < maxsplit) && !memcmp(p + i - m, sep.s->p, m)) {
			jlist_push(r, t.l, jv_str(r, p + i, e - i));
			i -= m;
			e = i;
		} else {
			i--;
		}
		jstep(r);
	}
	jlist_push(r, t.l, jv_str(r, p, e));
	for (size_t k = t.l->n; k > 0; k--)
		jlist_push(r, l.l, t.l->v[k - 1]);
	return l;
}

struct jv jinja_str_replace(struct jrender *r, struct jv s, struct jv old, struct jv new, int64_t count)
{
	struct jsb b = {.a = &r->arena};
	jsb_addn(&b, "", 0);
	const char *p = s.s->p;
	size_t n = s.s->n, m = old.s->n;
	int64_t done = 0;
	if (m == 0) { /* Python inserts `new` between every character */
		for (size_t i = 0; i <= n; i++) {
			if (count < 0 || done < count) {
				jsb_addn(&b, new.s->p, new.s->n);
				done++;
			}
			if (i < n)
				jsb_addn(&b, p + i, 1);
			jstep(r);
		}
		return jv_sb_take(r, &b);
	}
	for (size_t i = 0; i < n;) {
		if (i + m <= n && (count < 0 || done < count) && !memcmp(p + i, old.s->p, m)) {
			jsb_addn(&b, new.s->p, new.s->n);
			i += m;
			done++;
		} else {
			jsb_addn(&b, p + i, 1);
			i++;
		}
	}
	jstep(r);
	return jv_sb_take(r, &b);
}

static bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Simple case mapping of the scripts templates meet (ASCII, Latin-1,
 * Latin Extended-A, Greek, Cyrillic, Armenian); other characters keep their
 * case. All of these stay the same UTF-8 length. */
static uint32_t cp_upper(uint32_t c)
{
	if (c >= 'a' && c <= 'z') return c - 32;
	if (c < 0x80) return c;
	if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
	if (c == 0xFF) return 0x178;
	if (c == 0xB5) return 0x39C;
	if (c == 0x131) return 'I';
	if (((c >= 0x101 && c <= 0x137) || (c >= 0x14B && c <= 0x177)) && (c & 1)) return c - 1;
	if (((c >= 0x13A && c <= 0x148) || (c >= 0x17A && c <= 0x17E)) && !(c & 1)) return c - 1;
	if ((c >= 0x3B1 && c <= 0x3C1) || (c >= 0x3C3 && c <= 0x3CB)) return c - 0x20;
	if (c == 0x3C2) return 0x3A3;
	if (c == 0x3AC) return 0x386;
	if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
	if (c == 0x3CC) return 0x38C;
	if (c >= 0x3CD && c <= 0x3CE) return c - 0x3F;
	if (c >= 0x430 && c <= 0x44F) return c - 0x20;
	if (c >= 0x450 && c <= 0x45F) return c - 0x50;
	if (((c >= 0x461 && c <= 0x481) || (c >= 0x48B && c <= 0x4BF)) && (c & 1)) return c - 1;
	if (c >= 0x561 && c <= 0x586) return c - 0x30;
	return c;
}

static uint32_t cp_lower(uint32_t c)
{
	if (c >= 'A' && c <= 'Z') return c + 32;
	if (c < 0x80) return c;
	if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
	if (c == 0x178) return 0xFF;
	if (((c >= 0x100 && c <= 0x136 && c != 0x130) || (c >= 0x14A && c <= 0x176)) && !(c & 1)) return c + 1;
	if (((c >= 0x139 && c <= 0x147) || (c >= 0x179 && c <= 0x17D)) && (c & 1)) return c + 1;
	if ((c >= 0x391 && c <= 0x3A1) || (c >= 0x3A3 && c <= 0x3AB)) return c + 0x20;
	if (c == 0x386) return 0x3AC;
	if (c >= 0x388 && c <= 0x38A) return c + 0x25;
	if (c == 0x38C) return 0x3CC;
	if (c >= 0x38E && c <= 0x38F) return c + 0x3F;
	if (c >= 0x410 && c <= 0x42F) return c + 0x20;
	if (c >= 0x400 && c <= 0x40F) return c + 0x50;
	if (((c >= 0x460 && c <= 0x480) || (c >= 0x48A && c <= 0x4BE)) && !(c & 1)) return c + 1;
	if (c >= 0x531 && c <= 0x556) return c + 0x30;
	return c;
}

struct jv jinja_case(struct jrender *r, struct jv s, int mode) /* 0 lower 1 upper 2 title 3 capitalize 4 |title */
{
	struct jv o = jv_str(r, s.s->p, s.s->n);
	unsigned char *p = (unsigned char *)o.s->p;
	bool prev_cased = false, first = true;
	for (size_t i = 0; i < o.s->n;) {
		uint32_t c = p[i];
		size_t len = 1;
		if (c >= 0xC2 && c <= 0xDF && i + 1 < o.s->n && (p[i + 1] & 0xC0) == 0x80) {
			c = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
			len = 2;
		} else if (c >= 0x80) { /* other characters: copied, and they end a word */
			size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 1;
			i += i + n <= o.s->n ? n : 1;
			prev_cased = false;
			first = false;
			continue;
		}
		uint32_t up = cp_upper(c), lo = cp_lower(c), m;
		bool cased = up != c || lo != c;
		switch (mode) {
		case 0: m = lo; break;
		case 1: m = up; break;
		case 2: m = prev_cased ? lo : up; break;
		case 4: m = first ? up : lo; break;
		default: m = first ? up : lo; break;
		}
		prev_cased = cased;
		/* |title: words start after whitespace and - ( { [ < (jinja2's do_title) */
		first = mode == 4 && len == 1 && (c == ' ' || (c >= 9 && c <= 13) || c == '-' || c == '(' ||
						  c == '{' || c == '[' || c == '<');
		if (len == 1) {
			p[i] = (unsigned char)m;
		} else {
			p[i] = (unsigned char)(0xC0 | (m >> 6));
			p[i + 1] = (unsigned char)(0x80 | (m & 0x3F));
		}
		i += len;
	}
	if (mode == 1 && memmem(o.s->p, o.s->n, "\xc3\x9f", 2)) /* 'ß'.upper() is 'SS' */
		o = jinja_str_replace(r, o, jv_str(r, "\xc3\x9f", 2), jv_str(r, "SS", 2), -1);
	return o;
}

static bool prefix_match(struct jrender *r, struct jv s, struct jv x, bool end)
{
	if (x.t == JT_LIST) {
		for (size_t i = 0; i < x.l->n; i++)
			if (prefix_match(r, s, x.l->v[i], end))
				return true;
		return false;
	}
	if (x.t != JT_STR)
		jfail(r, ALICE_ERR_INVALID, "TypeError: %s first arg must be str or a tuple of str, not %s",
		      end ? "endswith" : "startswith", jv_typename(x));
	if (x.s->n > s.s->n)
		return false;
	return !memcmp(end ? s.s->p + s.s->n - x.s->n : s.s->p, x.s->p, x.s->n);
}

static struct jv str_method(struct jrender *r, struct jv s, const char *name, struct jargs *a)
{
	if (!strcmp(name, "split") || !strcmp(name, "rsplit"))
		return str_split(r, s, sarg(r, a, 0, "sep", false), iarg(r, a, 1, "maxsplit", -1), name[0] == 'r');
	if (!strcmp(name, "strip")) return jinja_strip(r, s, sarg(r, a, 0, "chars", false), true, true);
	if (!strcmp(name, "lstrip")) return jinja_strip(r, s, sarg(r, a, 0, "chars", false), true, false);
	if (!strcmp(name, "rstrip")) return jinja_strip(r, s, sarg(r, a, 0, "chars", false), false, true);
	if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
		struct jv *x = jarg(a, 0, NULL);
		if (!x)
			jfail(r, ALICE_ERR_INVALID, "TypeError: %s() takes at least 1 argument", name);
		return jv_bool(prefix_match(r, s, *x, name[0] == 'e'));
	}
	if (!strcmp(name, "replace"))
		return jinja_str_replace(r, s, sarg(r, a, 0, "old", true), sarg(r, a, 1, "new", true),
					 iarg(r, a, 2, "count", -1));
	if (!strcmp(name, "lower")) return jinja_case(r, s, 0);
	if (!strcmp(name, "upper")) return jinja_case(r, s, 1);
	if (!strcmp(name, "title")) return jinja_case(r, s, 2);
	if (!strcmp(name, "capitalize")) return jinja_case(r, s, 3);
	if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
		struct jv x = sarg(r, a, 0, "sub", true);
		int64_t found = -1, cnt = 0;
		for (size_t i = 0; i + x.s->n <= s.s->n; i++)
			if (!memcmp(s.s->p + i, x.s->p, x.s->n)) {
				if (found < 0 || name[0] == 'r')
					found = (int64_t)i;
				cnt++;
				if (name[0] == 'c' && x.s->n)
					i += x.s->n - 1;
			}
		if (name[0] == 'c')
			return jv_int(x.s->n ? cnt : (int64_t)s.s->n + 1);
		if (found < 0 && name[0] == 'i')
			jfail(r, ALICE_ERR_INVALID, "ValueError: substring not found");
		return jv_int(found);
	}
	if (!strcmp(name, "join")) {
		struct jv *x = jarg(a, 0, NULL);
		if (!x)
			jfail(r, ALICE_ERR_INVALID, "TypeError: join() takes exactly one argument");
		struct jv l = jinja_iterable(r, *x);
		struct jsb b = {.a = &r->arena};
		jsb_addn(&b, "", 0);
		for (size_t i = 0; i < l.l->n; i++) {
			if (l.l->v[i].t != JT_STR)
				jfail(r, ALICE_ERR_INVALID, "TypeError: sequence item %zu: expected str instance, %s found",
				      i, jv_typename(l.l->v[i]));
			if (i)
				jsb_addn(&b, s.s->p, s.s->n);
			jsb_addn(&b, l.l->v[i].s->p, l.l->v[i].s->n);
		}
		return jv_sb_take(r, &b);
	}
	if (!strcmp(name, "splitlines")) {
		struct jv l = jv_list(r);
		size_t st = 0;
		for (size_t i = 0; i < s.s->n; i++)
			if (s.s->p[i] == '\n' || s.s->p[i] == '\r') {
				jlist_push(r, l.l, jv_str(r, s.s->p + st, i - st));
				if (s.s->p[i] == '\r' && i + 1 < s.s->n && s.s->p[i + 1] == '\n')
					i++;
				st = i + 1;
			}
		if (st < s.s->n)
			jlist_push(r, l.l, jv_str(r, s.s->p + st, s.s->n - st));
		return l;
	}
	if (!strncmp(name, "is", 2)) {
		if (s.s->n == 0)
			return jv_bool(false);
		bool ok = true, cased = false;
		for (size_t i = 0; i < s.s->n; i++) {
			char c = s.s->p[i];
			bool d = c >= '0' && c <= '9';
			if (!strcmp(name, "isdigit")) ok &= d;
			else if (!strcmp(name, "isalpha")) ok &= alpha(c);
			else if (!strcmp(name, "isalnum")) ok &= alpha(c) || d;
			else if (!strcmp(name, "isspace")) ok &= py_space((unsigned char)c);
			else if (!strcmp(name, "islower")) { ok &= !(c >= 'A' && c <= 'Z'); cased |= c >= 'a' && c <= 'z'; }
			else if (!strcmp(name, "isupper")) { ok &= !(c >= 'a' && c <= 'z'); cased |= c >= 'A' && c <= 'Z'; }
		}
		if (!strcmp(name, "islower") || !strcmp(name, "isupper"))
			ok &= cased;
		return jv_bool(ok);
	}
	jfail(r, ALICE_ERR_INVALID, "TypeError: str.%s() is not supported", name);
}

struct jv jinja_method(struct jrender *r, struct jv self, const char *name, struct jargs *a)
{
	jstep(r);
	if (in_set(unsafe_methods, name) && (self.t == JT_LIST || self.t == JT_DICT))
		jfail(r, ALICE_ERR_INVALID, "SecurityError: access to attribute '%s' of '%s' object is unsafe.", name,
		      self.t == JT_LIST ? "list" : "dict");
	if (self.t == JT_STR)
		return str_method(r, self, name, a);
	if (self.t == JT_DICT) {
		if (!strcmp(name, "get")) {
			struct jv *k = jarg(a, 0, "key");
			if (!k)
				jfail(r, ALICE_ERR_INVALID, "TypeError: get expected at least 1 argument, got 0");
			struct jv *v = jdict_get(self.d, *k);
			if (v)
				return *v;
			struct jv *d = jarg(a, 1, "default");
			return d ? *d : jv_none();
		}
		if (!strcmp(name, "copy")) {
			struct jv d = jv_dict(r);
			for (size_t i = 0; i < self.d->n; i++)
				jdict_set(r, d.d, self.d->k[i], self.d->v[i]);
			return d;
		}
		struct jv l = jv_list(r);
		for (size_t i = 0; i < self.d->n; i++) {
			if (!strcmp(name, "keys")) {
				jlist_push(r, l.l, self.d->k[i]);
			} else if (!strcmp(name, "values")) {
				jlist_push(r, l.l, self.d->v[i]);
			} else {
				struct jv t = jv_list(r);
				t.tuple = 1;
				jlist_push(r, t.l, self.d->k[i]);
				jlist_push(r, t.l, self.d->v[i]);
				jlist_push(r, l.l, t);
			}
		}
		return l;
	}
	if (self.t == JT_LIST) {
		if (!strcmp(name, "copy")) {
			struct jv l = jv_list(r);
			for (size_t i = 0; i < self.l->n; i++)
				jlist_push(r, l.l, self.l->v[i]);
			return l;
		}
		struct jv *x = jarg(a, 0, NULL);
		if (!x)
			jfail(r, ALICE_ERR_INVALID, "TypeError: %s() takes exactly one argument", name);
		int64_t cnt = 0;
		for (size_t i = 0; i < self.l->n; i++)
			if (jv_eq(self.l->v[i], *x)) {
				if (name[0] == 'i')
					return jv_int((int64_t)i);
				cnt++;
			}
		if (name[0] == 'i')
			jfail(r, ALICE_ERR_INVALID, "ValueError: value is not in list");
		return jv_int(cnt);
	}
	jfail(r, ALICE_ERR_INVALID, "TypeError: '%s' object has no method '%s'", jv_typename(self), name);
}

/* Python's str % args for the conversions templates use: %s %r %d %i %f %x %%
 * with flags, width and precision, and %(name)s with a dict. */
struct jv jinja_str_format(struct jrender *r, struct jv fmt, struct jv args)
{
	struct jsb b = {.a = &r->arena};
	jsb_addn(&b, "", 0);
	const char *p = fmt.s->p, *e = p + fmt.s->n;
	size_t ai = 0;
	bool tuple = args.t == JT_LIST && args.tuple;
	while (p < e) {
		if (*p != '%') {
			jsb_addn(&b, p++, 1);
			continue;
		}
		p++;
		if (p < e && *p == '%') {
			jsb_add(&b, "%");
			p++;
			continue;
		}
		struct jv v;
		bool have = false;
		if (p < e && *p == '(') {
			const char *q = memchr(p, ')', (size_t)(e - p));
			if (!q || args.t != JT_DICT)
				jfail(r, ALICE_ERR_INVALID, "TypeError: format requires a mapping");
			struct jv k = jv_str(r, p + 1, (size_t)(q - p - 1));
			struct jv *x = jdict_get(args.d, k);
			if (!x)
				jfail(r, ALICE_ERR_INVALID, "KeyError: '%s'", k.s->p);
			v = *x;
			have = true;
			p = q + 1;
		}
		char spec[32] = "%";
		size_t sn = 1;
		while (p < e && strchr("-+ #0123456789.", *p) && sn < sizeof spec - 4)
			spec[sn++] = *p++;
		if (p >= e)
			jfail(r, ALICE_ERR_INVALID, "ValueError: incomplete format");
		char conv = *p++;
		if (!have) {
			if (tuple) {
				if (ai >= args.l->n)
					jfail(r, ALICE_ERR_INVALID, "TypeError: not enough arguments for format string");
				v = args.l->v[ai++];
			} else {
				if (ai++ > 0)
					jfail(r, ALICE_ERR_INVALID, "TypeError: not enough arguments for format string");
				v = args;
			}
		}
		switch (conv) {
		case 's': case 'r': {
			struct jsb t = {.a = &r->arena};
			jsb_addn(&t, "", 0);
			if (conv == 's')
				jv_str_append(r, &t, v);
			else
				jv_repr_append(r, &t, v);
			spec[sn++] = 's';
			spec[sn] = 0;
			jsb_addf(&b, spec, t.p);
			break;
		}
		case 'd': case 'i': case 'x': case 'X': case 'o':
			if (v.t == JT_FLOAT)
				v = jv_int((int64_t)v.f);
			if (v.t != JT_INT && v.t != JT_BOOL)
				jfail(r, ALICE_ERR_INVALID, "TypeError: %%%c format: a number is required, not %s", conv,
				      jv_typename(v));
			spec[sn++] = 'l';
			spec[sn++] = 'l';
			spec[sn++] = conv == 'i' ? 'd' : conv;
			spec[sn] = 0;
			jsb_addf(&b, spec, (long long)(v.t == JT_INT ? v.i : v.b));
			break;
		case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
			double d = v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : v.t == JT_BOOL ? v.b : 0;
			if (v.t != JT_FLOAT && v.t != JT_INT && v.t != JT_BOOL)
				jfail(r, ALICE_ERR_INVALID, "TypeError: must be real number, not %s", jv_typename(v));
			spec[sn++] = conv;
			spec[sn] = 0;
			jsb_addf(&b, spec, d);
			break;
		}
		default:
			jfail(r, ALICE_ERR_INVALID, "ValueError: unsupported format character '%c'", conv);
		}
	}
	if ((tuple && ai < args.l->n) || (!tuple && ai == 0 && args.t != JT_DICT && args.t != JT_LIST) /* a mapping or sequence may go unused */)
		jfail(r, ALICE_ERR_INVALID, "TypeError: not all arguments converted during string formatting");
	return jv_sb_take(r, &b);
}
