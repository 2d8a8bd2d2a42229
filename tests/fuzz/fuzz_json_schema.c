/* fuzz_json_schema.c — libFuzzer target for JSON Schema -> GBNF: any bytes
 * must convert or be refused with an error, never crash; a conversion that
 * succeeds must yield a grammar that parses and can start matching. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"
#include "alice/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0;
	char *gbnf = NULL;
	struct alice_error err;
	if (alice_json_schema_to_gbnf((const char *)data, size, &gbnf, &err) != ALICE_OK) {
		if (gbnf || !err.msg[0])
			abort();
		return 0;
	}
	struct alice_grammar *g = NULL;
	if (alice_grammar_parse(gbnf, strlen(gbnf), &g, &err, NULL) != ALICE_OK)
		abort(); /* the converter promises a valid grammar */
	struct alice_grammar_state *st;
	if (alice_grammar_state_create(g, &st, &err) == ALICE_OK) {
		(void)alice_grammar_state_check_bytes(st, "{\"a\": [1, \"x\"]}", 15);
		alice_grammar_state_free(st);
	}
	alice_grammar_free(g);
	free(gbnf);
	return 0;
}
