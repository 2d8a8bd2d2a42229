/* models.c — see models.h. */
#include "support/models.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend_loader.h"
#include "alice/gguf.h"
#include "alice/model.h"
#include "alice/synth.h"
#include "support/paths.h"

const char *alice_test_backend(void)
{
	const char *b = getenv("ALICE_TEST_BACKEND");
	return b && *b ? b : "cpu";
}

void alice_test_require_backend(const char *backend)
{
	if (strcmp(backend, "cpu") == 0)
		return;
	struct alice_backend *be = NULL;
	struct alice_error err = {0};
	if (alice_backend_open(backend, NULL, &be, &err) != ALICE_OK)
		cr_skip_test("backend %s unavailable here: %s", backend, err.msg);
	alice_backend_close(be);
}

struct alice_model *alice_test_load_model(const char *path, const char *backend)
{
	if (!backend) {
		backend = alice_test_backend();
		alice_test_require_backend(backend);
	}
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = path;
	mp.backend = backend;
	mp.n_threads = 2;
	struct alice_model *m = NULL;
	struct alice_error err = {0};
	cr_assert_eq(alice_model_load(&mp, &m, &err), ALICE_OK, "load %s: %s", path, err.msg);
	return m;
}

const char *alice_test_synth_model(const char *arch, const char *shape, uint32_t type, const char *path)
{
	char vocab_path[4096];
	snprintf(vocab_path, sizeof(vocab_path), "%s/vocab/ggml-vocab-llama-spm.gguf", alice_test_fixtures_dir());
	struct alice_gguf *vocab = NULL;
	struct alice_error err = {0};
	cr_assert_eq(alice_gguf_open(vocab_path, &vocab, &err), ALICE_OK, "%s", err.msg);
	struct alice_synth_params p = {
		.arch = arch, .shape = shape, .type = type, .tied = true, .vocab = vocab, .seed = 7, .n_threads = 2};
	enum alice_status st = alice_synth_write(&p, path, &err);
	alice_gguf_close(vocab);
	cr_assert_eq(st, ALICE_OK, "synthetic %s model: %s", arch, err.msg);
	return path;
}
