/* backend_loader.c — finds and dlopens backend plugins and checks their ABI
 * (see backend_loader.h for the search order and ownership). */
#include "alice/backend_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alice/log.h"

#ifndef ALICE_BACKEND_SUFFIX
#define ALICE_BACKEND_SUFFIX ".so"
#endif

#define PREFIX "libalice-backend-"
#define MAX_DIRS 32

/* The vtable members this build calls: everything up to graph_compute. */
#define VTABLE_NEEDED (offsetof(struct alice_backend_vtable, graph_compute) + \
		       sizeof(((struct alice_backend_vtable *)0)->graph_compute))

static void host_log(int level, const char *msg)
{
	if (level < ALICE_LOG_DEBUG || level > ALICE_LOG_ERROR)
		level = ALICE_LOG_INFO;
	alice_log((enum alice_log_level)level, "%s", msg ? msg : "");
}

static const struct alice_backend_host host_table = {
	.abi_major = ALICE_BACKEND_ABI_MAJOR,
	.abi_minor = ALICE_BACKEND_ABI_MINOR,
	.size = sizeof(struct alice_backend_host),
	.log = host_log,
};

struct dir_list {
	int n;
	char d[MAX_DIRS][ALICE_BACKEND_PATH_MAX];
};

static void dirs_add(struct dir_list *dl, const char *d, size_t len)
{
	if (len == 0 || dl->n >= MAX_DIRS || len >= ALICE_BACKEND_PATH_MAX)
		return;
	char tmp[ALICE_BACKEND_PATH_MAX];
	memcpy(tmp, d, len);
	tmp[len] = '\0';
	while (len > 1 && tmp[len - 1] == '/')
		tmp[--len] = '\0';
	for (int i = 0; i < dl->n; i++)
		if (strcmp(dl->d[i], tmp) == 0)
			return;
	memcpy(dl->d[dl->n++], tmp, len + 1);
}

static void dirs_build(const char *dir, struct dir_list *dl)
{
	dl->n = 0;
	if (dir && *dir)
		dirs_add(dl, dir, strlen(dir));
	const char *env = getenv("ALICE_BACKEND_PATH");
	while (env && *env) {
		const char *colon = strchr(env, ':');
		size_t len = colon ? (size_t)(colon - env) : strlen(env);
		dirs_add(dl, env, len);
		env = colon ? colon + 1 : NULL;
	}
	char exe[ALICE_BACKEND_PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			char lib[ALICE_BACKEND_PATH_MAX];
			int l = snprintf(lib, sizeof(lib), "%s/../lib", exe);
			if (l > 0 && (size_t)l < sizeof(lib)) {
				char real[PATH_MAX];
				if (realpath(lib, real))
					dirs_add(dl, real, strlen(real));
			}
			dirs_add(dl, exe, strlen(exe));
		}
	}
#ifdef ALICE_BACKEND_BUILD_DIR
	dirs_add(dl, ALICE_BACKEND_BUILD_DIR, strlen(ALICE_BACKEND_BUILD_DIR));
#endif
}

void alice_backend_search_path(const char *dir, char *buf, size_t len)
{
	struct dir_list *dl = malloc(sizeof(*dl));
	if (!buf || len == 0)
		goto out;
	buf[0] = '\0';
	if (!dl)
		goto out;
	dirs_build(dir, dl);
	size_t used = 0;
	for (int i = 0; i < dl->n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? ":" : "", dl->d[i]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
out:
	free(dl);
}

static bool is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Result of loading one file: on success dl/vt are set. */
struct loaded {
	void *dl;
	const struct alice_backend_vtable *vt;
	int score; /* -1: no score symbol */
	char abi[16];
};

/* dlopen + entry + ABI/size checks. On failure returns an error and closes. */
static enum alice_status load_file(const char *path, struct loaded *ld, struct alice_error *err)
{
	memset(ld, 0, sizeof(*ld));
	ld->score = -1;
	dlerror();
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();
		return alice_fail(err, ALICE_ERR_IO, "cannot load backend %s: %s", path,
				  e ? e : "dlopen failed");
	}
	alice_backend_entry_fn entry;
	*(void **)&entry = dlsym(dl, ALICE_BACKEND_ENTRY_SYMBOL);
	if (!entry) {
		dlclose(dl);
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s is not an alice backend (no " ALICE_BACKEND_ENTRY_SYMBOL ")", path);
	}
	alice_backend_score_fn score;
	*(void **)&score = dlsym(dl, ALICE_BACKEND_SCORE_SYMBOL);
	const struct alice_backend_vtable *vt = entry(&host_table);
	if (!vt) {
		dlclose(dl);
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: " ALICE_BACKEND_ENTRY_SYMBOL " returned no vtable", path);
	}
	snprintf(ld->abi, sizeof(ld->abi), "%u.%u", vt->abi_major, vt->abi_minor);
	if (vt->abi_major != ALICE_BACKEND_ABI_MAJOR) {
		alice_fail(err, ALICE_ERR_UNSUPPORTED,
			   "%s was built for backend ABI %u.%u, this build needs %d.x", path,
			   vt->abi_major, vt->abi_minor, ALICE_BACKEND_ABI_MAJOR);
		dlclose(dl);
		return ALICE_ERR_UNSUPPORTED;
	}
	if (vt->size < VTABLE_NEEDED) {
		alice_fail(err, ALICE_ERR_UNSUPPORTED,
			   "%s has a backend vtable of %u bytes (ABI %u.%u), this build needs at least %zu",
			   path, vt->size, vt->abi_major, vt->abi_minor, (size_t)VTABLE_NEEDED);
		dlclose(dl);
		return ALICE_ERR_UNSUPPORTED;
	}
	if (!vt->probe || !vt->init || !vt->free || !vt->last_error || !vt->buffer_alloc ||
	    !vt->buffer_free || !vt->buffer_write || !vt->buffer_read || !vt->buffer_clear ||
	    !vt->supports_op || !vt->graph_compute || !vt->device_info) {
		dlclose(dl);
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: backend vtable has a required member set to NULL", path);
	}
	ld->dl = dl;
	ld->vt = vt;
	ld->score = score ? score() : -1;
	return ALICE_OK;
}

