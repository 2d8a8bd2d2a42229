/* models.h — which backend the model tests run on, and loading a model
 * file onto it. Call from a Criterion test. */
#ifndef ALICE_TEST_MODELS_H
#define ALICE_TEST_MODELS_H

struct alice_model;

/* $ALICE_TEST_BACKEND, default "cpu". */
const char *alice_test_backend(void);
/* Skips the current test (printing why) when backend cannot be opened here. */
void alice_test_require_backend(const char *backend);
/* Loads the model file at path with 2 threads on backend (NULL:
 * alice_test_backend(), and the test is skipped where that cannot run);
 * asserts, naming the file, that it loads. The caller frees. */
struct alice_model *alice_test_load_model(const char *path, const char *backend);

#endif
