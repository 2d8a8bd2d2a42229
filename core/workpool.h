/* workpool.h — a few threads that run fn(arg, i) for i in [0, n) and return
 * when all are done; the calling thread takes items too. For host work of a
 * step that splits by request (sampling each row of a batched step). */
#ifndef ALICE_WORKPOOL_H
#define ALICE_WORKPOOL_H

#include <stdint.h>

struct alice_workpool;

typedef void (*alice_work_fn)(void *arg, int32_t i);

/* n_threads helpers besides the caller (0: the caller does everything; a
 * NULL pool is valid and runs inline). NULL when threads cannot start. */
struct alice_workpool *alice_workpool_create(int n_threads);
void alice_workpool_free(struct alice_workpool *p);
/* Run fn(arg, i) for every i in [0, n); not reentrant. */
void alice_workpool_run(struct alice_workpool *p, alice_work_fn fn, void *arg, int32_t n);
/* Helpers worth having on this machine for host work between steps: all
 * online CPUs but two (the caller's thread and one for I/O), at least one
 * on a 2-CPU machine, at most `cap`. */
int alice_workpool_default_threads(int cap);

#endif
