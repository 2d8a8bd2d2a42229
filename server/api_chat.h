/* api_chat.h — pieces shared by the translators of gen_api.h (the Responses
 * and Messages APIs): building the chat completion body they turn into
 * (messages, assistant tool calls, tool results), typed field access with
 * errors naming the caller's field, ids, and the usage both report. */
#ifndef ALICE_SERVER_API_CHAT_H
#define ALICE_SERVER_API_CHAT_H

#include <json-c/json.h>
#include <stdbool.h>

#include "alice/tool_call.h"
#include "openai.h"

struct srv_gen;
struct srv_choice;

/* Member key of o when present and not null, else NULL. */
struct json_object *api_field(struct json_object *o, const char *key);
/* Copy member `from` of in (when present and not null) to out as `to`. */
void api_copy(struct json_object *out, struct json_object *in, const char *from, const char *to);

/* Append {"role","content"} to the chat messages array. */
void api_add_message(struct json_object *messages, const char *role, const char *content, size_t len);
/* An assistant tool call: joins the last message when it is the
 * assistant's (a text answer then its calls), else a new assistant message
 * with "content": null. */
void api_add_tool_call(struct json_object *messages, const char *id, const char *name, const char *arguments);
/* A tool's result: {"role":"tool","tool_call_id","content"}, with "name"
 * when an earlier assistant call of that id names its function. */
void api_add_tool_result(struct json_object *messages, const char *id, const char *content, size_t len);
/* A chat tool {"type":"function","function":{name, description, parameters}}. */
struct json_object *api_function_tool(struct json_object *name, struct json_object *description,
				      struct json_object *parameters);

/* A choice's text split as the chat route splits it (content, reasoning,
 * tool calls; alice/tool_call.h) when the request is parsed (tools, or a
 * reasoning template), else all of it as content. partial: a stream in
 * progress (only what can no longer change). *out is cleared by the caller
 * with alice_chat_parsed_clear; out of memory leaves the raw text as content. */
void api_parse(const struct srv_gen *g, const struct srv_choice *c, bool partial, struct alice_chat_parsed *out);
/* What of p's content is past *sent bytes (advancing *sent): false when
 * nothing new. */
bool api_fresh(const struct alice_chat_parsed *p, size_t *sent, const char **s, size_t *n);
/* A call's arguments as a JSON object (a new one; {} when they do not parse). */
struct json_object *api_arguments_object(const char *arguments);

/* PREFIX + 24 random hex digits into out[cap]. */
void api_new_id(char *out, size_t cap, const char *prefix);
/* The chat pipeline names fields by their chat completion names; an error
 * on field `from` is reported as the caller's `to` (message included). */
void api_error_rename(struct srv_api_error *e, const char *from, const char *to);

#endif
