/* chat.h — chat templates: turn OpenAI-style messages (role + plain text
 * content) into the prompt text a model was trained on.
 *
 * Formats are native C renderers of the common template families, not a Jinja
 * engine: the fallback of alice/chat_template.h, which renders a model's own
 * Jinja template (alice/jinja.h) when it has one. alice_chat_detect() picks one from a GGUF's `tokenizer.chat_template`
 * (substring markers) or, when none is stored, from the architecture name.
 *
 * Reference: for the fixture models the render equals byte for byte the text
 * llama.cpp's built-in formatter produced (refs/<model>.json, prompt "chat"), and for
 * the cases in tests/data/chat it equals the official Jinja template's output
 * (scripts/gen_chat_goldens.py), with the leading BOS text removed.
 *
 * Roles: "system", "user", "assistant". Any other role ("tool", "function",
 * "developer", ...) is rejected with ALICE_ERR_INVALID naming the message.
 * Families without a system role (mistral, gemma) fold system messages into
 * the next user turn, as llama.cpp does, instead of failing like their Jinja
 * templates. Role order is not enforced (templates that raise on
 * non-alternating roles are rendered leniently). Content is never parsed:
 * special-token text inside user content stays text (the tokenizer decides).
 * Where a family trims, whitespace is what Python's str.strip() removes
 * (Unicode white space, as Jinja's trim filter does). */
#ifndef ALICE_CHAT_H
#define ALICE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "alice/status.h"

enum alice_chat_format {
	/* <|im_start|>role\ncontent<|im_end|>\n ... ; gen prompt <|im_start|>assistant\n */
	ALICE_CHAT_FORMAT_CHATML = 0,
	/* ChatML plus Qwen2's default system message ("You are a helpful
	 * assistant") when the first message is not a system message. */
	ALICE_CHAT_FORMAT_QWEN2,
	/* ChatML plus Qwen3's reasoning handling: an assistant message's
	 * "<think>..</think>" is dropped before the last user query and
	 * re-rendered as "<think>\nR\n</think>\n\n" after it (last message). */
	ALICE_CHAT_FORMAT_QWEN3,
	/* Qwen3.5: like QWEN3, every content trimmed, a think block on every
	 * assistant message after the last user query; system only first; needs a
	 * user message. The generation prompt is "<|im_start|>assistant\n"
	 * WITHOUT the template's "<think>\n" (llama.cpp's built-in formatter and
	 * the fixture refs agree on that; the model opens the block itself). */
	ALICE_CHAT_FORMAT_QWEN35,
	/* <|start_header_id|>role<|end_header_id|>\n\ntrim(content)<|eot_id|> */
	ALICE_CHAT_FORMAT_LLAMA3,
	/* <s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] assistant </s><s>[INST] ... */
	ALICE_CHAT_FORMAT_LLAMA2,
	/* Mistral-7B-Instruct-v0.2: <s>[INST] user [/INST]assistant</s>[INST] ... */
	ALICE_CHAT_FORMAT_MISTRAL,
	/* <start_of_turn>user\ntrim(content)<end_of_turn>\n, assistant as "model" */
	ALICE_CHAT_FORMAT_GEMMA,
	/* Fallback for unknown templates/architectures: renders exactly ChatML
	 * (a widely understood format); kept separate so logs say "generic". */
	ALICE_CHAT_FORMAT_GENERIC,
	ALICE_CHAT_FORMAT_COUNT
};

struct alice_chat_message {
	const char *role;    /* "system" | "user" | "assistant" */
	const char *content; /* UTF-8 text; NULL is treated as "" */
};

struct alice_chat_render_opts {
	/* Emit the template's leading BOS text. Set it only when the tokenizer
	 * does NOT add BOS itself (otherwise the prompt would start with two BOS).
	 * BOS texts inside the conversation (Llama 2's per-turn "<s>") are always
	 * emitted: the template puts a real BOS token there. */
	bool add_leading_bos;
	const char *bos_text; /* NULL: the family's usual text ("<s>", "<bos>", ...) */
	const char *eos_text; /* NULL: the family's usual text ("</s>") */
};

/* Pick a format from a template string (may be NULL or empty) and, when the
 * template is missing or unrecognised, the GGUF architecture name (may be
 * NULL). Never fails: falls back to ALICE_CHAT_FORMAT_GENERIC. Returns
 * ALICE_OK, or ALICE_ERR_INVALID when out is NULL. */
enum alice_status alice_chat_detect(const char *template_text, const char *arch,
				    enum alice_chat_format *out);

/* alice_chat_detect with the template stored in a GGUF's metadata
 * (`tokenizer.chat_template`, when present; g may be NULL) and arch. */
struct alice_gguf;
enum alice_status alice_chat_detect_gguf(const struct alice_gguf *g, const char *arch,
					 enum alice_chat_format *out);

/* The --chat-template NAME override. Names: chatml, qwen2, qwen3, qwen3.5,
 * llama3, llama2, mistral, gemma, generic. Unknown names fail with
 * ALICE_ERR_NOT_FOUND and a message listing the valid names. */
enum alice_status alice_chat_format_from_name(const char *name, enum alice_chat_format *out,
					      struct alice_error *err);

/* Constant name of a format ("chatml", ...; "unknown" when out of range). */
const char *alice_chat_format_name(enum alice_chat_format f);

/* Comma-separated list of every valid name (constant string). */
const char *alice_chat_format_names(void);

/* NULL-terminated constant list of strings that end an assistant turn in this
 * format (e.g. "<|im_end|>"), for stop detection next to the tokenizer's EOG
 * tokens. Never NULL. */
const char *const *alice_chat_stop_strings(enum alice_chat_format f);

/* Render msgs[0..n) into *out (NUL-terminated, malloc'd; the caller frees).
 * opts may be NULL (no leading BOS, default BOS/EOS texts). out_len may be
 * NULL. On failure *out is NULL and err says which message is at fault. */
enum alice_status alice_chat_render(enum alice_chat_format f, const struct alice_chat_message *msgs,
				    size_t n, bool add_generation_prompt,
				    const struct alice_chat_render_opts *opts, char **out,
				    size_t *out_len, struct alice_error *err);

#endif
