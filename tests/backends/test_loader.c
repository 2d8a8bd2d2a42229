/* test_loader.c — the backend loader: drop-in deployment of a renamed .so,
 * refusal of a wrong ABI major / short vtable / non-backend with clear
 * messages, an explicit name that is missing or cannot run, auto, and the
 * listing used by `alice-llm-cli --list-backends`; the weight upload's
 * progress log (model.c) on a slow fake device. The fake plugins are
 * built by tests/backends/CMakeLists.txt into ALICE_TEST_BACKEND_DIR. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/log.h"
#include "alice/model.h"
#include "alice/quant.h"

#ifndef ALICE_TEST_BACKEND_DIR
#define ALICE_TEST_BACKEND_DIR ALICE_BUILD_DIR "/test-backends"
#endif
#define CPU_SO ALICE_BUILD_DIR "/lib/libalice-backend-cpu.so"

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	cr_assert(in, "cannot open %s", from);
	FILE *out = fopen(to, "wb");
	cr_assert(out, "cannot create %s", to);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	fclose(out);
}

/* One ADD node on a context: proves the loaded backend really computes. */
static void run_add(struct alice_backend *be)
{
	struct alice_backend_ctx *ctx = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_init(be, NULL, &ctx, &err), ALICE_OK, "%s", err.msg);
	const struct alice_backend_vtable *vt = be->vt;
	struct alice_buffer *buf = NULL;
	cr_assert_eq(vt->buffer_alloc(ctx, 3 * 16, ALICE_BUFFER_COMPUTE, &buf), ALICE_OK);
	float in[8] = {1, 2, 3, 4, 10, 20, 30, 40}, out[4] = {0};
	cr_assert_eq(vt->buffer_write(ctx, buf, 16, in, sizeof(in)), ALICE_OK);
	struct alice_tensor t[3];
	memset(t, 0, sizeof(t));
	for (int i = 0; i < 3; i++) {
		t[i].type = ALICE_TYPE_F32;
		t[i].ne[0] = 4;
		t[i].ne[1] = t[i].ne[2] = t[i].ne[3] = 1;
		t[i].nb[0] = 4;
		t[i].nb[1] = t[i].nb[2] = t[i].nb[3] = 16;
		t[i].buf = buf;
		t[i].offset = 16 * (uint64_t)i;
	}
	struct alice_node node = {.op = ALICE_OP_ADD, .dst = 0, .src = {1, 2, -1, -1, -1, -1}};
	struct alice_graph g = {.n_tensors = 3, .n_nodes = 1, .tensors = t, .nodes = &node};
	cr_assert_eq(vt->graph_compute(ctx, &g), ALICE_OK, "%s", vt->last_error(ctx));
	cr_assert_eq(vt->buffer_read(ctx, buf, 0, out, sizeof(out)), ALICE_OK);
	for (int i = 0; i < 4; i++)
		cr_assert_float_eq(out[i], in[i] + in[4 + i], 0.0f);
	vt->buffer_free(ctx, buf);
	vt->free(ctx);
}

Test(loader, drop_in_renamed_copy_in_empty_dir)
{
	char dir[] = "/tmp/alice-dropin-XXXXXX";
	cr_assert(mkdtemp(dir));
	char path[512];
	snprintf(path, sizeof(path), "%s/libalice-backend-mine.so", dir);
	copy_file(CPU_SO, path);
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("mine", dir, &be, &err), ALICE_OK, "%s", err.msg);
	cr_assert_str_eq(be->name, "mine");
	cr_assert_str_eq(be->path, path);
	cr_assert_geq(be->n_devices, 1);
	run_add(be);
	alice_backend_close(be);
	unlink(path);
	rmdir(dir);
}

Test(loader, refuses_other_abi_major)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("abi99", ALICE_TEST_BACKEND_DIR, &be, &err), ALICE_ERR_UNSUPPORTED,
		     "%s", err.msg);
	cr_assert_null(be);
	cr_assert(strstr(err.msg, ALICE_TEST_BACKEND_DIR "/libalice-backend-abi99.so"), "%s", err.msg);
	cr_assert(strstr(err.msg, "built for backend ABI 99.3"), "%s", err.msg);
	cr_assert(strstr(err.msg, "this build needs 1.x"), "%s", err.msg);
}

Test(loader, refuses_short_vtable)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("small", ALICE_TEST_BACKEND_DIR, &be, &err), ALICE_ERR_UNSUPPORTED,
		     "%s", err.msg);
	char need[64], have[64];
	snprintf(have, sizeof(have), "vtable of %zu bytes", offsetof(struct alice_backend_vtable, supports_op));
	/* the members up to graph_compute are required; later ones (1.2's
	 * host_alloc) are optional */
	snprintf(need, sizeof(need), "at least %zu",
		 offsetof(struct alice_backend_vtable, graph_compute) + sizeof(void (*)(void)));
	cr_assert(strstr(err.msg, have), "%s", err.msg);
	cr_assert(strstr(err.msg, need), "%s", err.msg);
	cr_assert(strstr(err.msg, "libalice-backend-small.so"), "%s", err.msg);
}

Test(loader, refuses_non_backend)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("notone", ALICE_TEST_BACKEND_DIR, &be, &err), ALICE_ERR_INVALID,
		     "%s", err.msg);
	cr_assert(strstr(err.msg, ALICE_TEST_BACKEND_DIR "/libalice-backend-notone.so is not an alice backend "
				  "(no alice_backend_entry)"),
		  "%s", err.msg);
}

Test(loader, explicit_name_whose_probe_fails_does_not_fall_back)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("noprobe", ALICE_TEST_BACKEND_DIR, &be, &err), ALICE_ERR_UNSUPPORTED,
		     "%s", err.msg);
	cr_assert_null(be);
	cr_assert(strstr(err.msg, "no fake device here"), "%s", err.msg);
}

