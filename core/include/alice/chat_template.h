/* chat_template.h — a model's chat template, chosen once at load, and the
 * rendering of one conversation with it.
 *
 * A template is either Jinja source (the GGUF's `tokenizer.chat_template`,
 * or a file given by the operator) run by alice/jinja.h exactly as Hugging
 * Face transformers runs it, or one of chat.h's built-in formats (files
 * without a template, a template that does not compile, or a forced
 * --chat-template NAME). Either way the template also carries a family
 * (chat.h's detection from the template text and the architecture), which
 * names the end-of-turn stop strings (alice_chat_stop_strings).
 *
 * The Jinja context of a render: `messages` (role and content: a string, or
 * the request's list of {"type":"text","text":...} parts when the template
 * only reads typed content; probed once at load by rendering a sample
 * conversation both ways), `add_generation_prompt`, `bos_token` and
 * `eos_token` (the tokenizer's texts), then every entry of the request's
 * chat_template_kwargs (e.g. Qwen3's enable_thinking). With tools, `tools`
 * (the request's array) and each message's extra members: an assistant's
 * `tool_calls` (function.arguments as an object, as transformers and
 * llama.cpp give templates), a tool result's `tool_call_id` and `name`.
 *
 * A conversation that ends with an assistant message is continued (a
 * prefill), as transformers' continue_final_message does: the conversation
 * is rendered with add_generation_prompt false and the text is cut right
 * after the last occurrence of that message's content, dropping the
 * template's end-of-turn; the model then continues the assistant's text. An
 * assistant message that is empty or only white space is no prefill: it is
 * dropped and the conversation rendered with the generation prompt.
 *
 * A compiled template is immutable; renders may run on several threads. */
#ifndef ALICE_CHAT_TEMPLATE_H
#define ALICE_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "alice/chat.h"
#include "alice/status.h"
#include "alice/tool_call.h"

struct json_object;
struct alice_gguf;
struct alice_chat_template; /* opaque */

enum alice_chat_template_kind {
	ALICE_CHAT_TEMPLATE_BUILTIN = 0, /* a chat.h format */
	ALICE_CHAT_TEMPLATE_GGUF,        /* the GGUF's tokenizer.chat_template, as Jinja */
	ALICE_CHAT_TEMPLATE_FILE,        /* a Jinja file (--chat-template-file) */
};

struct alice_chat_template_params {
	const char *bos_text; /* the tokenizer's BOS token text; NULL: "" */
	const char *eos_text; /* the tokenizer's EOS token text; NULL: "" */
	const char *arch;     /* GGUF architecture, for the family; may be NULL */
};

/* Compile Jinja source (len bytes). kind is GGUF or FILE (a label). A syntax
 * error is ALICE_ERR_INVALID with "line N: ..." in err. *out: the caller
 * frees with alice_chat_template_free. p may be NULL. */
enum alice_status alice_chat_template_jinja(const char *src, size_t len, enum alice_chat_template_kind kind,
					    const struct alice_chat_template_params *p,
					    struct alice_chat_template **out, struct alice_error *err);

/* A built-in format. */
enum alice_status alice_chat_template_builtin(enum alice_chat_format f, const struct alice_chat_template_params *p,
					      struct alice_chat_template **out, struct alice_error *err);

/* The model's own: its tokenizer.chat_template as Jinja when it has one and
 * it compiles; else the built-in format chat.h detects. When a stored
 * template does not compile, the result is still ALICE_OK with the built-in
 * fallback in *out and the compile error in *warn (warn->msg non-empty;
 * otherwise warn->msg is ""). Fails only when out of memory. */
enum alice_status alice_chat_template_from_gguf(const struct alice_gguf *g,
						const struct alice_chat_template_params *p,
						struct alice_chat_template **out, struct alice_error *warn);

void alice_chat_template_free(struct alice_chat_template *t); /* NULL is a no-op */

enum alice_chat_template_kind alice_chat_template_kind(const struct alice_chat_template *t);
/* The family: what renders (built-in) or what the Jinja text looks like
 * (stop strings, logs). */
enum alice_chat_format alice_chat_template_format(const struct alice_chat_template *t);
/* "gguf", "file", or the built-in format's name (constant). */
const char *alice_chat_template_name(const struct alice_chat_template *t);
/* Whether Jinja messages carry content as a list of typed parts. */
bool alice_chat_template_typed_content(const struct alice_chat_template *t);
/* The tool-call format the template's text teaches (alice/tool_call.h;
 * NONE for a built-in), and whether it uses a <think> block (Jinja: its
 * text mentions <think>; built-in: the qwen3 / qwen3.5 formats). */
enum alice_tool_format alice_chat_template_tool_format(const struct alice_chat_template *t);
bool alice_chat_template_thinks(const struct alice_chat_template *t);

struct alice_chat_template_input {
	const struct alice_chat_message *msgs; /* role and content (text parts joined) */
	size_t n;
	/* NULL, or n entries: the content as the request gave it when it was an
	 * array of text parts (borrowed), NULL for a plain string. */
	struct json_object *const *parts;
	/* NULL or a JSON object merged into the Jinja context (borrowed). A
	 * built-in template takes none: a non-empty object is ALICE_ERR_UNSUPPORTED. */
	const struct json_object *kwargs;
	/* NULL, or n entries: an object whose members are added to that
	 * message (tool_calls, tool_call_id, name; borrowed), NULL for none. */
	struct json_object *const *extra;
	/* NULL or the request's tools array, the `tools` variable (borrowed).
	 * A built-in template takes none: ALICE_ERR_UNSUPPORTED. */
	struct json_object *tools;
	/* Remove a leading BOS text from the result (set it when the tokenizer
	 * adds BOS itself, so the prompt does not start with two). */
	bool strip_leading_bos;
};

/* Render in (a final assistant message is continued, see above) into *out
 * (malloc'd, NUL-terminated; the caller frees). A template error
 * (raise_exception, a type error) is ALICE_ERR_INVALID, a render limit
 * ALICE_ERR_RANGE, both with the template's message in err. */
enum alice_status alice_chat_template_render(const struct alice_chat_template *t,
					     const struct alice_chat_template_input *in, char **out,
					     size_t *out_len, struct alice_error *err);

#endif
