/* threadpool.c — a fixed set of worker threads that run one task at a time
 * (every op splits its own work by thread index or by an atomic chunk
 * counter). Workers spin briefly after a task, since ops come back to back
 * during a step, then sleep on a condition variable. When the pool holds
 * every core, they sleep at once after a step's last op (cpu_pool_idle):
 * the server's threads (and a client on the same machine) run between steps
 * and would otherwise wait for the spinning to end (2 cores, tiny-tolstoy,
 * 1-8 streaming clients: +15 % tokens/s; a back-to-back tg loop: -3 %). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_internal.h"

#define SPIN_ROUNDS 20000
/* Work (elements) below which an op runs on the calling thread alone;
 * ALICE_CPU_MIN_PARALLEL_WORK overrides it (0: always use every thread, so
 * tests with small shapes still run the threaded paths). */
#define SMALL_WORK 32768

/* One job per generation, in two slots (gen & 1) so that a late worker can
 * still read the job it saw while the caller writes the next one. */
struct job {
	cpu_task_fn fn;
	void *arg;
	bool dynamic;     /* work is taken from a shared counter: late threads may skip */
	atomic_bool open; /* dynamic jobs: cleared when the caller has finished its part */
};

struct cpu_pool {
	int n;
	pthread_t th[CPU_MAX_THREADS];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_uint gen;
	atomic_int active; /* workers between claiming a generation and finishing it */
	atomic_int done;   /* workers that ran the current static job */
	atomic_bool stop;
	atomic_bool idle; /* the step is over: spin less */
	struct job jobs[2];
	int64_t min_work; /* below this, cpu_pool_run_sized stays on the caller */
	int idle_spins;   /* spins after a step: 0 when the pool holds every core; ALICE_CPU_IDLE_SPIN */
};

struct worker_arg {
	struct cpu_pool *p;
	int ith;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static void *worker_main(void *v)
{
	struct worker_arg wa = *(struct worker_arg *)v;
	free(v);
	struct cpu_pool *p = wa.p;
	unsigned seen = 0;
	for (;;) {
		int spins = 0;
		while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop) &&
		       spins < (atomic_load(&p->idle) ? p->idle_spins : SPIN_ROUNDS)) {
			cpu_relax();
			spins++;
		}
		if (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) {
			pthread_mutex_lock(&p->mu);
			while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
				pthread_cond_wait(&p->cv, &p->mu);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->stop))
			break;
		/* claim first, then read: the caller rewrites a slot only when
		 * no worker is active, and publishes gen after writing it */
		atomic_fetch_add(&p->active, 1);
		unsigned g = atomic_load(&p->gen);
		if (g == seen) {
			atomic_fetch_sub(&p->active, 1);
			continue;
		}
		seen = g;
		struct job *j = &p->jobs[g & 1];
		if (j->dynamic && !atomic_load(&j->open)) { /* its work is already done */
			atomic_fetch_sub(&p->active, 1);
			continue;
		}
		j->fn(j->arg, wa.ith, p->n);
		if (!j->dynamic)
			atomic_fetch_add(&p->done, 1);
		atomic_fetch_sub(&p->active, 1);
	}
	return NULL;
}

struct cpu_pool *cpu_pool_create(int n_threads)
{
	if (n_threads < 1)
		n_threads = 1;
	if (n_threads > CPU_MAX_THREADS)
		n_threads = CPU_MAX_THREADS;
	struct cpu_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n = n_threads;
	p->min_work = SMALL_WORK;
	long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
	p->idle_spins = n_cpu > 0 && n_threads >= n_cpu ? 0 : SPIN_ROUNDS;
	const char *is = getenv("ALICE_CPU_IDLE_SPIN");
	if (is && *is)
		p->idle_spins = atoi(is);
	const char *mw = getenv("ALICE_CPU_MIN_PARALLEL_WORK");
	if (mw && *mw)
		p->min_work = strtoll(mw, NULL, 10);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	atomic_init(&p->gen, 0);
	atomic_init(&p->active, 0);
	atomic_init(&p->done, 0);
	atomic_init(&p->stop, false);
	atomic_init(&p->idle, false);
	atomic_init(&p->jobs[0].open, false);
	atomic_init(&p->jobs[1].open, false);
	for (int i = 1; i < n_threads; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));
		if (wa) {
			wa->p = p;
			wa->ith = i;
		}
		if (!wa || pthread_create(&p->th[i], NULL, worker_main, wa) != 0) {
			free(wa);
			p->n = i; /* join the ones started */
			cpu_pool_free(p);
			return NULL;
		}
	}
	return p;
}