static bool name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= ALICE_BACKEND_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* The backend name of a file name "libalice-backend-<name>.so", or false. */
static bool file_backend_name(const char *fname, char *name, size_t len)
{
	size_t pl = strlen(PREFIX), sl = strlen(ALICE_BACKEND_SUFFIX), fl = strlen(fname);
	if (fl <= pl + sl || strncmp(fname, PREFIX, pl) != 0 ||
	    strcmp(fname + fl - sl, ALICE_BACKEND_SUFFIX) != 0)
		return false;
	size_t nl = fl - pl - sl;
	if (nl >= len)
		return false;
	memcpy(name, fname + pl, nl);
	name[nl] = '\0';
	return true;
}

/* Candidate files for `name` in one directory: the exact file, then variants
 * "<name>-<x>". Returns how many were written to paths (max cap). */
static int dir_candidates(const char *dir, const char *name, char (*paths)[ALICE_BACKEND_PATH_MAX],
			  int cap)
{
	int n = 0;
	char p[ALICE_BACKEND_PATH_MAX];
	int w = snprintf(p, sizeof(p), "%s/" PREFIX "%s" ALICE_BACKEND_SUFFIX, dir, name);
	if (w > 0 && (size_t)w < sizeof(p) && is_file(p))
		memcpy(paths[n++], p, (size_t)w + 1);
	DIR *d = opendir(dir);
	if (!d)
		return n;
	struct dirent *de;
	size_t nl = strlen(name);
	while ((de = readdir(d)) && n < cap) {
		char fname_name[ALICE_BACKEND_PATH_MAX];
		if (!file_backend_name(de->d_name, fname_name, sizeof(fname_name)))
			continue;
		if (strncmp(fname_name, name, nl) != 0 || fname_name[nl] != '-')
			continue;
		w = snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (w > 0 && (size_t)w < sizeof(p) && is_file(p))
			memcpy(paths[n++], p, (size_t)w + 1);
	}
	closedir(d);
	return n;
}

