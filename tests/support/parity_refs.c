/* parity_refs.c — json-c reader for the llama.cpp reference files. */
#include "support/parity_refs.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dupstr(json_object *o)
{
	const char *s = o ? json_object_get_string(o) : NULL;
	return strdup(s ? s : "");
}

static json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static bool read_top(json_object *o, struct alice_ref_top *t)
{
	json_object *top = get(o, "top");
	if (!top || json_object_array_length(top) < ALICE_REF_TOPK)
		return false;
	for (int i = 0; i < ALICE_REF_TOPK; i++) {
		json_object *pair = json_object_array_get_idx(top, (size_t)i);
		t->id[i] = json_object_get_int(json_object_array_get_idx(pair, 0));
		t->logit[i] = (float)json_object_get_double(json_object_array_get_idx(pair, 1));
	}
	t->lse = (float)json_object_get_double(get(o, "lse"));
	return true;
}

static bool read_ints(json_object *a, int32_t **out, int32_t *n)
{
	if (!a)
		return false;
	*n = (int32_t)json_object_array_length(a);
	*out = calloc((size_t)*n + 1, sizeof(int32_t));
	if (!*out)
		return false;
	for (int32_t i = 0; i < *n; i++)
		(*out)[i] = json_object_get_int(json_object_array_get_idx(a, (size_t)i));
	return true;
}

struct alice_parity_refs *alice_parity_refs_load(const char *dir, const char *name, char *err, int err_len)
{
	char path[4096];
	err[0] = 0;
	snprintf(path, sizeof(path), "%s/refs/%s.json", dir, name);
	json_object *root = json_object_from_file(path);
	if (!root) {
		snprintf(err, (size_t)err_len, "%s: cannot read or parse (%s)", path, json_util_get_last_err());
		return NULL;
	}
	struct alice_parity_refs *r = calloc(1, sizeof(*r));
	if (!r)
		goto fail;
	r->model_file = dupstr(get(root, "model_file"));
	json_object *model = get(root, "model");
	r->n_vocab = json_object_get_int(get(model, "n_vocab"));
	r->add_bos = json_object_get_boolean(get(model, "add_bos"));
	r->bos = json_object_get_int(get(model, "bos"));
	r->eos = json_object_get_int(get(model, "eos"));
	json_object *prompts = get(root, "prompts");
	if (!prompts || r->n_vocab <= 0) {
		snprintf(err, (size_t)err_len, "%s: no prompts or n_vocab", path);
		goto fail;
	}
	r->n_prompts = (int32_t)json_object_array_length(prompts);
	r->prompts = calloc((size_t)r->n_prompts, sizeof(*r->prompts));
	if (!r->prompts)
		goto fail;
	int32_t max_row = -1;
	for (int32_t i = 0; i < r->n_prompts; i++) {
		json_object *po = json_object_array_get_idx(prompts, (size_t)i);
		struct alice_ref_prompt *p = &r->prompts[i];
		p->id = dupstr(get(po, "id"));
		p->kind = dupstr(get(po, "kind"));
		p->text = dupstr(get(po, "text"));
		p->add_special = json_object_get_boolean(get(po, "add_special"));
		p->parse_special = json_object_get_boolean(get(po, "parse_special"));
		if (!read_ints(get(po, "tokens"), &p->tokens, &p->n_tokens))
			goto bad;
		json_object *pos = get(po, "positions");
		if (!pos || (int32_t)json_object_array_length(pos) != p->n_tokens)
			goto bad;
		p->positions = calloc((size_t)p->n_tokens, sizeof(*p->positions));
		if (!p->positions)
			goto fail;
		for (int32_t t = 0; t < p->n_tokens; t++)
			if (!read_top(json_object_array_get_idx(pos, (size_t)t), &p->positions[t]))
				goto bad;
		json_object *lr = get(po, "last_logits_row");
		p->last_logits_row = lr && json_object_get_type(lr) == json_type_int ? json_object_get_int(lr) : -1;
		if (p->last_logits_row > max_row)
			max_row = p->last_logits_row;
		json_object *gen = get(po, "generation");
		if (!read_ints(get(gen, "tokens"), &p->gen_tokens, &p->n_gen))
			goto bad;
		json_object *steps = get(gen, "steps");
		if (!steps || (int32_t)json_object_array_length(steps) != p->n_gen)
			goto bad;
		p->gen_steps = calloc((size_t)p->n_gen + 1, sizeof(*p->gen_steps));
		if (!p->gen_steps)
			goto fail;
		for (int32_t s = 0; s < p->n_gen; s++)
			if (!read_top(json_object_array_get_idx(steps, (size_t)s), &p->gen_steps[s]))
				goto bad;
		p->gen_text = dupstr(get(gen, "text"));
		json_object *fe = get(gen, "first_eog_step");
		p->first_eog_step = fe && json_object_get_type(fe) == json_type_int ? json_object_get_int(fe) : -1;
		continue;
bad:
		snprintf(err, (size_t)err_len, "%s: prompt %d: malformed tokens/positions/generation", path, i);
		goto fail;
	}
	if (max_row >= 0) {
		snprintf(path, sizeof(path), "%s/refs/%s.bin", dir, name);
		FILE *f = fopen(path, "rb");
		if (!f) {
			snprintf(err, (size_t)err_len, "%s: cannot open", path);
			goto fail;
		}
		r->bin_rows = max_row + 1; /* little-endian float32, as on every host we run */
		size_t n = (size_t)r->bin_rows * (size_t)r->n_vocab;
		r->bin = malloc(n * sizeof(float));
		size_t got = r->bin ? fread(r->bin, sizeof(float), n, f) : 0;
		fclose(f);
		if (got != n) {
			snprintf(err, (size_t)err_len, "%s: short file (%zu of %zu floats)", path, got, n);
			goto fail;
		}
	}
	json_object_put(root);
	return r;
fail:
	if (err[0] == 0)
		snprintf(err, (size_t)err_len, "%s: out of memory", path);
	json_object_put(root);
	alice_parity_refs_free(r);
	return NULL;
}

void alice_parity_refs_free(struct alice_parity_refs *r)
{
	if (!r)
		return;
	for (int32_t i = 0; i < r->n_prompts; i++) {
		struct alice_ref_prompt *p = &r->prompts[i];
		free(p->id);
		free(p->kind);
		free(p->text);
		free(p->tokens);
		free(p->positions);
		free(p->gen_tokens);
		free(p->gen_steps);
		free(p->gen_text);
	}
	free(r->prompts);
	free(r->model_file);
	free(r->bin);
	free(r);
}
