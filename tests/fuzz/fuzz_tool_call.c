/* fuzz_tool_call.c — libFuzzer target for the parse of a chat model's output
 * (alice/tool_call.h): any text in any format must parse without crashing,
 * and a partial parse of any prefix must give a prefix of the whole text's
 * reasoning and content (what a stream sends is never taken back). The
 * first byte picks the format and the reasoning flags. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/tool_call.h"

static int is_prefix(const struct alice_sbuf *a, const struct alice_sbuf *b)
{
	return a->n <= b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 8192)
		return 0;
	struct alice_chat_parse_opts o = {(enum alice_tool_format)(data[0] % 7), (data[0] >> 3) & 1, (data[0] >> 4) & 1,
					  NULL};
	const char *t = (const char *)data + 1;
	size_t n = size - 1;
	struct alice_chat_parsed full = {0};
	struct alice_error err;
	if (alice_chat_parse(&o, t, n, false, &full, &err) != ALICE_OK)
		abort();
	for (size_t k = 0; k <= n; k += 1 + n / 16) {
		struct alice_chat_parsed p = {0};
		if (alice_chat_parse(&o, t, k, true, &p, &err) != ALICE_OK)
			abort();
		if (!is_prefix(&p.reasoning, &full.reasoning) || !is_prefix(&p.content, &full.content))
			abort();
		alice_chat_parsed_clear(&p);
	}
	alice_chat_parsed_clear(&full);
	return 0;
}