/* Open one named backend (never "auto"). */
static enum alice_status open_named(const char *name, const char *dir, struct alice_backend **out,
				    struct alice_error *err)
{
	enum alice_status st;
	struct dir_list *dl = malloc(sizeof(*dl));
	char (*cand)[ALICE_BACKEND_PATH_MAX] = malloc(8 * sizeof(*cand));
	struct alice_backend *be = NULL;
	if (!dl || !cand) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory opening backend %s", name);
		goto out;
	}
	dirs_build(dir, dl);
	int nc = 0;
	for (int i = 0; i < dl->n && nc == 0; i++)
		nc = dir_candidates(dl->d[i], name, cand, 8);
	if (nc == 0) {
		char where[2048] = "";
		size_t used = 0;
		for (int i = 0; i < dl->n && used < sizeof(where); i++) {
			int w = snprintf(where + used, sizeof(where) - used, "%s%s", i ? ", " : "", dl->d[i]);
			if (w < 0)
				break;
			used += (size_t)w;
		}
		st = alice_fail(err, ALICE_ERR_NOT_FOUND,
				"backend '%s' not found: no " PREFIX "%s" ALICE_BACKEND_SUFFIX
				" in %s%s", name, name, dl->n ? where : "(no directories)",
				getenv("ALICE_BACKEND_PATH") ? "" : " (ALICE_BACKEND_PATH is not set)");
		goto out;
	}
	/* Several variants: the highest score that can run here wins. */
	struct loaded best = {0};
	int best_i = -1;
	struct alice_error first_err = {{0}};
	st = ALICE_ERR_NOT_FOUND;
	for (int i = 0; i < nc; i++) {
		struct loaded ld;
		struct alice_error e;
		enum alice_status s = load_file(cand[i], &ld, &e);
		if (s != ALICE_OK) {
			if (best_i < 0 && first_err.msg[0] == '\0') {
				first_err = e;
				st = s;
			}
			continue;
		}
		if (ld.score == 0 && nc > 1) {
			snprintf(first_err.msg, sizeof(first_err.msg),
				 "%s: alice_backend_score() says it cannot run here", cand[i]);
			dlclose(ld.dl);
			continue;
		}
		if (best_i < 0 || ld.score > best.score) {
			if (best_i >= 0)
				dlclose(best.dl);
			best = ld;
			best_i = i;
		} else {
			dlclose(ld.dl);
		}
	}
	if (best_i < 0) {
		if (err)
			*err = first_err;
		goto out;
	}
	char reason[512] = "";
	int ndev = best.vt->probe(reason, sizeof(reason));
	if (ndev <= 0) {
		reason[sizeof(reason) - 1] = '\0';
		st = alice_fail(err, ALICE_ERR_UNSUPPORTED, "backend '%s' (%s) cannot run here: %s", name,
				cand[best_i], reason[0] ? reason : "probe found no device");
		dlclose(best.dl);
		goto out;
	}
	be = calloc(1, sizeof(*be));
	if (!be) {
		dlclose(best.dl);
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory opening backend %s", name);
		goto out;
	}
	be->vt = best.vt;
	be->dl = best.dl;
	be->n_devices = ndev;
	snprintf(be->name, sizeof(be->name), "%s", name);
	snprintf(be->path, sizeof(be->path), "%s", cand[best_i]);
	alice_log(ALICE_LOG_DEBUG, "backend %s: %s (ABI %s, %d device(s))", be->name, be->path,
		  best.abi, ndev);
	*out = be;
	be = NULL;
	st = ALICE_OK;
out:
	free(cand);
	free(dl);
	return st;
}

enum alice_status alice_backend_open(const char *name, const char *dir, struct alice_backend **out,
				     struct alice_error *err)
{
	if (!out)
		return alice_fail(err, ALICE_ERR_INVALID, "alice_backend_open: out is NULL");
	*out = NULL;
	if (name && strcmp(name, "auto") != 0) {
		if (!name_ok(name))
			return alice_fail(err, ALICE_ERR_INVALID, "invalid backend name '%s'", name);
		return open_named(name, dir, out, err);
	}
	static const char *const order[] = {"cuda", "vulkan", "cpu"};
	char why[3][200];
	for (int i = 0; i < 3; i++) {
		struct alice_error e = {{0}};
		enum alice_status st = open_named(order[i], dir, out, &e);
		if (st == ALICE_OK) {
			/* auto never picks a software GPU emulation (lavapipe) over the CPU backend */
			struct alice_device_info info;
			if (strcmp(order[i], "cpu") != 0 && (*out)->vt->device_info &&
			    (*out)->vt->device_info(0, &info) == ALICE_OK && (info.flags & ALICE_DEVICE_SOFTWARE)) {
				alice_log(ALICE_LOG_INFO, "auto backend: skipping %s: only a software device (%s); "
					  "use --backend %s to run on it anyway", order[i], info.name, order[i]);
				snprintf(why[i], sizeof(why[i]), "%s: only a software device", order[i]);
				alice_backend_close(*out);
				*out = NULL;
				continue;
			}
			return ALICE_OK;
		}
		snprintf(why[i], sizeof(why[i]), "%.199s", e.msg);
		if (st != ALICE_ERR_NOT_FOUND)
			alice_log(ALICE_LOG_INFO, "auto backend: skipping %s: %s", order[i], e.msg);
	}
	return alice_fail(err, ALICE_ERR_NOT_FOUND, "no usable backend: %s; %s; %s", why[0], why[1],
			  why[2]);
}

void alice_backend_close(struct alice_backend *be)
{
	if (!be)
		return;
	if (be->dl)
		dlclose(be->dl);
	free(be);
}

