/* alice-grammar-check — does a text match a GBNF grammar (or a JSON schema,
 * via its GBNF conversion)? Used by the end-to-end grammar tests to check
 * server outputs with the same matcher the server constrains with.
 *
 * usage: alice-grammar-check [--schema] GRAMMAR_FILE [--full|--prefix] TEXT_FILE...
 *   --schema   GRAMMAR_FILE holds a JSON schema, converted as response_format does
 *   --full     (default) the following texts must be complete matches (can_end)
 *   --prefix   the following texts need only be accepted so far (a cut output)
 * Prints "ok FILE" or "FAIL FILE: reason" per text; exit 0 iff all pass,
 * 1 if any text fails, 2 on usage/IO/grammar errors. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"
#include "alice/json_schema.h"
#include "tool_io.h"

/* 0 = match, 1 = no match (reason printed). */
static int check_text(const struct alice_grammar *g, const char *path, bool full)
{
	struct alice_error err = {{0}};
	struct alice_grammar_state *st = NULL;
	size_t n = 0;
	char *text = tool_read_file(path, &n);
	int rc = 1;
	if (!text) {
		printf("FAIL %s: cannot read\n", path);
		return 1;
	}
	if (alice_grammar_state_create(g, &st, &err) != ALICE_OK) {
		printf("FAIL %s: %s\n", path, err.msg);
		goto out;
	}
	/* Byte by byte, so a failure names the offset. */
	for (size_t i = 0; i < n; i++) {
		if (alice_grammar_state_accept_bytes(st, text + i, 1, &err) != ALICE_OK) {
			printf("FAIL %s: rejected at byte %zu (0x%02x): %s\n", path, i,
			       (unsigned)(unsigned char)text[i], err.msg);
			goto out;
		}
	}
	if (full && !alice_grammar_state_can_end(st)) {
		printf("FAIL %s: accepted %zu bytes but the grammar cannot end there\n", path, n);
		goto out;
	}
	printf("ok %s\n", path);
	rc = 0;
out:
	alice_grammar_state_free(st);
	free(text);
	return rc;
}

int main(int argc, char **argv)
{
	int ai = 1;
	bool schema = false;
	if (ai < argc && strcmp(argv[ai], "--schema") == 0) {
		schema = true;
		ai++;
	}
	if (ai >= argc - 1) {
		fprintf(stderr, "usage: alice-grammar-check [--schema] GRAMMAR_FILE [--full|--prefix] TEXT_FILE...\n");
		return 2;
	}
	const char *gpath = argv[ai++];
	size_t glen = 0;
	char *gtext = tool_read_file(gpath, &glen), *gbnf = NULL;
	struct alice_grammar *g = NULL;
	struct alice_error err = {{0}};
	struct alice_grammar_errpos pos = {0, 0};
	int rc = 2;
	if (!gtext) {
		fprintf(stderr, "alice-grammar-check: cannot read %s\n", gpath);
		return 2;
	}
	if (schema) {
		if (alice_json_schema_to_gbnf(gtext, glen, &gbnf, &err) != ALICE_OK) {
			fprintf(stderr, "alice-grammar-check: %s: %s\n", gpath, err.msg);
			goto out;
		}
	}
	const char *src = schema ? gbnf : gtext;
	if (alice_grammar_parse(src, strlen(src), &g, &err, &pos) != ALICE_OK) {
		fprintf(stderr, "alice-grammar-check: %s: %s\n", gpath, err.msg);
		goto out;
	}
	bool full = true;
	int bad = 0;
	for (; ai < argc; ai++) {
		if (strcmp(argv[ai], "--full") == 0)
			full = true;
		else if (strcmp(argv[ai], "--prefix") == 0)
			full = false;
		else
			bad += check_text(g, argv[ai], full);
	}
	rc = bad ? 1 : 0;
out:
	alice_grammar_free(g);
	free(gbnf);
	free(gtext);
	return rc;
}
