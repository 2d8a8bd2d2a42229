/* parser.c — tokens to the AST (struct jn), following jinja2's grammar and
 * operator precedence (or < and < not < comparisons < +,- < ~ < *,/,//,% <
 * ** < unary < postfix/filters/tests). */
#include "jinja/lexer.h"

#include <stdio.h>
#include <string.h>

struct jparse {
	struct jarena *a;
	struct jtok *t;
	size_t n, pos;
	struct alice_error *err;
	jmp_buf *jb;
	int depth;
};

_Noreturn static void pfail(struct jparse *p, const char *fmt, const char *arg)
{
	char msg[256];
	snprintf(msg, sizeof msg, fmt, arg ? arg : "");
	alice_error_set(p->err, "TemplateSyntaxError: line %d: %s", p->t[p->pos].line, msg);
	longjmp(*p->jb, 1);
}

static struct jtok *cur(struct jparse *p) { return &p->t[p->pos]; }
static struct jtok *next(struct jparse *p)
{
	struct jtok *t = &p->t[p->pos];
	if (t->type != JTT_EOF)
		p->pos++;
	return t;
}
static bool is_op(struct jparse *p, const char *op)
{
	struct jtok *t = cur(p);
	return t->type == JTT_OP && strcmp(t->s->p, op) == 0;
}
static bool is_name(struct jparse *p, const char *name)
{
	struct jtok *t = cur(p);
	return t->type == JTT_NAME && strcmp(t->s->p, name) == 0;
}
static bool is_name_at(struct jparse *p, size_t off, const char *name)
{
	if (p->pos + off >= p->n)
		return false;
	struct jtok *t = &p->t[p->pos + off];
	return t->type == JTT_NAME && strcmp(t->s->p, name) == 0;
}
static bool accept_op(struct jparse *p, const char *op)
{
	if (!is_op(p, op))
		return false;
	next(p);
	return true;
}
static bool accept_name(struct jparse *p, const char *name)
{
	if (!is_name(p, name))
		return false;
	next(p);
	return true;
}
static void expect_op(struct jparse *p, const char *op)
{
	if (!accept_op(p, op))
		pfail(p, "expected '%s'", op);
}
static struct jstr *expect_ident(struct jparse *p)
{
	if (cur(p)->type != JTT_NAME)
		pfail(p, "expected a name%s", "");
	return next(p)->s;
}
static void expect_block_end(struct jparse *p)
{
	if (cur(p)->type != JTT_BLOCK_END)
		pfail(p, "expected end of statement block%s", "");
	next(p);
}

static struct jn *node(struct jparse *p, enum jk k)
{
	struct jn *n = jarena_alloc(p->a, sizeof *n);
	n->k = (uint8_t)k;
	n->line = cur(p)->line;
	return n;
}

struct vec { struct jn **v; struct jstr **names; int n, cap; };
static void vpush(struct jparse *p, struct vec *v, struct jn *x, struct jstr *name)
{
	if (v->n == v->cap) {
		int cap = v->cap ? v->cap * 2 : 4;
		struct jn **nv = jarena_alloc(p->a, (size_t)cap * sizeof *nv);
		struct jstr **nn = jarena_alloc(p->a, (size_t)cap * sizeof *nn);
		if (v->n) {
			memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
			memcpy(nn, v->names, (size_t)v->n * sizeof *nn);
		}
		v->v = nv;
		v->names = nn;
		v->cap = cap;
	}
	v->names[v->n] = name;
	v->v[v->n++] = x;
}

static struct jn *parse_expr(struct jparse *p);
static struct jn *parse_or(struct jparse *p);
static struct jn *parse_unary(struct jparse *p, bool with_filter);

static void enter(struct jparse *p)
{
	if (++p->depth > 200)
		pfail(p, "expression nested too deeply%s", "");
}

