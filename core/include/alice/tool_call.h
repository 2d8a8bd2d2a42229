/* tool_call.h — function calling and reasoning in a chat model's output:
 * the call format a chat template teaches (detected from its text, as
 * llama.cpp's chat-format detection does), the parse of a generated text
 * into reasoning, content and tool calls, and the grammar that makes a model
 * emit a well-formed call (tool_choice "required" or a named function).
 *
 * Formats (what the model writes; the template shows it the same way):
 *   HERMES         <tool_call>{"name": N, "arguments": {...}}</tool_call>
 *                  (Hermes 2/3, Qwen2.5, Qwen3, QwQ)
 *   QWEN35         <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n
 *                  ...</function>\n</tool_call>; V is raw text for string
 *                  parameters, JSON otherwise (Qwen3.5, Qwen3-Coder)
 *   LLAMA3         {"name": N, "parameters": {...}} as the whole answer,
 *                  optionally after <|python_tag|> (Llama 3.1-3.3)
 *   MISTRAL        [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
 *   MISTRAL_ARGS   [TOOL_CALLS]N[ARGS]{...} (Mistral Small 3.2, Devstral)
 *   GENERIC        {"tool_calls": [{"name": N, "arguments": {...}}]} as the
 *                  whole answer: templates that read `tools` but match none
 *                  of the above.
 * Reasoning: templates that mention <think> (Qwen3, Qwen3.5, QwQ,
 * DeepSeek-R1) put it in a leading <think>...</think> block, or open it
 * in the generation prompt themselves (think_open).
 *
 * Parsing is best effort: a call block that is malformed stays text in the
 * content. With `partial` (a stream in progress) the result holds only
 * what can no longer change: complete calls, and content without a tail
 * that could still become a call tag or </think>; a later parse of a longer
 * text extends it (content and reasoning are prefixes of the final ones),
 * and a call still being written is reported with the text of its
 * arguments so far (a prefix of the final arguments). */
#ifndef ALICE_TOOL_CALL_H
#define ALICE_TOOL_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include "alice/sbuf.h"
#include "alice/status.h"

struct json_object;
struct alice_grammar;

enum alice_tool_format {
	ALICE_TOOL_FORMAT_NONE = 0, /* the template knows no tools */
	ALICE_TOOL_FORMAT_HERMES,
	ALICE_TOOL_FORMAT_QWEN35,
	ALICE_TOOL_FORMAT_LLAMA3,
	ALICE_TOOL_FORMAT_MISTRAL,
	ALICE_TOOL_FORMAT_MISTRAL_ARGS,
	ALICE_TOOL_FORMAT_GENERIC,
};

/* The format a template's text teaches (NULL: NONE). */
enum alice_tool_format alice_tool_format_detect(const char *template_text);
/* Whether the template's text uses a <think> block. */
bool alice_tool_reasoning_detect(const char *template_text);
/* Constant name ("hermes", ...). */
const char *alice_tool_format_name(enum alice_tool_format f);
/* Whether a rendered prompt leaves a <think> block open (it ends with
 * "<think>" and white space). */
bool alice_tool_think_open(const char *prompt, size_t len);

struct alice_tool_call {
	char *name;
	/* a JSON object's text: as the model wrote it (JSON formats; a string
	 * holding the object: that string's text), or built member by member
	 * (QWEN35: compact, parameters in the order written) */
	char *arguments;
};

struct alice_chat_parsed {
	struct alice_sbuf reasoning;
	struct alice_sbuf content; /* leading white space dropped */
	struct alice_tool_call *calls;
	size_t n_calls, cap_calls;
	/* partial parse only: the call being written after the complete ones
	 * (its name is known; arguments is a prefix of its final text) */
	struct alice_tool_call partial;
	bool has_partial;
};

struct alice_chat_parse_opts {
	enum alice_tool_format format; /* NONE: no calls are parsed */
	bool reasoning;                /* split a <think> block off */
	bool think_open;               /* the prompt opened it: the text starts inside */
	/* the request's tools (array, borrowed, may be NULL): parameter types
	 * decide whether a QWEN35 value is a string or JSON */
	struct json_object *tools;
};

/* Parse len bytes of text into *out (zeroed by the caller, or cleared).
 * ALICE_ERR_NOMEM only: malformed text is never an error. */
enum alice_status alice_chat_parse(const struct alice_chat_parse_opts *o, const char *text, size_t len, bool partial,
				   struct alice_chat_parsed *out, struct alice_error *err);
void alice_chat_parsed_clear(struct alice_chat_parsed *p);

/* The grammar of a forced call in format f: one call (up to 4 when
 * parallel) of one of `tools` (an array of {"type":"function","function":
 * {"name","parameters"}}; borrowed), arguments valid against their
 * `parameters` schema (alice/json_schema.h). think_open: the text first
 * closes the prompt's <think> block. max_bytes caps the GBNF (0 = none):
 * ALICE_ERR_RANGE. A schema the converter refuses, or a QWEN35 string
 * parameter with a pattern or format, is ALICE_ERR_INVALID / _UNSUPPORTED
 * naming the tool. *out: the caller frees with alice_grammar_free. */
enum alice_status alice_tool_grammar(enum alice_tool_format f, struct json_object *tools, bool parallel,
				     bool think_open, size_t max_bytes, struct alice_grammar **out,
				     struct alice_error *err);

#endif
