/* jinja.h — a sandboxed Jinja2 interpreter for chat templates.
 *
 * It renders what Hugging Face transformers renders: jinja2's immutable
 * sandbox with trim_blocks and lstrip_blocks, the loopcontrols extension,
 * `tojson` as json.dumps(ensure_ascii=False), raise_exception(msg) and
 * strftime_now(fmt) as globals, {% generation %} rendering its body, and
 * undefined values printing as "".
 *
 * A compiled template is immutable and may be rendered from several threads
 * at once. Rendering is bounded (steps, memory, recursion, output size); a bad
 * template or a refused conversation is an error with a line number, never a
 * crash. */
#ifndef ALICE_JINJA_H
#define ALICE_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "alice/status.h"

struct json_object;
struct alice_jinja; /* opaque compiled template */

struct alice_jinja_options {
	int64_t now;          /* strftime_now's clock: Unix seconds (UTC); < 0: the real clock */
	uint64_t max_steps;   /* evaluation steps; 0: 50 million */
	size_t max_memory;    /* bytes of values a render may allocate; 0: 256 MiB */
	size_t max_output;    /* bytes of output; 0: 64 MiB */
	int max_depth;        /* nesting of macro calls / loops; 0: 200 */
};

/* Compile src (len bytes, need not be NUL-terminated). *out is the caller's
 * to free with alice_jinja_free. Syntax errors are ALICE_ERR_INVALID with
 * "line N: ..." in err. */
enum alice_status alice_jinja_compile(const char *src, size_t len, struct alice_jinja **out,
				      struct alice_error *err);

/* Render with the keyword arguments of ctx (a JSON object: messages, tools,
 * add_generation_prompt, bos_token, ...; borrowed, not modified). opt may be
 * NULL (defaults). *out is malloc'd, NUL-terminated, the caller frees;
 * *out_len (optional) is its length. A template error (raise_exception, an
 * undefined attribute, a type error, a limit) is ALICE_ERR_INVALID (or
 * ALICE_ERR_RANGE for a limit) with the message in err. */
enum alice_status alice_jinja_render(const struct alice_jinja *tpl, const struct json_object *ctx,
				     const struct alice_jinja_options *opt, char **out,
				     size_t *out_len, struct alice_error *err);

void alice_jinja_free(struct alice_jinja *tpl);

#endif