/* (args) of a call, filter or test; the '(' is current */
static void parse_args(struct jparse *p, struct jn *n)
{
	struct vec v = {0};
	expect_op(p, "(");
	while (!is_op(p, ")")) {
		if (v.n)
			expect_op(p, ",");
		if (is_op(p, ")"))
			break;
		struct jstr *name = NULL;
		if (cur(p)->type == JTT_NAME && p->pos + 1 < p->n && p->t[p->pos + 1].type == JTT_OP &&
		    strcmp(p->t[p->pos + 1].s->p, "=") == 0) {
			name = next(p)->s;
			next(p);
		} else if (is_op(p, "*") || is_op(p, "**")) {
			pfail(p, "*args and **kwargs are not supported%s", "");
		}
		vpush(p, &v, parse_expr(p), name);
	}
	expect_op(p, ")");
	n->kids = v.v;
	n->names = v.names;
	n->nk = v.n;
}

static struct jn *parse_tuple(struct jparse *p, bool condexpr, bool explicit_parens);

static struct jn *parse_primary(struct jparse *p)
{
	struct jtok *t = cur(p);
	struct jn *n;
	switch (t->type) {
	case JTT_NAME: {
		const char *s = t->s->p;
		n = node(p, JK_LIT);
		if (!strcmp(s, "true") || !strcmp(s, "True"))
			n->lit = jv_bool(true);
		else if (!strcmp(s, "false") || !strcmp(s, "False"))
			n->lit = jv_bool(false);
		else if (!strcmp(s, "none") || !strcmp(s, "None"))
			n->lit = jv_none();
		else {
			n->k = JK_NAME;
			n->s = t->s;
		}
		next(p);
		return n;
	}
	case JTT_STRING: {
		n = node(p, JK_LIT);
		struct jstr *s = next(p)->s;
		while (cur(p)->type == JTT_STRING) { /* adjacent literals concatenate */
			struct jstr *o = next(p)->s;
			struct jstr *c = jarena_alloc(p->a, sizeof *c + s->n + o->n + 1);
			memcpy(c->p, s->p, s->n);
			memcpy(c->p + s->n, o->p, o->n);
			c->n = s->n + o->n;
			s = c;
		}
		n->lit.t = JT_STR;
		n->lit.s = s;
		return n;
	}
	case JTT_INT:
		n = node(p, JK_LIT);
		n->lit = jv_int(next(p)->i);
		return n;
	case JTT_FLOAT:
		n = node(p, JK_LIT);
		n->lit = jv_float(next(p)->f);
		return n;
	case JTT_OP:
		if (accept_op(p, "(")) {
			n = parse_tuple(p, true, true);
			expect_op(p, ")");
			return n;
		}
		if (accept_op(p, "[")) {
			n = node(p, JK_LIST);
			struct vec v = {0};
			while (!is_op(p, "]")) {
				if (v.n)
					expect_op(p, ",");
				if (is_op(p, "]"))
					break;
				vpush(p, &v, parse_expr(p), NULL);
			}
			expect_op(p, "]");
			n->kids = v.v;
			n->nk = v.n;
			return n;
		}
		if (accept_op(p, "{")) {
			n = node(p, JK_DICT);
			struct vec k = {0}, v = {0};
			while (!is_op(p, "}")) {
				if (k.n)
					expect_op(p, ",");
				if (is_op(p, "}"))
					break;
				vpush(p, &k, parse_expr(p), NULL);
				expect_op(p, ":");
				vpush(p, &v, parse_expr(p), NULL);
			}
			expect_op(p, "}");
			n->kids = k.v;
			n->nk = k.n;
			n->kids2 = v.v;
			n->nk2 = v.n;
			return n;
		}
		break;
	default: break;
	}
	pfail(p, "unexpected '%s'", t->type == JTT_EOF ? "end of template" : t->s ? t->s->p : "end of tag");
}

static struct jn *parse_subscript(struct jparse *p, struct jn *obj)
{
	if (accept_op(p, ".")) {
		struct jn *n = node(p, JK_ATTR);
		n->a = obj;
		if (cur(p)->type == JTT_INT) { /* x.0 */
			n->k = JK_ITEM;
			n->b = node(p, JK_LIT);
			n->b->lit = jv_int(next(p)->i);
			return n;
		}
		n->s = expect_ident(p);
		return n;
	}
	expect_op(p, "[");
	struct jn *args[3] = {NULL, NULL, NULL};
	bool slice = false;
	int i = 0;
	while (1) {
		if (!is_op(p, ":") && !is_op(p, "]"))
			args[i] = parse_expr(p);
		if (accept_op(p, ":")) {
			slice = true;
			if (++i > 2)
				pfail(p, "bad slice%s", "");
			continue;
		}
		break;
	}
	if (!slice && is_op(p, ",")) {
		pfail(p, "tuple subscripts are not supported%s", "");
	}
	expect_op(p, "]");
	struct jn *n = node(p, slice ? JK_SLICE : JK_ITEM);
	n->a = obj;
	if (!slice && !args[0])
		pfail(p, "expected an index%s", "");
	n->b = args[0];
	n->c = args[1];
	n->d = args[2];
	return n;
}

