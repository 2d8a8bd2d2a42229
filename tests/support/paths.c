/* paths.c — see paths.h. */
#include "support/paths.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef ALICE_FIXTURES_DIR
#define ALICE_FIXTURES_DIR "../shared/fixtures"
#endif
#ifndef ALICE_SHARED_MODELS_DIR
#define ALICE_SHARED_MODELS_DIR "../shared/models"
#endif
#ifndef ALICE_TEMPLATES_DIR
#define ALICE_TEMPLATES_DIR "../shared/templates"
#endif
#ifndef ALICE_SOURCE_DIR
#define ALICE_SOURCE_DIR "."
#endif
#ifndef ALICE_BUILD_DIR
#define ALICE_BUILD_DIR "build"
#endif

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

const char *alice_test_fixtures_dir(void) { return env_or("ALICE_FIXTURES_DIR", ALICE_FIXTURES_DIR); }
const char *alice_test_shared_models_dir(void) { return env_or("ALICE_SHARED_MODELS_DIR", ALICE_SHARED_MODELS_DIR); }
const char *alice_test_templates_dir(void) { return env_or("ALICE_TEMPLATES_DIR", ALICE_TEMPLATES_DIR); }
const char *alice_test_source_dir(void) { return env_or("ALICE_SOURCE_DIR", ALICE_SOURCE_DIR); }
const char *alice_test_build_dir(void) { return env_or("ALICE_BUILD_DIR", ALICE_BUILD_DIR); }

const char *alice_test_path(const char *dir, const char *name)
{
	static _Thread_local char buf[4096];
	snprintf(buf, sizeof buf, "%s/%s", dir, name);
	return buf;
}
