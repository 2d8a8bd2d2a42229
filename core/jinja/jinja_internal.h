/* jinja_internal.h — shared by core/jinja/: the arena, the value model, the
 * AST and the interpreter state.
 *
 * Memory: everything a compile creates lives in the template's arena, and
 * everything a render creates in the render's arena; both are freed whole.
 * Errors: the lexer/parser and the renderer stop by longjmp to the entry
 * point (alice_jinja_compile / alice_jinja_render), which is safe because no
 * memory outside the arena is held across a call that can fail. */
#ifndef ALICE_JINJA_INTERNAL_H
#define ALICE_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/jinja.h"
#include "alice/sbuf.h"
#include "alice/status.h"

/* ---- arena ---- */
struct jarena {
	struct jblock *head;
	size_t used, limit;
	jmp_buf *jb;           /* where an exhausted arena jumps */
	struct alice_error *err;
};
void *jarena_alloc(struct jarena *a, size_t n); /* zeroed; jumps when over limit */
void jarena_free(struct jarena *a);

/* A string builder whose memory is the arena's (nothing to free on an
 * error's longjmp). p is NUL-terminated once anything was added. */
struct jsb { struct jarena *a; char *p; size_t n, cap; };
void jsb_addn(struct jsb *b, const void *p, size_t n);
void jsb_add(struct jsb *b, const char *s);
void jsb_addf(struct jsb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- values ---- */
enum jt {
	JT_UNDEF, JT_NONE, JT_BOOL, JT_INT, JT_FLOAT, JT_STR,
	JT_LIST, JT_DICT, JT_NS, JT_MACRO, JT_FUNC, JT_METHOD,
};
struct jstr { size_t n; char p[]; };
struct jlist { size_t n, cap; struct jv *v; };
struct jdict { size_t n, cap; struct jv *k, *v; };
struct jv {
	uint8_t t;
	uint8_t gen;    /* a list that is really a Python generator (map/select...) */
	uint8_t tuple;
	uint8_t safe;   /* a str that is markupsafe.Markup (the |safe filter) */
	union {
		bool b;
		int64_t i;
		double f;
		struct jstr *s;    /* JT_STR; JT_UNDEF: the name, or NULL */
		struct jlist *l;
		struct jdict *d;   /* JT_DICT, JT_NS */
		struct jmacro *m;  /* JT_MACRO: a macro, a call block's caller, a recursive loop */
		int fn;            /* JT_FUNC: a global */
		struct jmethod *mt;
	};
};
struct jmethod { struct jv self; const char *name; };
struct jscope;
struct jmacro {
	const struct jn *node;   /* JK_MACRO, JK_CALLBLOCK (caller) or JK_FOR (recursive loop) */
	struct jscope *closure;  /* the scope it was defined in */
	int loop_depth;          /* JK_FOR: the depth of the loop that made it */
};

struct jrender;
struct jv jv_undef(struct jstr *name);
struct jv jv_none(void);
struct jv jv_bool(bool b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(struct jrender *r, const char *p, size_t n);
struct jv jv_cstr(struct jrender *r, const char *p);
struct jv jv_list(struct jrender *r);
struct jv jv_dict(struct jrender *r);
struct jstr *jstr_new(struct jarena *a, const char *p, size_t n);
void jlist_push(struct jrender *r, struct jlist *l, struct jv v);
void jdict_set(struct jrender *r, struct jdict *d, struct jv k, struct jv v);
struct jv *jdict_get(struct jdict *d, struct jv k);
struct jv *jdict_getc(struct jdict *d, const char *k);
bool jv_truthy(struct jv v);
bool jv_eq(struct jv a, struct jv b);
int jv_cmp(struct jrender *r, struct jv a, struct jv b); /* <0 0 >0; error if uncomparable */
const char *jv_typename(struct jv v);
void jv_str_append(struct jrender *r, struct jsb *b, struct jv v); /* str() */
void jv_repr_append(struct jrender *r, struct jsb *b, struct jv v); /* repr() */
struct jv jv_to_str(struct jrender *r, struct jv v);
void jv_tojson(struct jrender *r, struct jsb *b, struct jv v, int indent, const char *isep,
	       const char *ksep, bool sort, int depth);
struct jv jv_from_json(struct jrender *r, const struct json_object *o, int depth);
struct jv jinja_html_escape(struct jrender *r, struct jv s);
struct jv jv_sb_take(struct jrender *r, struct jsb *b);
void jv_fmt_float(struct jsb *b, double f);

/* ---- AST ---- */
enum jk {
	/* statements */
	JK_BLOCK, JK_TEXT, JK_OUT, JK_IF, JK_FOR, JK_SET, JK_SETBLOCK, JK_MACRO, JK_FILTERBLOCK,
	JK_BREAK, JK_CONTINUE, JK_CALLBLOCK,
	/* expressions */
	JK_LIT, JK_NAME, JK_ATTR, JK_ITEM, JK_SLICE, JK_CALL, JK_FILTER, JK_TEST, JK_BIN, JK_NOT,
	JK_NEG, JK_POS, JK_AND, JK_OR, JK_COND, JK_LIST, JK_TUPLE, JK_DICT,
};
enum jop { JO_ADD = 1, JO_SUB, JO_MUL, JO_DIV, JO_FDIV, JO_MOD, JO_POW, JO_CAT, JO_EQ, JO_NE, JO_LT,
	   JO_LE, JO_GT, JO_GE, JO_IN, JO_NOTIN };
struct jn {
	uint8_t k, op;
	bool neg;         /* JK_TEST: `is not`; JK_FOR: recursive */
	int line;
	struct jstr *s;   /* text, name, attribute, filter/test name */
	struct jv lit;
	struct jn *a, *b, *c, *d;
	struct jn **kids; /* block statements, args, list items, if conditions */
	int nk;
	struct jn **kids2; /* if bodies, dict values */
	int nk2;
	struct jstr **names; /* kwarg names (NULL = positional), params, for targets */
};

/* ---- lexer/parser ---- */
struct jparse;
struct jn *jinja_parse(struct jarena *a, const char *src, size_t len, struct alice_error *err,
		       jmp_buf *jb);

/* ---- renderer ---- */
struct jscope { struct jdict vars; struct jscope *parent; };
struct jrender {
	struct jarena arena;
	jmp_buf jb;
	struct alice_error *err;
	enum alice_status st;
	uint64_t steps, max_steps;
	size_t max_output;
	int depth, max_depth;
	int edepth;           /* C recursion of expression evaluation and value walks */
	int64_t now;
	struct jscope *globals;
	int line;
};
_Noreturn void jfail(struct jrender *r, enum alice_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void jstep(struct jrender *r);
/* Enter/leave a recursive evaluation or value walk; fails past JINJA_MAX_EDEPTH
 * (long filter or operator chains, deeply nested values) before the C stack. */
#define JINJA_MAX_EDEPTH 1500
void jenter(struct jrender *r);
static inline void jleave(struct jrender *r) { r->edepth--; }
struct jv jinja_render_root(struct jrender *r, const struct jn *root);

/* calls: args are positional first then keywords (names[i] != NULL) */
struct jargs { int n; struct jv *v; struct jstr **names; };
struct jv *jarg(struct jargs *a, int pos, const char *name); /* NULL if absent */
struct jv jcall_value(struct jrender *r, struct jv fn, struct jargs *a);
struct jv jinja_filter(struct jrender *r, const char *name, struct jv v, struct jargs *a);
bool jinja_test(struct jrender *r, const char *name, struct jv v, struct jargs *a);
struct jv jinja_method(struct jrender *r, struct jv self, const char *name, struct jargs *a);
bool jinja_has_method(struct jv self, const char *name);
struct jv jinja_getattr(struct jrender *r, struct jv obj, struct jv key, bool attr);
struct jv jinja_iterable(struct jrender *r, struct jv v); /* a list (dict keys, string chars) */
bool jinja_has_filter(const char *name);
bool jinja_has_test(const char *name);

#endif
