/* tests.c — the `is` tests of jinja2 (defined, string, mapping, ...). */
#define _GNU_SOURCE
#include "jinja/jinja_internal.h"

#include <math.h>
#include <string.h>

static struct jv arg0(struct jrender *r, const char *name, struct jargs *a)
{
	struct jv *v = jarg(a, 0, NULL);
	if (!v)
		jfail(r, ALICE_ERR_INVALID, "TypeError: test '%s' needs an argument", name);
	return *v;
}

static const char *const tests[] = {
	"defined", "undefined", "none", "string", "mapping", "iterable", "number", "integer", "float",
	"boolean", "sequence", "equalto", "eq", "==", "ne", "!=", "in", "true", "false", "callable",
	"odd", "even", "divisibleby", "lower", "upper", "sameas", "gt", "lt", "ge", "le", "greaterthan",
	"lessthan", "filter", "test", NULL,
};

bool jinja_has_test(const char *name)
{
	for (int i = 0; tests[i]; i++)
		if (!strcmp(tests[i], name))
			return true;
	return false;
}

bool jinja_test(struct jrender *r, const char *name, struct jv v, struct jargs *a)
{
	jstep(r);
	if (!strcmp(name, "defined")) return v.t != JT_UNDEF;
	if (!strcmp(name, "undefined")) return v.t == JT_UNDEF;
	if (!strcmp(name, "none")) return v.t == JT_NONE;
	if (!strcmp(name, "string")) return v.t == JT_STR;
	if (!strcmp(name, "mapping")) return v.t == JT_DICT;
	if (!strcmp(name, "iterable") || !strcmp(name, "sequence"))
		return v.t == JT_STR || v.t == JT_LIST || v.t == JT_DICT || v.t == JT_UNDEF ||
		       (!strcmp(name, "iterable") && v.t == JT_NS);
	if (!strcmp(name, "number")) return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL;
	if (!strcmp(name, "integer")) return v.t == JT_INT;
	if (!strcmp(name, "float")) return v.t == JT_FLOAT;
	if (!strcmp(name, "boolean")) return v.t == JT_BOOL;
	if (!strcmp(name, "true")) return v.t == JT_BOOL && v.b;
	if (!strcmp(name, "false")) return v.t == JT_BOOL && !v.b;
	if (!strcmp(name, "callable")) return v.t == JT_MACRO || v.t == JT_FUNC || v.t == JT_METHOD;
	if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "=="))
		return jv_eq(v, arg0(r, name, a));
	if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_eq(v, arg0(r, name, a));
	if (!strcmp(name, "sameas")) {
		struct jv o = arg0(r, name, a);
		if (v.t != o.t)
			return false;
		if (v.t == JT_NONE || v.t == JT_UNDEF) return true;
		if (v.t == JT_BOOL) return v.b == o.b;
		return jv_eq(v, o);
	}
	if (!strcmp(name, "gt") || !strcmp(name, "greaterthan")) return jv_cmp(r, v, arg0(r, name, a)) > 0;
	if (!strcmp(name, "lt") || !strcmp(name, "lessthan")) return jv_cmp(r, v, arg0(r, name, a)) < 0;
	if (!strcmp(name, "ge")) return jv_cmp(r, v, arg0(r, name, a)) >= 0;
	if (!strcmp(name, "le")) return jv_cmp(r, v, arg0(r, name, a)) <= 0;
	if (!strcmp(name, "in")) {
		struct jv h = arg0(r, name, a);
		if (h.t == JT_STR) {
			if (v.t != JT_STR)
				jfail(r, ALICE_ERR_INVALID, "TypeError: 'in <string>' requires string as left operand");
			return v.s->n == 0 || (v.s->n <= h.s->n && memmem(h.s->p, h.s->n, v.s->p, v.s->n));
		}
		if (h.t == JT_LIST) {
			for (size_t i = 0; i < h.l->n; i++)
				if (jv_eq(h.l->v[i], v))
					return true;
			return false;
		}
		if (h.t == JT_DICT) return jdict_get(h.d, v) != NULL;
		jfail(r, ALICE_ERR_INVALID, "TypeError: argument of type '%s' is not iterable", jv_typename(h));
	}
	if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
		if (v.t == JT_BOOL)
			v = jv_int(v.b);
		if (v.t == JT_FLOAT && strcmp(name, "divisibleby")) { /* value % 2 == 1 */
			double m = fmod(v.f, 2.0);
			if (m < 0)
				m += 2.0;
			return !strcmp(name, "odd") ? m == 1.0 : m == 0.0;
		}
		if (v.t != JT_INT)
			jfail(r, ALICE_ERR_INVALID, "TypeError: test '%s' needs a number, not %s", name, jv_typename(v));
		if (!strcmp(name, "odd")) return (v.i & 1) != 0;
		if (!strcmp(name, "even")) return (v.i & 1) == 0;
		struct jv d = arg0(r, name, a);
		if (d.t != JT_INT || d.i == 0)
			jfail(r, ALICE_ERR_INVALID, "TypeError: divisibleby needs a non-zero integer");
		return d.i == -1 || v.i % d.i == 0;
	}
	if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
		if (v.t != JT_STR)
			return false;
		bool up = !strcmp(name, "upper"), cased = false;
		for (size_t i = 0; i < v.s->n; i++) {
			char c = v.s->p[i];
			if ((c >= 'a' && c <= 'z' && up) || (c >= 'A' && c <= 'Z' && !up))
				return false;
			cased |= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		}
		return cased;
	}
	if (!strcmp(name, "filter")) return v.t == JT_STR && jinja_has_filter(v.s->p);
	if (!strcmp(name, "test")) return v.t == JT_STR && jinja_has_test(v.s->p);
	jfail(r, ALICE_ERR_INVALID, "TemplateAssertionError: No test named '%s'.", name);
}
