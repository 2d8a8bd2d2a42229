/* route_info.c — GET /health, GET /v1/models and GET /v1/models/{id}. */
#include <string.h>

#include "alice/chat_template.h"

#include "reply.h"
#include "routes.h"

void srv_route_health(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	(void)body;
	(void)len;
	if (s->state == SRV_LOADING) {
		struct srv_api_error e;
		srv_api_error_set(&e, 503, "unavailable_error", "model_loading", NULL,
				  "the model is still loading; retry shortly");
		srv_reply_error(h, &e);
		return;
	}
	struct alice_engine_stats st;
	alice_engine_stats(s->engine, &st);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "status",
			       json_object_new_string(s->state == SRV_STOPPING ? "stopping" : "ok"));
	json_object_object_add(o, "model", json_object_new_string(s->model_id));
	json_object_object_add(o, "architecture", json_object_new_string(alice_model_arch(s->model)));
	json_object_object_add(o, "backend", json_object_new_string(alice_model_backend_name(s->model)));
	json_object_object_add(o, "device", json_object_new_string(alice_model_device_name(s->model)));
	json_object_object_add(o, "vocab_size", json_object_new_int(alice_model_n_vocab(s->model)));
	json_object_object_add(o, "n_ctx", json_object_new_int((int32_t)alice_engine_n_ctx(s->engine)));
	json_object_object_add(o, "chat_template", json_object_new_string(alice_chat_template_name(s->chat_tmpl)));
	json_object_object_add(o, "chat_format", json_object_new_string(alice_chat_format_name(s->chat_format)));
	json_object_object_add(o, "slots_total", json_object_new_int((int32_t)st.n_slots));
	json_object_object_add(o, "slots_busy", json_object_new_int((int32_t)st.slots_busy));
	json_object_object_add(o, "queued", json_object_new_int((int32_t)st.queued));
	json_object_object_add(o, "requests_done", json_object_new_int64((int64_t)st.requests_done));
	json_object_object_add(o, "tokens_generated", json_object_new_int64((int64_t)st.tokens_generated));
	/* speculative decoding in effect (recurrent models never speculate) */
	enum alice_spec_mode sm = alice_model_is_recurrent(s->model) ? ALICE_SPEC_NONE : s->cfg.spec.mode;
	json_object_object_add(o, "speculative", json_object_new_string(sm == ALICE_SPEC_NGRAM  ? "ngram"
									 : sm == ALICE_SPEC_DRAFT ? "draft"
												  : "none"));
	srv_reply_json(h, s->state == SRV_STOPPING ? 503 : 200, o);
}

static struct json_object *model_entry(struct srv *s)
{
	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "id", json_object_new_string(s->model_id));
	json_object_object_add(m, "object", json_object_new_string("model"));
	json_object_object_add(m, "created", json_object_new_int64(s->created));
	json_object_object_add(m, "owned_by", json_object_new_string("alice-llm"));
	struct json_object *meta = json_object_new_object();
	json_object_object_add(meta, "name", json_object_new_string(alice_model_name(s->model)));
	json_object_object_add(meta, "architecture", json_object_new_string(alice_model_arch(s->model)));
	json_object_object_add(meta, "backend", json_object_new_string(alice_model_backend_name(s->model)));
	json_object_object_add(meta, "device", json_object_new_string(alice_model_device_name(s->model)));
	json_object_object_add(meta, "n_ctx", json_object_new_int((int32_t)alice_engine_n_ctx(s->engine)));
	json_object_object_add(meta, "n_ctx_train", json_object_new_int(alice_model_n_ctx_train(s->model)));
	json_object_object_add(meta, "n_vocab", json_object_new_int(alice_model_n_vocab(s->model)));
	json_object_object_add(meta, "n_embd", json_object_new_int(alice_model_n_embd(s->model)));
	json_object_object_add(meta, "n_params", json_object_new_int64((int64_t)alice_model_n_params(s->model)));
	json_object_object_add(meta, "size", json_object_new_int64((int64_t)alice_model_weight_bytes(s->model)));
	json_object_object_add(meta, "n_slots", json_object_new_int(s->cfg.n_parallel));
	json_object_object_add(meta, "chat_template", json_object_new_string(alice_chat_template_name(s->chat_tmpl)));
	json_object_object_add(meta, "chat_format", json_object_new_string(alice_chat_format_name(s->chat_format)));
	json_object_object_add(m, "meta", meta);
	return m;
}

void srv_route_models(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	(void)body;
	(void)len;
	struct json_object *data = json_object_new_array();
	json_object_array_add(data, model_entry(s));
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "object", json_object_new_string("list"));
	json_object_object_add(o, "data", data);
	srv_reply_json(h, 200, o);
}

/* The loaded model under its id, else 404. */
void srv_route_model(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	(void)body;
	(void)len;
	const char *id = h->path + strlen(h->route->path);
	if (strcmp(id, s->model_id) != 0) {
		struct srv_api_error e;
		srv_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
				  "the model '%.100s' does not exist; this server serves '%s'", id, s->model_id);
		srv_reply_error(h, &e);
		return;
	}
	srv_reply_json(h, 200, model_entry(s));
}
