/* chat_tmpl.h — the server's chat template (middle layer): chosen once at
 * load (srv_chat_setup, loader thread) from --chat-template NAME,
 * --chat-template-file F or the GGUF's own tokenizer.chat_template (Jinja,
 * with the built-in family as the fallback), and a chat request's prompt
 * rendered and tokenized with it (srv_chat_prompt, any thread). */
#ifndef ALICE_SERVER_CHAT_TMPL_H
#define ALICE_SERVER_CHAT_TMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"

/* --chat-template-file: read cfg->chat_template_file into
 * cfg->chat_template_src/len (the caller frees src) and compile it, so that a
 * bad file stops the server before the model loads. 0, or -1 with msg[cap]
 * naming the file and the error (the line for a syntax error). */
int srv_chat_read_file(struct srv_config *cfg, char *msg, size_t cap);

/* Sets s->chat_tmpl and s->chat_format (the family: stop strings) for the
 * loaded s->model. A GGUF template that does not compile is a warning (the
 * built-in family is used); a --chat-template-file that does not compile
 * (checked in main already) or no memory is an error, msg[cap] says why. */
enum alice_status srv_chat_setup(struct srv *s, char *msg, size_t cap);

/* The text of chat request r's prompt: rendered (messages,
 * chat_template_kwargs, a trailing assistant message continued), a leading
 * BOS text removed when the tokenizer adds BOS itself. *text is malloc'd
 * (caller frees). 0, or -1 with e filled as srv_chat_prompt. */
int srv_chat_render(struct srv *s, const struct srv_gen_request *r, char **text, size_t *len,
		    struct srv_api_error *e);

/* The prompt of chat request r: rendered (messages, chat_template_kwargs,
 * a trailing assistant message continued) and tokenized with parse_special,
 * one BOS at most; *think_open: the prompt leaves a <think> block open. *tokens is malloc'd (caller frees). 0, or -1 with e filled
 * (400 naming the field and carrying the template's message; 500 when out of
 * memory). */
int srv_chat_prompt(struct srv *s, const struct srv_gen_request *r, int32_t **tokens, size_t *n_tokens,
		    bool *think_open, struct srv_api_error *e);

#endif