static struct jn *parse_postfix(struct jparse *p, struct jn *n)
{
	while (1) {
		if (is_op(p, ".") || is_op(p, "[")) {
			n = parse_subscript(p, n);
		} else if (is_op(p, "(")) {
			struct jn *c = node(p, JK_CALL);
			c->a = n;
			parse_args(p, c);
			n = c;
		} else {
			return n;
		}
	}
}

static struct jn *parse_filter(struct jparse *p, struct jn *subj)
{
	struct jn *n = node(p, JK_FILTER);
	n->a = subj;
	n->s = expect_ident(p);
	if (is_op(p, "("))
		parse_args(p, n);
	return n;
}

static struct jn *parse_filter_expr(struct jparse *p, struct jn *n)
{
	while (1) {
		if (accept_op(p, "|")) {
			n = parse_filter(p, n);
		} else if (is_name(p, "is")) {
			next(p);
			struct jn *t = node(p, JK_TEST);
			t->a = n;
			t->neg = accept_name(p, "not");
			t->s = expect_ident(p);
			if (is_op(p, "(")) {
				parse_args(p, t);
			} else {
				struct jtok *c = cur(p);
				bool arg = c->type == JTT_STRING || c->type == JTT_INT || c->type == JTT_FLOAT ||
					   (c->type == JTT_NAME && strcmp(c->s->p, "else") && strcmp(c->s->p, "or") &&
					    strcmp(c->s->p, "and") && strcmp(c->s->p, "if") && strcmp(c->s->p, "in") &&
					    strcmp(c->s->p, "is") && strcmp(c->s->p, "not") && strcmp(c->s->p, "recursive")) ||
					   (c->type == JTT_OP && (!strcmp(c->s->p, "[") || !strcmp(c->s->p, "{") ||
								  !strcmp(c->s->p, "-")));
				if (arg) {
					struct vec v = {0};
					vpush(p, &v, parse_postfix(p, parse_primary(p)), NULL);
					t->kids = v.v;
					t->names = v.names;
					t->nk = 1;
				}
			}
			n = t;
		} else if (is_op(p, "(")) {
			struct jn *c = node(p, JK_CALL);
			c->a = n;
			parse_args(p, c);
			n = c;
		} else {
			return n;
		}
	}
}

static struct jn *parse_unary(struct jparse *p, bool with_filter)
{
	enter(p);
	struct jn *n;
	if (accept_op(p, "-")) {
		n = node(p, JK_NEG);
		n->a = parse_unary(p, false);
	} else if (accept_op(p, "+")) {
		n = node(p, JK_POS);
		n->a = parse_unary(p, false);
	} else {
		n = parse_postfix(p, parse_primary(p));
	}
	if (with_filter)
		n = parse_filter_expr(p, n);
	p->depth--;
	return n;
}

static struct jn *bin(struct jparse *p, int op, struct jn *l, struct jn *r)
{
	struct jn *n = node(p, JK_BIN);
	n->op = (uint8_t)op;
	n->a = l;
	n->b = r;
	return n;
}

static struct jn *parse_pow(struct jparse *p)
{
	struct jn *l = parse_unary(p, true);
	while (accept_op(p, "**"))
		l = bin(p, JO_POW, l, parse_unary(p, true));
	return l;
}

static struct jn *parse_math2(struct jparse *p)
{
	struct jn *l = parse_pow(p);
	while (1) {
		int op = is_op(p, "*") ? JO_MUL : is_op(p, "/") ? JO_DIV : is_op(p, "//") ? JO_FDIV
			 : is_op(p, "%") ? JO_MOD : 0;
		if (!op)
			return l;
		next(p);
		l = bin(p, op, l, parse_pow(p));
	}
}

