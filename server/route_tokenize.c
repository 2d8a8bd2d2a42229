/* route_tokenize.c — POST /tokenize and POST /detokenize (llama-server's
 * extensions): text <-> token ids with the model's tokenizer. */
#include <stdlib.h>

#include "alice/tokenizer.h"
#include "reply.h"
#include "routes.h"

void srv_route_tokenize(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	struct srv_api_error e;
	struct json_object *o = srv_json_parse_object(body, len, &e), *v;
	if (!o) {
		srv_reply_error(h, &e);
		return;
	}
	bool add_special = false, parse_special = true;
	if (!json_object_object_get_ex(o, "content", &v) || !json_object_is_type(v, json_type_string)) {
		srv_api_error_invalid(&e, "content", "'content' is required and must be a string");
		goto fail;
	}
	if (srv_json_get_bool(o, "add_special", &add_special, &e) < 0 ||
	    srv_json_get_bool(o, "parse_special", &parse_special, &e) < 0)
		goto fail;
	int32_t *toks = NULL;
	size_t n = 0;
	struct alice_error aerr = {{0}};
	const struct alice_tokenizer *tk = alice_model_tokenizer(s->model);
	enum alice_status st = alice_tokenizer_encode(tk, json_object_get_string(v),
						      (size_t)json_object_get_string_len(v), add_special,
						      parse_special, &toks, &n, &aerr);
	if (st != ALICE_OK) {
		srv_api_error_invalid(&e, "content", "cannot tokenize 'content': %s", aerr.msg);
		goto fail;
	}
	struct json_object *arr = json_object_new_array_ext((int)n);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, json_object_new_int(toks[i]));
	free(toks);
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "tokens", arr);
	json_object_put(o);
	srv_reply_json(h, 200, r);
	return;
fail:
	json_object_put(o);
	srv_reply_error(h, &e);
}

void srv_route_detokenize(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	struct srv_api_error e;
	struct json_object *o = srv_json_parse_object(body, len, &e), *v;
	int32_t *toks = NULL;
	if (!o) {
		srv_reply_error(h, &e);
		return;
	}
	if (!json_object_object_get_ex(o, "tokens", &v) || !json_object_is_type(v, json_type_array)) {
		srv_api_error_invalid(&e, "tokens", "'tokens' is required and must be an array of token ids");
		goto fail;
	}
	size_t n = json_object_array_length(v);
	int32_t n_vocab = alice_model_n_vocab(s->model);
	if (!(toks = malloc((n ? n : 1) * sizeof(*toks)))) {
		srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *t = json_object_array_get_idx(v, i);
		if (!t || !json_object_is_type(t, json_type_int) || json_object_get_int64(t) < 0 ||
		    json_object_get_int64(t) >= n_vocab) {
			srv_api_error_invalid(&e, "tokens", "tokens[%zu] must be a token id in [0, %d)", i,
					      n_vocab);
			goto fail;
		}
		toks[i] = (int32_t)json_object_get_int64(t);
	}
	char *text = NULL;
	size_t text_len = 0;
	struct alice_error aerr = {{0}};
	if (alice_tokenizer_decode(alice_model_tokenizer(s->model), toks, n, true, &text, &text_len, &aerr) !=
	    ALICE_OK) {
		srv_api_error_invalid(&e, "tokens", "cannot detokenize: %s", aerr.msg);
		goto fail;
	}
	size_t clean_len = 0;
	char *clean = alice_utf8_repair(text, text_len, &clean_len);
	free(text);
	if (!clean) {
		srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
		goto fail;
	}
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "content", json_object_new_string_len(clean, (int)clean_len));
	free(clean);
	free(toks);
	json_object_put(o);
	srv_reply_json(h, 200, r);
	return;
fail:
	free(toks);
	json_object_put(o);
	srv_reply_error(h, &e);
}
