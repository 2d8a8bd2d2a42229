/* api_error.c — OpenAI-shaped errors, and Anthropic's for /v1/messages (see openai.h): the bottom-most piece
 * of the server; it calls nothing else in server/. */
#include "openai.h"

#include <stdarg.h>
#include <stdio.h>

void srv_api_error_set(struct srv_api_error *e, int status, const char *type, const char *code,
		       const char *param, const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	e->type = type;
	e->code = code;
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

void srv_api_error_invalid(struct srv_api_error *e, const char *param, const char *fmt, ...)
{
	va_list ap;
	e->status = 400;
	e->type = "invalid_request_error";
	e->code = NULL;
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

void srv_api_error_nomem(struct srv_api_error *e)
{
	srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
}

struct json_object *srv_api_error_json(const struct srv_api_error *e)
{
	struct json_object *root = json_object_new_object();
	struct json_object *err = json_object_new_object();
	json_object_object_add(err, "message", json_object_new_string(e->message));
	json_object_object_add(err, "type", json_object_new_string(e->type ? e->type : "server_error"));
	json_object_object_add(err, "param", e->param[0] ? json_object_new_string(e->param) : NULL);
	json_object_object_add(err, "code", e->code ? json_object_new_string(e->code) : NULL);
	json_object_object_add(root, "error", err);
	return root;
}

struct json_object *srv_anthropic_error_json(const struct srv_api_error *e)
{
	const char *type = e->status == 401   ? "authentication_error"
			   : e->status == 403 ? "permission_error"
			   : e->status == 404 ? "not_found_error"
			   : e->status == 413 ? "request_too_large"
			   : e->status == 429 ? "rate_limit_error"
			   : e->status == 503 ? "overloaded_error"
			   : e->status >= 500 ? "api_error"
					      : "invalid_request_error";
	struct json_object *o = json_object_new_object(), *err = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(err, "type", json_object_new_string(type));
	json_object_object_add(err, "message", json_object_new_string(e->message));
	json_object_object_add(o, "error", err);
	return o;
}
