/* paths.h — where tests find fixtures and build outputs. Each directory can be
 * overridden by an environment variable of the same name, so test binaries
 * built here also run from a copied tree (the GPU device machine). */
#ifndef ALICE_TEST_PATHS_H
#define ALICE_TEST_PATHS_H

/* $ALICE_FIXTURES_DIR or the configured ../shared/fixtures. */
const char *alice_test_fixtures_dir(void);
/* $ALICE_SHARED_MODELS_DIR or the configured ../shared/models. */
const char *alice_test_shared_models_dir(void);
/* $ALICE_TEMPLATES_DIR or the configured ../shared/templates (chat templates + goldens). */
const char *alice_test_templates_dir(void);
/* $ALICE_SOURCE_DIR or the configured source tree. */
const char *alice_test_source_dir(void);
/* $ALICE_BUILD_DIR or the configured build tree. */
const char *alice_test_build_dir(void);
/* dir + "/" + name in a static per-thread buffer (valid until the next call on that thread). */
const char *alice_test_path(const char *dir, const char *name);

#endif