static struct jn *parse_concat(struct jparse *p)
{
	struct jn *l = parse_math2(p);
	while (accept_op(p, "~"))
		l = bin(p, JO_CAT, l, parse_math2(p));
	return l;
}

static struct jn *parse_math1(struct jparse *p)
{
	struct jn *l = parse_concat(p);
	while (1) {
		int op = is_op(p, "+") ? JO_ADD : is_op(p, "-") ? JO_SUB : 0;
		if (!op)
			return l;
		next(p);
		l = bin(p, op, l, parse_concat(p));
	}
}

static struct jn *parse_compare(struct jparse *p)
{
	struct jn *l = parse_math1(p);
	struct jn *res = NULL;
	while (1) {
		int op = 0;
		if (is_op(p, "==")) op = JO_EQ;
		else if (is_op(p, "!=")) op = JO_NE;
		else if (is_op(p, "<")) op = JO_LT;
		else if (is_op(p, "<=")) op = JO_LE;
		else if (is_op(p, ">")) op = JO_GT;
		else if (is_op(p, ">=")) op = JO_GE;
		else if (is_name(p, "in")) op = JO_IN;
		else if (is_name(p, "not") && is_name_at(p, 1, "in")) {
			op = JO_NOTIN;
			next(p);
		}
		if (!op)
			return res ? res : l;
		next(p);
		struct jn *r = parse_math1(p);
		struct jn *c = bin(p, op, l, r);
		if (res) { /* a < b < c: (a < b) and (b < c) */
			struct jn *a = node(p, JK_AND);
			a->a = res;
			a->b = c;
			res = a;
		} else {
			res = c;
		}
		l = r;
	}
}

static struct jn *parse_not(struct jparse *p)
{
	if (is_name(p, "not")) {
		enter(p);
		next(p);
		struct jn *n = node(p, JK_NOT);
		n->a = parse_not(p);
		p->depth--;
		return n;
	}
	return parse_compare(p);
}

static struct jn *parse_and(struct jparse *p)
{
	struct jn *l = parse_not(p);
	while (accept_name(p, "and")) {
		struct jn *n = node(p, JK_AND);
		n->a = l;
		n->b = parse_not(p);
		l = n;
	}
	return l;
}

static struct jn *parse_or(struct jparse *p)
{
	struct jn *l = parse_and(p);
	while (accept_name(p, "or")) {
		struct jn *n = node(p, JK_OR);
		n->a = l;
		n->b = parse_and(p);
		l = n;
	}
	return l;
}

static struct jn *parse_expr_c(struct jparse *p, bool condexpr)
{
	enter(p);
	struct jn *e = parse_or(p);
	while (condexpr && is_name(p, "if")) {
		next(p);
		struct jn *n = node(p, JK_COND);
		n->b = e;
		n->a = parse_or(p);
		if (accept_name(p, "else"))
			n->c = parse_expr_c(p, true);
		e = n;
	}
	p->depth--;
	return e;
}

static struct jn *parse_expr(struct jparse *p) { return parse_expr_c(p, true); }

static struct jn *parse_tuple(struct jparse *p, bool condexpr, bool explicit_parens)
{
	struct vec v = {0};
	bool comma = false;
	int line = cur(p)->line;
	while (1) {
		if (v.n) {
			if (!accept_op(p, ","))
				break;
			comma = true;
		}
		if (is_op(p, ")") || is_op(p, "]") || cur(p)->type == JTT_BLOCK_END ||
		    cur(p)->type == JTT_VAR_END || (is_name(p, "in") && !condexpr) || is_op(p, "="))
			break;
		vpush(p, &v, parse_expr_c(p, condexpr), NULL);
	}
	if (!comma && v.n == 1)
		return v.v[0];
	if (!v.n && !explicit_parens)
		pfail(p, "expected an expression%s", "");
	struct jn *n = node(p, JK_TUPLE);
	n->line = line;
	n->kids = v.v;
	n->nk = v.n;
	return n;
}

