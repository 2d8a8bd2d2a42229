/* parity_run.h — run the llama.cpp parity checks of one fixture model
 * (see parity_run.c). Call from a Criterion test. */
#ifndef ALICE_TEST_PARITY_RUN_H
#define ALICE_TEST_PARITY_RUN_H

#include <stdbool.h>

struct alice_parity_bound {
	float bound;  /* max top-10 logit error at any position */
	float median; /* median over all prompt positions */
	float pos0;   /* position 0 of every prompt */
	const char *why;
	/* The cpu backend reproduces llama.cpp's arithmetic for this type
	 * (issues #4, #9): there (x86-64, default kernels) top-1 must equal the
	 * reference's at every position and the 24-token greedy continuation
	 * of every prompt must be identical, near-ties included. With
	 * ALICE_CPU_EXACT=1 every type is held to more: logits equal to the
	 * references' bits (parity_run.c). */
	bool cpu_exact;
};

/* name: fixture model, e.g. "gemma2-F32". Backend: ALICE_TEST_BACKEND
 * (default cpu; skipped if it cannot be opened here). */
void alice_parity_run(const char *name, const struct alice_parity_bound *b);

#endif
