/* bench_spec.h — alice-bench --draft / --spec ngram (see bench_spec.c). */
#ifndef ALICE_BENCH_SPEC_H
#define ALICE_BENCH_SPEC_H

#include "alice/spec.h"

struct bench_spec_opts {
	const char *model, *draft; /* draft: --draft PATH, NULL for ngram */
	const char *backend, *backend_dir;
	int threads, n, r;
	struct alice_spec_params spec;
	int json;
};

/* Prints one table row (or JSON object) per repetition; 0, or 1 on failure. */
int bench_spec_run(const struct bench_spec_opts *o);

#endif