/* ---- statements ---- */
static struct jn *parse_body(struct jparse *p, const char *const *ends);

static bool at_block(struct jparse *p, const char *const *names)
{
	if (cur(p)->type != JTT_BLOCK_BEGIN || p->pos + 1 >= p->n)
		return false;
	struct jtok *t = &p->t[p->pos + 1];
	if (t->type != JTT_NAME)
		return false;
	for (int i = 0; names[i]; i++)
		if (!strcmp(t->s->p, names[i]))
			return true;
	return false;
}

static const char *end_name(struct jparse *p)
{
	next(p); /* {% */
	return next(p)->s->p;
}

/* name[=default], ... ) of a macro or call block, after its "(" */
static void parse_params(struct jparse *p, struct vec *v)
{
	while (!is_op(p, ")")) {
		if (v->n)
			expect_op(p, ",");
		if (is_op(p, ")"))
			break;
		struct jstr *pn = expect_ident(p);
		struct jn *def = NULL;
		if (accept_op(p, "="))
			def = parse_expr(p);
		vpush(p, v, def, pn);
	}
	expect_op(p, ")");
}

static struct jn *parse_stmt(struct jparse *p)
{
	struct jtok *kw = cur(p);
	if (kw->type != JTT_NAME)
		pfail(p, "expected a statement name%s", "");
	const char *k = kw->s->p;
	int line = kw->line;
	next(p);
	struct jn *n;
	if (!strcmp(k, "if")) {
		n = node(p, JK_IF);
		n->line = line;
		struct vec c = {0}, b = {0};
		vpush(p, &c, parse_expr(p), NULL);
		expect_block_end(p);
		static const char *const ends[] = {"elif", "else", "endif", NULL};
		while (1) {
			vpush(p, &b, parse_body(p, ends), NULL);
			const char *e = end_name(p);
			if (!strcmp(e, "elif")) {
				vpush(p, &c, parse_expr(p), NULL);
				expect_block_end(p);
			} else if (!strcmp(e, "else")) {
				expect_block_end(p);
				static const char *const ends2[] = {"endif", NULL};
				n->a = parse_body(p, ends2);
				end_name(p);
				expect_block_end(p);
				break;
			} else {
				expect_block_end(p);
				break;
			}
		}
		n->kids = c.v;
		n->nk = c.n;
		n->kids2 = b.v;
		n->nk2 = b.n;
		return n;
	}
	if (!strcmp(k, "for")) {
		n = node(p, JK_FOR);
		n->line = line;
		struct vec t = {0};
		do {
			vpush(p, &t, NULL, expect_ident(p));
		} while (accept_op(p, ","));
		n->names = t.names;
		n->nk = t.n;
		if (!accept_name(p, "in"))
			pfail(p, "expected 'in'%s", "");
		n->a = parse_tuple(p, false, false);
		if (accept_name(p, "if"))
			n->b = parse_expr_c(p, false);
		if (accept_name(p, "recursive"))
			n->neg = true;
		expect_block_end(p);
		static const char *const ends[] = {"else", "endfor", NULL};
		n->c = parse_body(p, ends);
		if (!strcmp(end_name(p), "else")) {
			expect_block_end(p);
			static const char *const ends2[] = {"endfor", NULL};
			n->d = parse_body(p, ends2);
			end_name(p);
		}
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "set")) {
		struct jstr *name = expect_ident(p);
		if (cur(p)->type == JTT_BLOCK_END || is_op(p, "|")) {
			n = node(p, JK_SETBLOCK);
			n->line = line;
			n->s = name;
			struct jn *f = NULL;
			while (accept_op(p, "|")) {
				f = parse_filter(p, f);
			}
			n->b = f; /* filter chain over a NULL subject */
			expect_block_end(p);
			static const char *const ends[] = {"endset", NULL};
			n->a = parse_body(p, ends);
			end_name(p);
			expect_block_end(p);
			return n;
		}
		n = node(p, JK_SET);
		n->line = line;
		struct vec t = {0};
		vpush(p, &t, NULL, name);
		if (accept_op(p, ".")) {
			n->c = node(p, JK_NAME); /* namespace attribute: c->s = ns, s = attr */
			n->c->s = name;
			t.names[0] = expect_ident(p);
		} else {
			while (accept_op(p, ","))
				vpush(p, &t, NULL, expect_ident(p));
		}
		n->names = t.names;
		n->nk = t.n;
		expect_op(p, "=");
		n->a = parse_tuple(p, true, false);
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "macro")) {
		n = node(p, JK_MACRO);
		n->line = line;
		n->s = expect_ident(p);
		struct vec v = {0};
		expect_op(p, "(");
		parse_params(p, &v);
		n->kids = v.v;
		n->names = v.names;
		n->nk = v.n;
		expect_block_end(p);
		static const char *const ends[] = {"endmacro", NULL};
		n->a = parse_body(p, ends);
		end_name(p);
		if (cur(p)->type == JTT_NAME)
			next(p);
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "call")) {
		/* {% call[(params)] macro(args) %}body{% endcall %}: the body is `caller` */
		n = node(p, JK_CALLBLOCK);
		n->line = line;
		n->s = jstr_new(p->a, "caller", 6);
		struct vec v = {0};
		if (accept_op(p, "("))
			parse_params(p, &v);
		n->kids = v.v;
		n->names = v.names;
		n->nk = v.n;
		n->b = parse_expr(p);
		if (n->b->k != JK_CALL)
			pfail(p, "expected a call in the call block%s", "");
		expect_block_end(p);
		static const char *const ends[] = {"endcall", NULL};
		n->a = parse_body(p, ends);
		end_name(p);
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "filter")) {
		n = node(p, JK_FILTERBLOCK);
		n->line = line;
		struct jn *f = parse_filter(p, NULL);
		while (accept_op(p, "|"))
			f = parse_filter(p, f);
		n->b = f;
		expect_block_end(p);
		static const char *const ends[] = {"endfilter", NULL};
		n->a = parse_body(p, ends);
		end_name(p);
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "generation")) {
		expect_block_end(p);
		static const char *const ends[] = {"endgeneration", NULL};
		n = parse_body(p, ends);
		end_name(p);
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "break") || !strcmp(k, "continue")) {
		n = node(p, !strcmp(k, "break") ? JK_BREAK : JK_CONTINUE);
		n->line = line;
		expect_block_end(p);
		return n;
	}
	p->pos--;
	pfail(p, "unknown tag '%s'", k);
}

