/* test_cli.c — runs bin/alice-llm-cli as a user would: --json greedy
 * generation on a fixture compared with llama.cpp's reference tokens,
 * --list-backends, and error exits that name the file. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/parity_refs.h"
#include "support/paths.h"

/* Run a command line; returns the exit status, stdout in *out (malloc'd). */
static int run(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	size_t got;
	while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += got;
		if (n + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
	}
	buf[n] = 0;
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *cli(void)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/bin/alice-llm-cli", alice_test_build_dir());
	return path;
}

/* llama2-spm-F16: the reference's 24-token greedy continuation of the
 * `plain` prompt has no near-ties our rounding could flip (smallest top-1/
 * top-2 margin 0.076 and the parity test reproduces it exactly). */
Test(cli, json_greedy_matches_reference, .timeout = 120)
{
	const char *name = "llama2-spm-F16";
	char msg[512];
	struct alice_parity_refs *r = alice_parity_refs_load(alice_test_fixtures_dir(), name, msg, sizeof(msg));
	cr_assert_not_null(r, "%s", msg);
	const struct alice_ref_prompt *p = &r->prompts[0];
	cr_assert_str_eq(p->id, "plain");
	char prompt_file[] = "/tmp/alice-cli-prompt-XXXXXX";
	int fd = mkstemp(prompt_file);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, p->text, strlen(p->text)), (ssize_t)strlen(p->text));
	close(fd);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "'%s' -m '%s/models/%s.gguf' -f '%s' -n 24 --temp 0 --ignore-eos --json --backend cpu -t 2 -c 1024",
		 cli(), alice_test_fixtures_dir(), name, prompt_file);
	char *out = NULL;
	int rc = run(cmd, &out);
	unlink(prompt_file);
	cr_assert_eq(rc, 0, "%s exited %d: %s", cmd, rc, out);
	json_object *j = json_tokener_parse(out);
	cr_assert_not_null(j, "not JSON: %s", out);
	json_object *pt, *gt, *text, *pf, *dc;
	cr_assert(json_object_object_get_ex(j, "prompt_tokens", &pt) && json_object_object_get_ex(j, "tokens", &gt) &&
		  json_object_object_get_ex(j, "text", &text) &&
		  json_object_object_get_ex(j, "prefill_tokens_per_second", &pf) &&
		  json_object_object_get_ex(j, "decode_tokens_per_second", &dc), "fields missing: %s", out);
	cr_assert_eq((int)json_object_array_length(pt), p->n_tokens);
	for (int i = 0; i < p->n_tokens; i++)
		cr_expect_eq(json_object_get_int(json_object_array_get_idx(pt, (size_t)i)), p->tokens[i], "prompt token %d", i);
	cr_assert_eq((int)json_object_array_length(gt), p->n_gen);
	for (int i = 0; i < p->n_gen; i++)
		cr_expect_eq(json_object_get_int(json_object_array_get_idx(gt, (size_t)i)), p->gen_tokens[i], "step %d", i);
	cr_expect_gt(json_object_get_double(pf), 0.0);
	cr_expect_gt(json_object_get_double(dc), 0.0);
	cr_expect_gt(json_object_get_string_len(text), 0);
	json_object_put(j);
	free(out);
	alice_parity_refs_free(r);
}

Test(cli, list_backends_finds_cpu)
{
	char cmd[4200], *out = NULL;
	snprintf(cmd, sizeof(cmd), "'%s' --list-backends", cli());
	cr_assert_eq(run(cmd, &out), 0, "%s", out);
	cr_expect(strstr(out, "libalice-backend-cpu") != NULL, "%s", out);
	cr_expect(strstr(out, "probe: 1 device(s)") != NULL, "%s", out);
	free(out);
}

Test(cli, errors_name_the_file)
{
	char cmd[4200], *out = NULL;
	snprintf(cmd, sizeof(cmd), "'%s' -m /nonexistent/x.gguf -p hi --backend cpu 2>&1", cli());
	cr_expect_eq(run(cmd, &out), 1);
	cr_expect(strstr(out, "/nonexistent/x.gguf") != NULL, "%s", out);
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --bogus 2>&1", cli());
	cr_expect_eq(run(cmd, &out), 1);
	cr_expect(strstr(out, "--bogus") != NULL, "%s", out);
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --help", cli());
	cr_expect_eq(run(cmd, &out), 0);
	cr_expect(strstr(out, "--list-backends") != NULL, "%s", out);
	free(out);
}

