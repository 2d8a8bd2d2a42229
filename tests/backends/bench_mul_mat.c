/* bench_mul_mat.c — micro-benchmark of one MUL_MAT node on a backend (not a
 * test: timings never decide pass/fail). Usage:
 *   bench_mul_mat [backend] [threads] [K] [N] [M] [type...]
 * Prints ms per call, weight GB/s and GFLOP/s. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the process: with 1 thread, the kernel's own time even when
 * other processes compete for the cores. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the weight rows quantized on every core (a cold run of a large matrix
 * spent most of a device call here on one) */
struct qjob {
	int type;
	int64_t K, n0, n1;
	size_t rs;
	uint8_t *w;
};

static void *quant_rows(void *arg)
{
	struct qjob *j = arg;
	float *row = malloc((size_t)j->K * 4);
	if (!row)
		return NULL;
	for (int64_t n = j->n0; n < j->n1; n++) {
		uint64_t st = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1);
		for (int64_t k = 0; k < j->K; k++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			row[k] = (float)(st >> 40) / 16777216.0f - 0.5f;
		}
		if (!alice_quantize((uint32_t)j->type, row, j->w + j->rs * (size_t)n, j->K))
			memset(j->w + j->rs * (size_t)n, 0, j->rs);
	}
	free(row);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "cpu";
	int threads = argc > 2 ? atoi(argv[2]) : 0;
	int64_t K = argc > 3 ? atoll(argv[3]) : 2048, N = argc > 4 ? atoll(argv[4]) : 8192,
		M = argc > 5 ? atoll(argv[5]) : 1;
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	if (alice_backend_open(name, NULL, &be, &err) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	struct alice_backend_options opt = {.size = sizeof(opt), .device = -1, .n_threads = threads};
	struct alice_backend_ctx *ctx = NULL;
	if (alice_backend_init(be, &opt, &ctx, &err) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	const struct alice_backend_vtable *vt = be->vt;
	const char *def[] = {"Q4_K", "Q8_0", "Q6_K", "Q4_0", "Q5_K", "F16"};
	int ntypes = argc > 6 ? argc - 6 : 6;
	for (int ti = 0; ti < ntypes; ti++) {
		int type = alice_type_from_name(argc > 6 ? argv[6 + ti] : def[ti]);
		if (type < 0)
			continue;
		size_t rs = alice_row_size((uint32_t)type, K), wbytes = rs * (size_t)N;
		/* ALICE_BENCH_COLD_MB=S: the graph runs the op over copies of the
		 * weight filling S MB, so each reads it from DRAM as a model does */
		const char *cold = getenv("ALICE_BENCH_COLD_MB");
		int copies = cold ? (int)((atof(cold) * 1e6 + (double)wbytes - 1) / (double)wbytes) : 1;
		if (copies < 1)
			copies = 1;
		if (copies > 4096)
			copies = 4096;
		uint8_t *w = malloc(wbytes * (size_t)copies);
		enum { QT = 16 };
		pthread_t th[QT];
		struct qjob jobs[QT];
		for (int q = 0; q < QT; q++) {
			jobs[q] = (struct qjob){type, K, N * q / QT, N * (q + 1) / QT, rs, w};
			if (pthread_create(&th[q], NULL, quant_rows, &jobs[q]) != 0)
				quant_rows(&jobs[q]), th[q] = 0;
		}
		for (int q = 0; q < QT; q++)
			if (th[q])
				pthread_join(th[q], NULL);
		srand(1);
		for (int c = 1; c < copies; c++)
			memcpy(w + wbytes * (size_t)c, w, wbytes);
		struct alice_buffer *wb = NULL, *ab = NULL;
		/* weights in place where the backend maps host memory (cpu), else
		 * copied to the device (cuda, vulkan on a discrete GPU) */
		uint64_t wsize = wbytes * (uint64_t)copies;
		if (!(vt->buffer_import && vt->buffer_import(ctx, w, wsize, &wb) == ALICE_OK) &&
		    (vt->buffer_alloc(ctx, wsize, ALICE_BUFFER_WEIGHTS, &wb) != ALICE_OK ||
		     vt->buffer_write(ctx, wb, 0, w, wsize) != ALICE_OK)) {
			fprintf(stderr, "weights (%.1f MB): %s\n", (double)wsize / 1e6, vt->last_error(ctx));
			return 1;
		}
		if (vt->buffer_alloc(ctx, (uint64_t)(K * M + N * M) * 4, ALICE_BUFFER_COMPUTE, &ab) != ALICE_OK) {
			fprintf(stderr, "activations: %s\n", vt->last_error(ctx));
			return 1;
		}
		float *x = malloc((size_t)(K * M) * 4);
		for (int64_t i = 0; i < K * M; i++)
			x[i] = (float)rand() / RAND_MAX - 0.5f;
		vt->buffer_write(ctx, ab, 0, x, (uint64_t)(K * M) * 4);
		struct alice_tensor *t = calloc((size_t)copies + 2, sizeof(*t));
		struct alice_node *nodes = calloc((size_t)copies, sizeof(*nodes));
		t[0] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {N, M, 1, 1}, .nb = {4, 4 * N, 4 * N * M, 4 * N * M},
					     .buf = ab, .offset = (uint64_t)(K * M) * 4};
		t[1] = (struct alice_tensor){.type = (uint32_t)type, .ne = {K, N, 1, 1},
					     .nb = {(int64_t)alice_type_info((uint32_t)type)->type_size, (int64_t)rs,
						    (int64_t)wbytes, (int64_t)wbytes},
					     .buf = wb};
		t[2] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {K, M, 1, 1}, .nb = {4, 4 * K, 4 * K * M, 4 * K * M},
					     .buf = ab};
		/* tensors: 0 dst, 1 activations, 2.. the weight copies */
		struct alice_tensor tw = t[1];
		t[1] = t[2];
		for (int c = 0; c < copies; c++) {
			t[2 + c] = tw;
			t[2 + c].offset = wbytes * (uint64_t)c;
			nodes[c] = (struct alice_node){.op = ALICE_OP_MUL_MAT, .dst = 0, .src = {2 + c, 1, -1, -1, -1, -1}};
		}
		struct alice_graph g = {.n_tensors = copies + 2, .n_nodes = copies, .tensors = t, .nodes = nodes};
		if (vt->graph_compute(ctx, &g) != ALICE_OK) {
			fprintf(stderr, "%s\n", vt->last_error(ctx));
			return 1;
		}
		/* ALICE_BENCH_SECS: how long each type is timed (default 1 s) */
		const char *secs_e = getenv("ALICE_BENCH_SECS");
		double secs = secs_e ? atof(secs_e) : 1.0;
		int iters = 0;
		double t0 = now(), c0 = cpu_now(), t1;
		do {
			vt->graph_compute(ctx, &g);
			iters++;
			t1 = now();
		} while (t1 - t0 < secs);
		iters *= copies;
		double ms = (t1 - t0) / iters * 1e3, cms = (cpu_now() - c0) / iters * 1e3;
		printf("%-5s K=%lld N=%lld M=%lld: %8.3f ms wall (%8.3f ms cpu)  %6.1f GB/s weights  %7.1f GFLOP/s\n",
		       alice_type_name((uint32_t)type), (long long)K, (long long)N, (long long)M, ms, cms,
		       (double)wbytes / (ms * 1e-3) / 1e9, 2.0 * (double)K * (double)N * (double)M / (ms * 1e-3) / 1e9);
		vt->buffer_free(ctx, wb);
		vt->buffer_free(ctx, ab);
		free(w);
		free(x);
		free(t);
		free(nodes);
	}
	vt->free(ctx);
	alice_backend_close(be);
	return 0;
}