enum alice_status alice_backend_init(struct alice_backend *be, const struct alice_backend_options *opts,
				     struct alice_backend_ctx **out, struct alice_error *err)
{
	if (!be || !out)
		return alice_fail(err, ALICE_ERR_INVALID, "alice_backend_init: NULL argument");
	*out = NULL;
	struct alice_backend_options def = {.size = sizeof(def), .device = -1, .n_threads = 0};
	char msg[512] = "";
	enum alice_status st = be->vt->init(opts ? opts : &def, out, msg, sizeof(msg));
	if (st != ALICE_OK) {
		msg[sizeof(msg) - 1] = '\0';
		*out = NULL;
		return alice_fail(err, st, "backend %s: init failed: %s", be->name,
				  msg[0] ? msg : alice_status_str(st));
	}
	if (!*out)
		return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: init returned no context", be->name);
	return ALICE_OK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static enum alice_status list_push(struct alice_backend_listing **arr, size_t *n, size_t *cap,
				   struct alice_backend_listing **slot)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		struct alice_backend_listing *na = realloc(*arr, nc * sizeof(**arr));
		if (!na)
			return ALICE_ERR_NOMEM;
		*arr = na;
		*cap = nc;
	}
	*slot = &(*arr)[(*n)++];
	memset(*slot, 0, sizeof(**slot));
	return ALICE_OK;
}

static void list_probe(struct alice_backend_listing *it)
{
	struct loaded ld;
	struct alice_error e;
	if (load_file(it->path, &ld, &e) != ALICE_OK) {
		snprintf(it->reason, sizeof(it->reason), "%s", e.msg);
		it->score = -1;
		return;
	}
	it->loadable = true;
	it->score = ld.score;
	snprintf(it->abi, sizeof(it->abi), "%s", ld.abi);
	char reason[512] = "";
	it->n_devices = ld.vt->probe(reason, sizeof(reason));
	reason[sizeof(reason) - 1] = '\0';
	if (it->n_devices > 0) {
		struct alice_device_info info;
		memset(&info, 0, sizeof(info));
		if (ld.vt->device_info(0, &info) == ALICE_OK) {
			info.name[sizeof(info.name) - 1] = '\0';
			snprintf(it->device, sizeof(it->device), "%s", info.name);
		}
	} else {
		it->n_devices = 0;
		snprintf(it->reason, sizeof(it->reason), "%s", reason[0] ? reason : "probe found no device");
	}
	dlclose(ld.dl);
}

enum alice_status alice_backend_list(const char *dir, struct alice_backend_listing **out, size_t *n_out,
				     struct alice_error *err)
{
	if (!out || !n_out)
		return alice_fail(err, ALICE_ERR_INVALID, "alice_backend_list: NULL argument");
	*out = NULL;
	*n_out = 0;
	struct dir_list *dl = malloc(sizeof(*dl));
	if (!dl)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory listing backends");
	dirs_build(dir, dl);
	struct alice_backend_listing *arr = NULL;
	size_t n = 0, cap = 0;
	enum alice_status st = ALICE_OK;
	for (int i = 0; i < dl->n && st == ALICE_OK; i++) {
		DIR *d = opendir(dl->d[i]);
		if (!d)
			continue;
		char *names[256];
		int nn = 0;
		struct dirent *de;
		while ((de = readdir(d)) && nn < 256) {
			char bn[ALICE_BACKEND_NAME_MAX];
			if (file_backend_name(de->d_name, bn, sizeof(bn)) && (names[nn] = strdup(de->d_name)))
				nn++;
		}
		closedir(d);
		qsort(names, (size_t)nn, sizeof(names[0]), cmp_str);
		for (int j = 0; j < nn; j++) {
			struct alice_backend_listing *it;
			char path[ALICE_BACKEND_PATH_MAX];
			int w = snprintf(path, sizeof(path), "%s/%s", dl->d[i], names[j]);
			if (w <= 0 || (size_t)w >= sizeof(path) || !is_file(path))
				continue;
			if (st == ALICE_OK && (st = list_push(&arr, &n, &cap, &it)) == ALICE_OK) {
				file_backend_name(names[j], it->name, sizeof(it->name));
				snprintf(it->path, sizeof(it->path), "%s", path);
				for (size_t k = 0; k + 1 < n; k++)
					if (strcmp(arr[k].name, it->name) == 0)
						it->shadowed = true;
				list_probe(it);
			}
		}
		for (int j = 0; j < nn; j++)
			free(names[j]);
	}
	free(dl);
	if (st != ALICE_OK) {
		free(arr);
		return alice_fail(err, st, "out of memory listing backends");
	}
	*out = arr;
	*n_out = n;
	return ALICE_OK;
}

void alice_backend_list_free(struct alice_backend_listing *list)
{
	free(list);
}
