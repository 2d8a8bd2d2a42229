/* jinja.c — the public entry points of the Jinja interpreter (alice/jinja.h):
 * compile into a template-owned arena, render into a render-owned arena,
 * copy the output out with malloc. */
#include "jinja/jinja_internal.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

struct alice_jinja {
	struct jarena arena;
	struct jn *root;
};

enum alice_status alice_jinja_compile(const char *src, size_t len, struct alice_jinja **out,
				      struct alice_error *err)
{
	*out = NULL;
	if (!src)
		return alice_fail(err, ALICE_ERR_INVALID, "template source is NULL");
	struct alice_jinja *t = calloc(1, sizeof *t);
	if (!t)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	jmp_buf jb;
	t->arena.jb = &jb;
	t->arena.err = err;
	t->arena.limit = 64 * len + (16u << 20); /* a compile is linear in the source */
	int rc = setjmp(jb);
	if (rc) {
		jarena_free(&t->arena);
		free(t);
		return rc == 3 ? ALICE_ERR_NOMEM : rc == 2 ? ALICE_ERR_RANGE : ALICE_ERR_INVALID;
	}
	t->root = jinja_parse(&t->arena, src, len, err, &jb);
	t->arena.jb = NULL;
	t->arena.err = NULL;
	*out = t;
	return ALICE_OK;
}

void alice_jinja_free(struct alice_jinja *tpl)
{
	if (!tpl)
		return;
	jarena_free(&tpl->arena);
	free(tpl);
}

enum alice_status alice_jinja_render(const struct alice_jinja *tpl, const struct json_object *ctx,
				     const struct alice_jinja_options *opt, char **out,
				     size_t *out_len, struct alice_error *err)
{
	*out = NULL;
	if (out_len)
		*out_len = 0;
	if (!tpl)
		return alice_fail(err, ALICE_ERR_INVALID, "no template");
	if (ctx && !json_object_is_type((struct json_object *)ctx, json_type_object))
		return alice_fail(err, ALICE_ERR_INVALID, "the template context must be a JSON object");
	struct alice_jinja_options o = {.now = -1};
	if (opt)
		o = *opt;
	struct jrender *r = calloc(1, sizeof *r);
	if (!r)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	r->err = err;
	r->st = ALICE_ERR_INVALID;
	r->max_steps = o.max_steps ? o.max_steps : 50000000u;
	r->max_output = o.max_output ? o.max_output : (64u << 20);
	r->max_depth = o.max_depth > 0 ? o.max_depth : 200;
	r->now = o.now;
	r->arena.limit = o.max_memory ? o.max_memory : (256u << 20);
	r->arena.jb = &r->jb;
	r->arena.err = err;
	enum alice_status st;
	int rc = setjmp(r->jb);
	if (rc) {
		st = rc == 3 ? ALICE_ERR_NOMEM : rc == 2 ? ALICE_ERR_RANGE : r->st;
		goto free_render;
	}
	r->globals = jarena_alloc(&r->arena, sizeof *r->globals);
	if (ctx) {
		json_object_object_foreach((struct json_object *)ctx, key, val) {
			struct jv k = jv_cstr(r, key);
			jdict_set(r, &r->globals->vars, k, jv_from_json(r, val, 0));
		}
	}
	struct jv res = jinja_render_root(r, tpl->root);
	char *s = malloc(res.s->n + 1);
	if (!s) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto free_render;
	}
	memcpy(s, res.s->p, res.s->n + 1);
	*out = s;
	if (out_len)
		*out_len = res.s->n;
	st = ALICE_OK;
free_render:
	jarena_free(&r->arena);
	free(r);
	return st;
}