/* Run the CLI on the llama2-spm-F16 fixture with extra arguments; the JSON
 * object's "text" (malloc'd), or NULL with the exit status in *rc. */
static char *cli_text(const char *prompt, const char *args, int *rc)
{
	char cmd[8192], *out = NULL;
	snprintf(cmd, sizeof(cmd), "'%s' -m '%s/models/llama2-spm-F16.gguf' -p '%s' --json --backend cpu -t 2 -c 256 %s 2>&1",
		 cli(), alice_test_fixtures_dir(), prompt, args);
	*rc = run(cmd, &out);
	json_object *j = *rc == 0 ? json_tokener_parse(out) : NULL, *t;
	char *text = NULL;
	if (j && json_object_object_get_ex(j, "text", &t))
		text = strdup(json_object_get_string(t));
	cr_assert(*rc != 0 || text, "%s: %s", cmd, out);
	json_object_put(j);
	free(out);
	return text;
}

/* --grammar FILE: the text is exactly what the grammar allows, and the run
 * stops when the grammar is complete (well before -n). */
Test(cli, grammar_file_constrains_the_output, .timeout = 120)
{
	char path[] = "/tmp/alice-cli-grammar-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	const char g[] = "root ::= [0-9] [0-9] [0-9] \"!\"\n";
	cr_assert_eq(write(fd, g, sizeof(g) - 1), (ssize_t)(sizeof(g) - 1));
	close(fd);
	char args[512];
	int rc;
	snprintf(args, sizeof(args), "-n 24 --grammar '%s'", path);
	char *text = cli_text("The answer is", args, &rc);
	cr_assert_eq(rc, 0);
	cr_expect_eq(strlen(text), 4, "'%s'", text);
	for (int i = 0; i < 3; i++)
		cr_expect(text[i] >= '0' && text[i] <= '9', "'%s'", text);
	cr_expect_eq(text[3], '!', "'%s'", text);
	free(text);
	/* a bad grammar is an error quoting the file and the line:column */
	const char bad[] = "root ::= [z-a]\n";
	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, bad, sizeof(bad) - 1), (ssize_t)(sizeof(bad) - 1));
	close(fd);
	char cmd[8192], *out = NULL;
	snprintf(cmd, sizeof(cmd), "'%s' -m '%s/models/llama2-spm-F16.gguf' -p x --backend cpu --grammar '%s' 2>&1", cli(),
		 alice_test_fixtures_dir(), path);
	cr_expect_eq(run(cmd, &out), 1);
	cr_expect(strstr(out, path) && strstr(out, "line 1:11"), "%s", out);
	free(out);
	unlink(path);
}

/* --json-schema JSON: the text parses as JSON of that schema. */
Test(cli, json_schema_constrains_the_output, .timeout = 120)
{
	int rc;
	char *text = cli_text("A JSON object:",
			      "-n 64 --json-schema '{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[\"x\",\"y\"]}},"
			      "\"required\":[\"a\"]}'",
			      &rc);
	cr_assert_eq(rc, 0);
	json_object *j = json_tokener_parse(text), *a;
	cr_assert(j && json_object_is_type(j, json_type_object), "not a JSON object: '%s'", text);
	cr_assert(json_object_object_get_ex(j, "a", &a) && json_object_is_type(a, json_type_string), "'%s'", text);
	cr_expect(!strcmp(json_object_get_string(a), "x") || !strcmp(json_object_get_string(a), "y"), "'%s'", text);
	cr_expect_eq(json_object_object_length(j), 1, "'%s'", text);
	json_object_put(j);
	free(text);
	/* --grammar and --json-schema together are refused */
	char cmd[4200], *out = NULL;
	snprintf(cmd, sizeof(cmd), "'%s' -m x.gguf --grammar a --json-schema b 2>&1", cli());
	cr_expect_eq(run(cmd, &out), 1);
	cr_expect(strstr(out, "cannot be combined") != NULL, "%s", out);
	free(out);
}
