/* backend_loader.h — finds, dlopens and checks backend plugins
 * (`libalice-backend-<name>.so`, see backend.h), and lists what is installed.
 *
 * Search order for a backend file (first directory that has it wins):
 *   1. the explicit directory given by the caller (`--backend-dir DIR`), if any;
 *   2. each directory of ALICE_BACKEND_PATH (colon-separated);
 *   3. `<exe_dir>/../lib` and `<exe_dir>` (exe_dir from /proc/self/exe);
 *   4. the build's lib directory, when compiled in (ALICE_BACKEND_BUILD_DIR).
 * A backend named `cpu` may also come as variants `libalice-backend-cpu-<x>.so`
 * in the same directory; the variant with the highest alice_backend_score()
 * (0 = cannot run here) is taken.
 *
 * Name "auto" (or NULL) picks the first of cuda, vulkan, cpu that is found,
 * loads and probes successfully. An explicit name never falls back: if its
 * probe fails, the open fails with the probe's reason.
 *
 * Ownership: alice_backend_open returns a struct the caller closes with
 * alice_backend_close (after freeing every context made from it); the vtable
 * and strings inside are borrowed from it. alice_backend_list returns an array
 * the caller frees with alice_backend_list_free. */
#ifndef ALICE_BACKEND_LOADER_H
#define ALICE_BACKEND_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "alice/backend.h"
#include "alice/status.h"

#define ALICE_BACKEND_NAME_MAX 64
#define ALICE_BACKEND_PATH_MAX 4096

struct alice_backend {
	const struct alice_backend_vtable *vt; /* checked: major and size match */
	void *dl;                              /* dlopen handle */
	char name[ALICE_BACKEND_NAME_MAX];     /* from the file name ("mine", "cpu") */
	char path[ALICE_BACKEND_PATH_MAX];     /* the file that was loaded */
	int n_devices;                         /* probe result (> 0) */
};

/* Open backend `name` ("cpu", "cuda", "vulkan", "mine", or "auto"/NULL).
 * dir: the explicit directory searched first, or NULL. On failure *out is
 * NULL and err says why (with the file and dlerror, the ABI versions, the
 * probe's reason, or the directories searched). */
enum alice_status alice_backend_open(const char *name, const char *dir,
				     struct alice_backend **out, struct alice_error *err);
void alice_backend_close(struct alice_backend *be);

/* Create a context (opts may be NULL: defaults). Free it with be->vt->free. */
enum alice_status alice_backend_init(struct alice_backend *be,
				     const struct alice_backend_options *opts,
				     struct alice_backend_ctx **out, struct alice_error *err);

/* One backend file found while listing. */
struct alice_backend_listing {
	char name[ALICE_BACKEND_NAME_MAX];
	char path[ALICE_BACKEND_PATH_MAX];
	bool loadable;     /* dlopen, entry symbol, ABI and vtable size all fine */
	bool shadowed;     /* an earlier directory has a backend of this name */
	int n_devices;     /* probe result; 0 = cannot run */
	int score;         /* alice_backend_score() or -1 when absent */
	char abi[16];      /* "1.0" as the file reports it, "" if unknown */
	char device[128];  /* device_info(0).name when probe > 0 */
	char reason[512];  /* load error or probe reason when not usable */
};

/* Every `libalice-backend-*.so` in the search directories (dir first, may be
 * NULL), in search order. Each file is loaded, probed and unloaded again. */
enum alice_status alice_backend_list(const char *dir, struct alice_backend_listing **out,
				     size_t *n_out, struct alice_error *err);
void alice_backend_list_free(struct alice_backend_listing *list);

/* The directories searched, in order, joined by ':' into buf (for messages). */
void alice_backend_search_path(const char *dir, char *buf, size_t len);

#endif