Test(loader, missing_name_lists_where_it_looked)
{
	char dir[] = "/tmp/alice-empty-XXXXXX";
	cr_assert(mkdtemp(dir));
	setenv("ALICE_BACKEND_PATH", "/nonexistent/alice-a:/nonexistent/alice-b", 1);
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("nosuch", dir, &be, &err), ALICE_ERR_NOT_FOUND, "%s", err.msg);
	cr_assert(strstr(err.msg, "libalice-backend-nosuch.so"), "%s", err.msg);
	cr_assert(strstr(err.msg, dir), "%s", err.msg);
	cr_assert(strstr(err.msg, "/nonexistent/alice-a"), "%s", err.msg);
	cr_assert(strstr(err.msg, "/nonexistent/alice-b"), "%s", err.msg);
	rmdir(dir);
}

Test(loader, bad_name_is_refused)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("../evil", NULL, &be, &err), ALICE_ERR_INVALID, "%s", err.msg);
}

Test(loader, auto_picks_a_working_backend)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("auto", NULL, &be, &err), ALICE_OK, "%s", err.msg);
	cr_assert(strcmp(be->name, "cuda") == 0 || strcmp(be->name, "vulkan") == 0 ||
		  strcmp(be->name, "cpu") == 0, "%s", be->name);
	run_add(be);
	alice_backend_close(be);
}

Test(loader, list_shows_cpu_and_broken_files)
{
	struct alice_backend_listing *list = NULL;
	size_t n = 0;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_list(ALICE_TEST_BACKEND_DIR, &list, &n, &err), ALICE_OK, "%s", err.msg);
	bool cpu = false, abi99 = false, notone = false, noprobe = false;
	for (size_t i = 0; i < n; i++) {
		const struct alice_backend_listing *it = &list[i];
		if (strcmp(it->name, "cpu") == 0 && !it->shadowed) {
			cpu = true;
			cr_assert(it->loadable, "%s", it->reason);
			cr_assert_geq(it->n_devices, 1);
			cr_assert(strncmp(it->abi, "1.", 2) == 0, "%s", it->abi);
			cr_assert(strstr(it->path, "/libalice-backend-cpu.so"), "%s", it->path);
			cr_assert(it->device[0] != '\0');
		} else if (strcmp(it->name, "abi99") == 0) {
			abi99 = true;
			cr_assert_not(it->loadable);
			cr_assert(strstr(it->reason, "ABI 99.3"), "%s", it->reason);
		} else if (strcmp(it->name, "notone") == 0) {
			notone = true;
			cr_assert_not(it->loadable);
		} else if (strcmp(it->name, "noprobe") == 0) {
			noprobe = true;
			cr_assert(it->loadable);
			cr_assert_eq(it->n_devices, 0);
			cr_assert(strstr(it->reason, "no fake device"), "%s", it->reason);
		}
	}
	alice_backend_list_free(list);
	cr_assert(cpu && abi99 && notone && noprobe, "cpu %d abi99 %d notone %d noprobe %d", cpu, abi99,
		  notone, noprobe);
	char sp[4096];
	alice_backend_search_path(ALICE_TEST_BACKEND_DIR, sp, sizeof(sp));
	cr_assert(strncmp(sp, ALICE_TEST_BACKEND_DIR ":", strlen(ALICE_TEST_BACKEND_DIR) + 1) == 0, "%s", sp);
}

/* Upload progress: a model whose weights take more than a second to copy
 * (the slowupload device: 40 ms a write) logs "loading PATH: N% (...)" about
 * once a second and a last line at 100%; a fast load logs none (the CPU
 * backend uses the mmap in place). */
static char progress_log[8192];

static void capture(enum alice_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	if (strncmp(msg, "loading ", 8) == 0 && strlen(progress_log) + strlen(msg) + 2 < sizeof(progress_log)) {
		strcat(progress_log, msg);
		strcat(progress_log, "\n");
	}
}

Test(loader, slow_upload_logs_progress)
{
	struct alice_model_params p;
	alice_model_params_default(&p);
	p.path = ALICE_SOURCE_DIR "/models/tiny-tolstoy-Q8_0.gguf";
	p.backend = "slowupload";
	p.backend_dir = ALICE_TEST_BACKEND_DIR;
	struct alice_model *m = NULL;
	struct alice_error err = {{0}};
	progress_log[0] = 0;
	alice_log_set_sink(capture, NULL);
	enum alice_status st = alice_model_load(&p, &m, &err);
	alice_log_set_sink(NULL, NULL);
	cr_assert_eq(st, ALICE_OK, "%s", err.msg);
	cr_assert_str_eq(alice_model_backend_name(m), "slowupload");
	alice_model_free(m);
	cr_assert(strstr(progress_log, "tensors") != NULL, "no progress lines: '%s'", progress_log);
	cr_assert(strstr(progress_log, "100% (") != NULL, "no final 100%% line: '%s'", progress_log);
	int lines = 0;
	for (const char *q = progress_log; *q; q++)
		lines += *q == '\n';
	cr_assert_geq(lines, 2, "a line a second before the last: '%s'", progress_log);

	progress_log[0] = 0; /* the CPU backend: nothing to upload, nothing logged */
	p.backend = "cpu";
	p.backend_dir = ALICE_BUILD_DIR "/lib";
	alice_log_set_sink(capture, NULL);
	st = alice_model_load(&p, &m, &err);
	alice_log_set_sink(NULL, NULL);
	cr_assert_eq(st, ALICE_OK, "%s", err.msg);
	alice_model_free(m);
	cr_assert_str_eq(progress_log, "", "a fast load logged progress");
}
