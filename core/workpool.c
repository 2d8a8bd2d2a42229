/* workpool.c — see workpool.h. Items are handed out through an atomic
 * counter; helpers sleep on a condition variable between runs. */
#include "workpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct alice_workpool {
	pthread_t *th;
	int n_th;
	pthread_mutex_t mu;
	pthread_cond_t cv_go, cv_done;
	uint64_t gen;     /* under mu: a new run */
	int busy;         /* under mu: helpers still inside the current run */
	bool stop;
	alice_work_fn fn; /* the current run's, under mu */
	void *arg;
	int32_t n;
	atomic_int next;
};

static void take_items(struct alice_workpool *p, alice_work_fn fn, void *arg, int32_t n)
{
	for (;;) {
		int32_t i = atomic_fetch_add(&p->next, 1);
		if (i >= n)
			return;
		fn(arg, i);
	}
}

static void *helper_main(void *a)
{
	struct alice_workpool *p = a;
	uint64_t seen = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->gen == seen && !p->stop)
			pthread_cond_wait(&p->cv_go, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		alice_work_fn fn = p->fn;
		void *arg = p->arg;
		int32_t n = p->n;
		pthread_mutex_unlock(&p->mu);
		take_items(p, fn, arg, n);
		pthread_mutex_lock(&p->mu);
		if (--p->busy == 0)
			pthread_cond_signal(&p->cv_done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct alice_workpool *alice_workpool_create(int n_threads)
{
	struct alice_workpool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_go, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	if (n_threads > 0 && !(p->th = calloc((size_t)n_threads, sizeof(*p->th)))) {
		alice_workpool_free(p);
		return NULL;
	}
	for (int i = 0; i < n_threads; i++) {
		if (pthread_create(&p->th[i], NULL, helper_main, p) != 0) {
			alice_workpool_free(p);
			return NULL;
		}
		p->n_th++;
	}
	return p;
}

void alice_workpool_free(struct alice_workpool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv_go);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n_th; i++)
		pthread_join(p->th[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_go);
	pthread_cond_destroy(&p->cv_done);
	free(p->th);
	free(p);
}

void alice_workpool_run(struct alice_workpool *p, alice_work_fn fn, void *arg, int32_t n)
{
	if (!p || p->n_th == 0 || n < 2) {
		for (int32_t i = 0; i < n; i++)
			fn(arg, i);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	atomic_store(&p->next, 0);
	p->busy = p->n_th;
	p->gen++;
	pthread_cond_broadcast(&p->cv_go);
	pthread_mutex_unlock(&p->mu);
	take_items(p, fn, arg, n);
	pthread_mutex_lock(&p->mu);
	while (p->busy > 0)
		pthread_cond_wait(&p->cv_done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

int alice_workpool_default_threads(int cap)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	int h = n > 2 ? (int)(n - 2) : (n > 1 ? 1 : 0);
	return h < cap ? h : cap;
}
