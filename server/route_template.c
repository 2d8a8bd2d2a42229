/* route_template.c — POST /apply-template (llama-server's extension): the
 * body of a chat completion request in, {"prompt": text} out, the exact text
 * the server would tokenize for it (the chat template rendered with the
 * request's messages and chat_template_kwargs, a trailing assistant message
 * continued, a leading BOS text removed when the tokenizer adds BOS). */
#include <stdlib.h>

#include "chat_tmpl.h"
#include "reply.h"
#include "routes.h"

void srv_route_apply_template(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	struct srv_api_error e;
	struct srv_gen_request r;
	if (srv_openai_parse(SRV_KIND_CHAT, body, len, &s->cfg.limits, &r, &e) != 0) {
		srv_reply_error(h, &e);
		return;
	}
	char *text = NULL;
	size_t n = 0;
	int rc = srv_chat_render(s, &r, &text, &n, &e);
	srv_gen_request_clear(&r);
	if (rc != 0) {
		srv_reply_error(h, &e);
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "prompt", json_object_new_string_len(text, (int)n));
	free(text);
	srv_reply_json(h, 200, o);
}
