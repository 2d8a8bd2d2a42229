/* models.h — which backend the model tests run on, loading a model file
 * onto it, and making a small synthetic model of any registered
 * architecture (the library code alice-mkmodel uses). Call from a Criterion test. */
#ifndef ALICE_TEST_MODELS_H
#define ALICE_TEST_MODELS_H

#include <stdint.h>

struct alice_model;

/* $ALICE_TEST_BACKEND, default "cpu". */
const char *alice_test_backend(void);
/* Skips the current test (printing why) when backend cannot be opened here. */
void alice_test_require_backend(const char *backend);
/* Loads the model file at path with 2 threads on backend (NULL:
 * alice_test_backend(), and the test is skipped where that cannot run);
 * asserts, naming the file, that it loads. The caller frees. */
struct alice_model *alice_test_load_model(const char *path, const char *backend);
/* Writes a tiny synthetic model of registered architecture arch (its small
 * default shape with `shape` words over it, synth.h; 2-D weights of `type`,
 * the fixture llama-spm vocabulary) to path; asserts it is written. Returns path. */
const char *alice_test_synth_model(const char *arch, const char *shape, uint32_t type, const char *path);

#endif