static struct jn *parse_body(struct jparse *p, const char *const *ends)
{
	struct jn *b = node(p, JK_BLOCK);
	struct vec v = {0};
	enter(p);
	while (1) {
		struct jtok *t = cur(p);
		if (t->type == JTT_EOF) {
			if (ends) {
				char want[128] = "";
				for (int i = 0; ends[i]; i++) {
					size_t k = strlen(want);
					snprintf(want + k, sizeof want - k, "%s'%s'", i ? " or " : "", ends[i]);
				}
				pfail(p, "unexpected end of template, expected %s", want);
			}
			break;
		}
		if (t->type == JTT_TEXT) {
			struct jn *x = node(p, JK_TEXT);
			x->s = next(p)->s;
			vpush(p, &v, x, NULL);
		} else if (t->type == JTT_VAR_BEGIN) {
			next(p);
			struct jn *x = node(p, JK_OUT);
			x->a = parse_tuple(p, true, false);
			if (cur(p)->type != JTT_VAR_END)
				pfail(p, "expected end of print statement%s", "");
			next(p);
			vpush(p, &v, x, NULL);
		} else if (t->type == JTT_BLOCK_BEGIN) {
			if (ends && at_block(p, ends))
				break;
			next(p);
			vpush(p, &v, parse_stmt(p), NULL);
		} else {
			pfail(p, "unexpected token%s", "");
		}
	}
	p->depth--;
	b->kids = v.v;
	b->nk = v.n;
	return b;
}

struct jn *jinja_parse(struct jarena *a, const char *src, size_t len, struct alice_error *err,
		       jmp_buf *jb)
{
	size_t n;
	struct jtok *t = jinja_lex(a, src, len, &n, err, jb);
	struct jparse p = {.a = a, .t = t, .n = n, .err = err, .jb = jb};
	return parse_body(&p, NULL);
}
