/* alice-tokenize — print the token ids of a text, like llama-tokenize --ids.
 *
 *   alice-tokenize -m model.gguf [--no-bos] [--parse-special] [--json] (TEXT | -f FILE)
 *
 * Ids are printed on one line, space separated. --json prints
 * {"tokens":[ids],"pieces":[strings]} where each piece is the token's bytes
 * (llama_token_to_piece with special tokens rendered) as a JSON string; bytes
 * that are not valid UTF-8 (a character split over several tokens) are
 * written as U+FFFD, one per maximal invalid subpart (alice_utf8_repair). -f reads the file's
 * bytes exactly as stored. BOS is added when the model's metadata asks for
 * it (add_bos_token, or the vocabulary type's default) unless --no-bos;
 * EOS likewise per add_eos_token. --time prints the encode time (wall and CPU)
 * to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/gguf.h"
#include "alice/tokenizer.h"
#include "tool_io.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-tokenize -m MODEL.gguf [--no-bos] [--parse-special] [--json] [--time] (TEXT | -f FILE)\n");
}

/* s as a JSON string: invalid UTF-8 repaired under the core's one policy
 * (alice_utf8_repair: one U+FFFD per maximal invalid subpart), then escaped. */
static void json_string(const char *raw, size_t raw_n)
{
	size_t n = 0;
	char *s = alice_utf8_repair(raw, raw_n, &n);
	putchar('"');
	for (size_t i = 0; s && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\r')
			fputs("\\r", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04X", c);
		else
			putchar(c);
	}
	putchar('"');
	free(s);
}

int main(int argc, char **argv)
{
	const char *model = NULL, *file = NULL, *text = NULL;
	bool bos = true, parse_special = false, json = false, timing = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-m") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "-f") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "--no-bos"))
			bos = false;
		else if (!strcmp(argv[i], "--parse-special"))
			parse_special = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--time"))
			timing = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "alice-tokenize: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 1;
		} else if (!text)
			text = argv[i];
		else {
			fprintf(stderr, "alice-tokenize: more than one TEXT argument\n");
			return 1;
		}
	}
	if (!model || (!text == !file)) {
		usage(stderr);
		return 1;
	}
	size_t len;
	char *buf = NULL;
	if (file) {
		buf = tool_read_file(file, &len);
		if (!buf) {
			fprintf(stderr, "alice-tokenize: %s: cannot read file\n", file);
			return 1;
		}
		text = buf;
	} else {
		len = strlen(text);
	}
	struct alice_error err = {{0}};
	struct alice_gguf *g = NULL;
	struct alice_tokenizer *t = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	int rc = 1;
	if (alice_gguf_open(model, &g, &err) != ALICE_OK || alice_tokenizer_load(g, &t, &err) != ALICE_OK) {
		fprintf(stderr, "alice-tokenize: %s\n", err.msg);
		goto out;
	}
	struct timespec t0, t1, c0, c1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	/* add_special: BOS and EOS as the metadata says; --no-bos drops the BOS */
	if (alice_tokenizer_encode(t, text, len, true, parse_special, &ids, &n, &err) != ALICE_OK) {
		fprintf(stderr, "alice-tokenize: %s\n", err.msg);
		goto out;
	}
	if (!bos && alice_tokenizer_add_bos(t) && n) {
		memmove(ids, ids + 1, (n - 1) * sizeof *ids);
		n--;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	if (timing)
		fprintf(stderr, "alice-tokenize: %zu bytes -> %zu tokens in %.3f ms (%.3f ms CPU)\n", len, n,
			(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
			(c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6);
	if (json) {
		fputs("{\"tokens\":[", stdout);
		for (size_t i = 0; i < n; i++)
			printf(i ? ",%d" : "%d", ids[i]);
		fputs("],\"pieces\":[", stdout);
		for (size_t i = 0; i < n; i++) {
			size_t pl;
			bool sp;
			const char *p = alice_tokenizer_token_bytes(t, ids[i], &pl, &sp);
			if (i)
				putchar(',');
			json_string(p, pl);
		}
		fputs("]}\n", stdout);
	} else {
		for (size_t i = 0; i < n; i++)
			printf(i ? " %d" : "%d", ids[i]);
		putchar('\n');
	}
	rc = 0;
out:
	free(ids);
	free(buf);
	alice_tokenizer_free(t);
	alice_gguf_close(g);
	return rc;
}
