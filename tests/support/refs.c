/* refs.c — reads the tokenizer-relevant part of a llama.cpp refs JSON. */
#include "support/refs.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_mem(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

static char *get_str(json_object *o, const char *key, size_t *len)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	size_t n = (size_t)json_object_get_string_len(v);
	if (len)
		*len = n;
	return dup_mem(json_object_get_string(v), n);
}

static int hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static char *unhex(const char *h, size_t *len)
{
	size_t n = strlen(h) / 2;
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int a = hexv(h[2 * i]), b = hexv(h[2 * i + 1]);
		if (a < 0 || b < 0) {
			free(p);
			return NULL;
		}
		p[i] = (char)(a * 16 + b);
	}
	p[n] = 0;
	*len = n;
	return p;
}

static int32_t *get_ids(json_object *o, const char *key, size_t *n)
{
	json_object *v;
	*n = 0;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
		return NULL;
	size_t k = json_object_array_length(v);
	int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
	if (!ids)
		return NULL;
	for (size_t i = 0; i < k; i++)
		ids[i] = (int32_t)json_object_get_int(json_object_array_get_idx(v, i));
	*n = k;
	return ids;
}

static bool get_bool(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static int32_t get_int(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) ? (int32_t)json_object_get_int(v) : -1;
}

struct alice_tok_refs *alice_tok_refs_load(const char *path, char *err, size_t err_len)
{
	json_object *root = json_object_from_file(path);
	if (!root) {
		snprintf(err, err_len, "%s: cannot read or parse JSON", path);
		return NULL;
	}
	struct alice_tok_refs *r = calloc(1, sizeof *r);
	json_object *model, *prompts;
	if (!r || !json_object_object_get_ex(root, "model", &model) ||
	    !json_object_object_get_ex(root, "prompts", &prompts) || !json_object_is_type(prompts, json_type_array)) {
		snprintf(err, err_len, "%s: no model/prompts", path);
		goto fail;
	}
	r->model_file = get_str(root, "model_file", NULL);
	r->n_vocab = get_int(model, "n_vocab");
	r->bos = get_int(model, "bos");
	r->eos = get_int(model, "eos");
	r->add_bos = get_bool(model, "add_bos");
	r->add_eos = get_bool(model, "add_eos");
	r->n_prompts = json_object_array_length(prompts);
	r->prompts = calloc(r->n_prompts ? r->n_prompts : 1, sizeof *r->prompts);
	if (!r->prompts)
		goto oom;
	for (size_t i = 0; i < r->n_prompts; i++) {
		json_object *p = json_object_array_get_idx(prompts, i), *v, *gen;
		struct alice_tok_ref_prompt *q = &r->prompts[i];
		q->id = get_str(p, "id", NULL);
		q->text = get_str(p, "text", &q->text_len);
		q->add_special = get_bool(p, "add_special");
		q->parse_special = get_bool(p, "parse_special");
		q->tokens = get_ids(p, "tokens", &q->n_tokens);
		if (!q->id || !q->text || !q->tokens)
			goto bad;
		if (json_object_object_get_ex(p, "token_pieces_hex", &v) && json_object_is_type(v, json_type_array) &&
		    json_object_array_length(v) == q->n_tokens) {
			q->pieces = calloc(q->n_tokens + 1, sizeof *q->pieces);
			q->piece_lens = calloc(q->n_tokens + 1, sizeof *q->piece_lens);
			if (!q->pieces || !q->piece_lens)
				goto oom;
			for (size_t k = 0; k < q->n_tokens; k++)
				if (!(q->pieces[k] = unhex(json_object_get_string(json_object_array_get_idx(v, k)),
							   &q->piece_lens[k])))
					goto bad;
		}
		if (json_object_object_get_ex(p, "generation", &gen)) {
			q->gen_tokens = get_ids(gen, "tokens", &q->n_gen);
			char *hex = get_str(gen, "text_hex", NULL);
			if (hex) {
				q->gen_text = unhex(hex, &q->gen_text_len);
				free(hex);
			}
			if (get_bool(gen, "text_valid_utf8"))
				q->gen_text_special = get_str(gen, "text_special", &q->gen_text_special_len);
			if (!q->gen_tokens || !q->gen_text)
				goto bad;
		}
	}
	json_object_put(root);
	return r;
bad:
	snprintf(err, err_len, "%s: malformed prompt entry", path);
	goto fail;
oom:
	snprintf(err, err_len, "%s: out of memory", path);
fail:
	json_object_put(root);
	alice_tok_refs_free(r);
	return NULL;
}

void alice_tok_refs_free(struct alice_tok_refs *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_prompts && r->prompts; i++) {
		struct alice_tok_ref_prompt *q = &r->prompts[i];
		free(q->id);
		free(q->text);
		free(q->tokens);
		for (size_t k = 0; q->pieces && k < q->n_tokens; k++)
			free(q->pieces[k]);
		free(q->pieces);
		free(q->piece_lens);
		free(q->gen_tokens);
		free(q->gen_text);
		free(q->gen_text_special);
	}
	free(r->prompts);
	free(r->model_file);
	free(r);
}
