/* test_bench_cli.c — bin/alice-bench as a user runs it: pp / tg at a depth
 * (-d, llama-bench's) in the table and in --json; a negative depth, or one
 * with --batch (where it does not apply), refused. tiny-tolstoy, CPU backend. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support/paths.h"

static int run(const char *cmd, char *out, size_t cap)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void bench_cmd(char *cmd, size_t cap, const char *args)
{
	snprintf(cmd, cap, "%s/bin/alice-bench -m %s/tiny-tolstoy-Q8_0.gguf --backend cpu -t 2 %s 2>/dev/null",
		 alice_test_build_dir(), alice_test_shared_models_dir(), args);
}

Test(bench_cli, depth_in_table_and_json, .timeout = 120)
{
	static char cmd[8192], out[1 << 16];
	bench_cmd(cmd, sizeof cmd, "-p 16 -n 8 -d 40 -r 1");
	cr_assert_eq(run(cmd, out, sizeof out), 0, "%s", out);
	cr_expect(strstr(out, "| pp16 @ d40 |") && strstr(out, "| tg8 @ d40 |"), "table without the depth:\n%s", out);
	bench_cmd(cmd, sizeof cmd, "-p 0 -n 8 -d 40 -r 1 --json");
	cr_assert_eq(run(cmd, out, sizeof out), 0, "%s", out);
	json_object *j = json_tokener_parse(out);
	cr_assert(j && json_object_is_type(j, json_type_array) && json_object_array_length(j) == 1, "%s", out);
	json_object *r = json_object_array_get_idx(j, 0), *v;
	cr_assert(json_object_object_get_ex(r, "depth", &v) && json_object_get_int(v) == 40, "%s", out);
	cr_assert(json_object_object_get_ex(r, "ok", &v) && json_object_get_boolean(v), "%s", out);
	cr_assert(json_object_object_get_ex(r, "tg_tps", &v) && json_object_get_double(v) > 0, "%s", out);
	json_object_put(j);
}

Test(bench_cli, bad_depth_refused)
{
	static char cmd[8192], out[1 << 12];
	bench_cmd(cmd, sizeof cmd, "-p 16 -n 8 -d -3 -r 1");
	cr_expect_eq(run(cmd, out, sizeof out), 2, "a negative depth");
	bench_cmd(cmd, sizeof cmd, "-p 16 -n 8 -d 8 --batch 1,2");
	cr_expect_eq(run(cmd, out, sizeof out), 2, "a depth with --batch (not applied there)");
}