void cpu_pool_free(struct cpu_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->n; i++)
		pthread_join(p->th[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

int cpu_pool_size(const struct cpu_pool *p)
{
	return p->n;
}

static void wait_until_zero(atomic_int *v)
{
	int spins = 0;
	while (atomic_load(v) > 0) {
		if (++spins < SPIN_ROUNDS)
			cpu_relax();
		else
			sched_yield();
	}
}

static void run(struct cpu_pool *p, cpu_task_fn fn, void *arg, bool dynamic)
{
	if (p->n == 1) {
		fn(arg, 0, 1);
		return;
	}
	/* no worker may still be reading the slot we are about to write */
	wait_until_zero(&p->active);
	unsigned g = atomic_load(&p->gen) + 1;
	struct job *j = &p->jobs[g & 1];
	j->fn = fn;
	j->arg = arg;
	j->dynamic = dynamic;
	atomic_store(&j->open, true);
	atomic_store(&p->done, 0);
	atomic_store(&p->idle, false);
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->gen, g);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	fn(arg, 0, p->n);
	int spins = 0;
	if (dynamic) {
		/* close, then wait only for workers already inside fn: one that
		 * claims later sees the job closed (seq_cst store/load pair) */
		atomic_store(&j->open, false);
		wait_until_zero(&p->active);
		return;
	}
	while (atomic_load(&p->done) < p->n - 1) {
		if (++spins < SPIN_ROUNDS)
			cpu_relax();
		else
			sched_yield();
	}
}

void cpu_pool_idle(struct cpu_pool *p)
{
	atomic_store(&p->idle, true);
}

void cpu_pool_run(struct cpu_pool *p, cpu_task_fn fn, void *arg)
{
	run(p, fn, arg, false);
}

void cpu_pool_run_dynamic(struct cpu_pool *p, cpu_task_fn fn, void *arg)
{
	run(p, fn, arg, true);
}

void cpu_pool_run_dynamic_sized(struct cpu_pool *p, cpu_task_fn fn, void *arg, int64_t work)
{
	if (work < p->min_work)
		fn(arg, 0, 1);
	else
		run(p, fn, arg, true);
}

void cpu_pool_run_sized(struct cpu_pool *p, cpu_task_fn fn, void *arg, int64_t work)
{
	if (work < p->min_work)
		fn(arg, 0, 1);
	else
		cpu_pool_run(p, fn, arg);
}

static int read_int_file(const char *path, int *out)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int ok = fscanf(f, "%d", out) == 1 ? 0 : -1;
	fclose(f);
	return ok;
}

int cpu_physical_cores(void)
{
	cpu_set_t set;
	int n_aff = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n_aff = CPU_COUNT(&set);
	long n_online = sysconf(_SC_NPROCESSORS_ONLN);
	if (n_online < 1)
		n_online = 1;
	/* unique (package, core) pairs among the CPUs we may run on */
	int n_pairs = 0;
	int pairs[1024][2];
	for (int cpu = 0; cpu < 1024; cpu++) {
		if (n_aff > 0 && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)))
			continue;
		char path[128];
		int core, pkg;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
		if (read_int_file(path, &core) != 0)
			continue;
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
		if (read_int_file(path, &pkg) != 0)
			pkg = 0;
		bool dup = false;
		for (int i = 0; i < n_pairs && !dup; i++)
			dup = pairs[i][0] == pkg && pairs[i][1] == core;
		if (!dup && n_pairs < 1024) {
			pairs[n_pairs][0] = pkg;
			pairs[n_pairs][1] = core;
			n_pairs++;
		}
	}
	int n = n_pairs > 0 ? n_pairs : (int)n_online;
	if (n_aff > 0 && n > n_aff)
		n = n_aff;
	return n < 1 ? 1 : n;
}
