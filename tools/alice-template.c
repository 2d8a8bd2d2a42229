/* alice-template — render a chat template the way transformers does.
 *
 *   alice-template --template F.jinja --context C.json [--now 2026-01-15T10:30:00]
 *
 * The context is a JSON object of the render's keyword arguments (messages,
 * tools, add_generation_prompt, bos_token, eos_token, enable_thinking, ...).
 * The output goes to standard output byte for byte; --now fixes the clock of
 * strftime_now (UTC). A template error exits 1 with the message on standard
 * error; a usage error exits 2. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "alice/jinja.h"
#include "tool_io.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-template --template F.jinja --context C.json [--now YYYY-MM-DDTHH:MM:SS]\n");
}

static int parse_now(const char *s, int64_t *out)
{
	struct tm tm = {0};
	int n = 0;
	if (sscanf(s, "%d-%d-%dT%d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
		   &tm.tm_sec, &n) != 6 || s[n])
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = (int64_t)timegm(&tm);
	return 0;
}

int main(int argc, char **argv)
{
	const char *tpath = NULL, *cpath = NULL;
	struct alice_jinja_options opt = {.now = -1};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--template") && i + 1 < argc) {
			tpath = argv[++i];
		} else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
			cpath = argv[++i];
		} else if (!strcmp(argv[i], "--now") && i + 1 < argc) {
			if (parse_now(argv[++i], &opt.now)) {
				fprintf(stderr, "alice-template: bad --now '%s' (want YYYY-MM-DDTHH:MM:SS)\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!tpath || !cpath) {
		usage(stderr);
		return 2;
	}
	int rc = 1;
	size_t tlen;
	char *src = tool_read_file(tpath, &tlen);
	if (!src) {
		fprintf(stderr, "alice-template: %s: %s\n", tpath, strerror(errno));
		return 1;
	}
	struct json_object *ctx = json_object_from_file(cpath);
	if (!ctx || !json_object_is_type(ctx, json_type_object)) {
		fprintf(stderr, "alice-template: %s: not a JSON object (%s)\n", cpath, json_util_get_last_err());
		goto free_src;
	}
	struct alice_error err = {{0}};
	struct alice_jinja *tpl;
	if (alice_jinja_compile(src, tlen, &tpl, &err) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		goto free_ctx;
	}
	char *out;
	size_t n;
	if (alice_jinja_render(tpl, ctx, &opt, &out, &n, &err) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		goto free_tpl;
	}
	rc = fwrite(out, 1, n, stdout) == n && fflush(stdout) == 0 ? 0 : 1;
	free(out);
free_tpl:
	alice_jinja_free(tpl);
free_ctx:
	json_object_put(ctx);
free_src:
	free(src);
	return rc;
}
