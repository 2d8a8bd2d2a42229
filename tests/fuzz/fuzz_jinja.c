/* fuzz_jinja.c — libFuzzer target for the Jinja interpreter. The input is
 * "<template>\0<context JSON>" (no NUL: the template alone, rendered with a
 * fixed chat context). Any template must compile or be refused with an
 * error, and any render must finish or fail within small limits — never
 * crash, leak, overflow the C stack or run away. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/jinja.h"

static const char default_ctx[] =
	"{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
	"{\"role\":\"user\",\"content\":\"Hi \\u00e9\"},"
	"{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1,\"b\":[true,null,2.5]}}}]},"
	"{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"{}\"}],"
	"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}],"
	"\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"enable_thinking\":false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *src = (const char *)data;
	const uint8_t *nul = memchr(data, 0, size);
	size_t tlen = nul ? (size_t)(nul - data) : size;
	struct json_object *ctx = NULL;
	if (nul) {
		size_t clen = size - tlen - 1;
		struct json_tokener *tok = json_tokener_new_ex(64);
		if (!tok)
			return 0;
		ctx = json_tokener_parse_ex(tok, (const char *)nul + 1, (int)clen);
		json_tokener_free(tok);
		if (!ctx || !json_object_is_type(ctx, json_type_object)) {
			json_object_put(ctx);
			return 0;
		}
	} else {
		ctx = json_tokener_parse(default_ctx);
	}
	struct alice_error err;
	struct alice_jinja *t;
	if (alice_jinja_compile(src, tlen, &t, &err) == ALICE_OK) {
		struct alice_jinja_options opt = {.now = 1768473000, .max_steps = 200000,
						  .max_memory = 32u << 20, .max_output = 1u << 20, .max_depth = 64};
		char *out = NULL;
		size_t n = 0;
		if (alice_jinja_render(t, ctx, &opt, &out, &n, &err) == ALICE_OK) {
			if (!out || out[n] != 0)
				abort(); /* the output is NUL-terminated at its length */
			free(out);
		} else if (out) {
			abort(); /* no output on failure */
		}
		alice_jinja_free(t);
	}
	json_object_put(ctx);
	return 0;
}
