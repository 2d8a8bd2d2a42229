/* parity_run.h — run the llama.cpp parity checks of one fixture model
 * (see parity_run.c). Call from a Criterion test. */
#ifndef ALICE_TEST_PARITY_RUN_H
#define ALICE_TEST_PARITY_RUN_H

struct alice_parity_bound {
	float bound;  /* max top-10 logit error at any position */
	float median; /* median over all prompt positions */
	float pos0;   /* position 0 of every prompt */
	const char *why;
};

/* name: fixture model, e.g. "gemma2-F32". Backend: ALICE_TEST_BACKEND
 * (default cpu; skipped if it cannot be opened here). */
void alice_parity_run(const char *name, const struct alice_parity_bound *b);

#endif
