/* alice-bench — prefill (ppN) and decode (tgN) tokens/s per model and backend,
 * side by side, printed as a markdown table like llama-bench (or --json).
 * Each (model, backend) pair runs in a forked child so its peak resident
 * memory (VmHWM) is its own. Decode is measured as llama-bench does: N
 * single-token steps from an empty context; prefill as one N-token batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alice/backend_loader.h"
#include "alice/model.h"
#include "bench_batch.h"
#include "bench_spec.h"

#define MAX_ITEMS 16

struct result {
	int ok;
	char error[700];
	char model_name[160], backend[32], device[128];
	/* the backend's device description: CPU kernels (ISA level) and flags */
	char isa[64], flags[192];
	double size_gib, params_b;
	double pp_mean, pp_sd, tg_mean, tg_sd;
	double peak_rss_mib, weight_mib;
	struct batch_result batch[BATCH_MAX];
};

struct opts {
	const char *models[MAX_ITEMS];
	int n_models;
	char *backends[MAX_ITEMS];
	int n_backends;
	const char *backend_dir;
	int p, n, r, threads;
	int d;         /* -d: tokens already in the sequence before each timed test */
	int warmup_ms; /* --warmup-ms: decode steps for this long before timing */
	int json;
	int batch[BATCH_MAX]; /* --batch: B values; 0 entries = plain pp/tg */
	float temp;           /* --temp: --batch rows drawn at this temperature (0: greedy) */
	int n_batch;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double peak_rss_mib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kb = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = atof(line + 6);
	fclose(f);
	return kb / 1024.0;
}

static void mean_sd(const double *x, int n, double *mean, double *sd)
{
	double s = 0, s2 = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	*mean = s / n;
	for (int i = 0; i < n; i++)
		s2 += (x[i] - *mean) * (x[i] - *mean);
	*sd = n > 1 ? sqrt(s2 / (n - 1)) : 0;
}

/* "kernels: avx512; cpu flags: avx2 ..." (the CPU backend's description)
 * -> isa, flags; other backends: their description as the isa field. */
static void device_desc(const struct opts *o, const char *backend, struct result *res)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	struct alice_device_info info;
	if (alice_backend_open(backend, o->backend_dir, &be, &err) != ALICE_OK)
		return;
	if (be->vt->device_info(0, &info) == ALICE_OK) {
		const char *k = strstr(info.description, "kernels: "), *f = strstr(info.description, "cpu flags: ");
		if (k) {
			k += 9;
			snprintf(res->isa, sizeof res->isa, "%.*s", (int)strcspn(k, ";"), k);
		} else {
			snprintf(res->isa, sizeof res->isa, "%.63s", info.description);
		}
		if (f)
			snprintf(res->flags, sizeof res->flags, "%s", f + 11);
	}
	alice_backend_close(be);
}

/* -d: the sequence's first depth tokens, untimed (llama-bench's -d) */
static int fill_depth(struct alice_context *c, int depth, int32_t *tok, int32_t *pos, int32_t *seq,
		      struct result *res)
{
	if (depth <= 0)
		return 0;
	struct alice_error err = {{0}};
	struct alice_batch b = {depth, tok, pos, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	if (alice_context_decode(c, &b, &err) != ALICE_OK) {
		snprintf(res->error, sizeof res->error, "%s", err.msg);
		return -1;
	}
	return 0;
}

static void run_one(const struct opts *o, const char *path, const char *backend, struct result *res)
{
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = path;
	mp.backend = backend;
	mp.backend_dir = o->backend_dir;
	mp.n_threads = o->threads;
	struct alice_error err = {{0}};
	struct alice_model *m = NULL;
	struct alice_context *c = NULL;
	int32_t *tok = NULL, *pos = NULL, *seq = NULL;
	double *pp = NULL, *tg = NULL;
	snprintf(res->backend, sizeof res->backend, "%s", backend);
	if (alice_model_load(&mp, &m, &err) != ALICE_OK) {
		snprintf(res->error, sizeof res->error, "%s", err.msg);
		return;
	}
	snprintf(res->model_name, sizeof res->model_name, "%s", alice_model_name(m));
	snprintf(res->device, sizeof res->device, "%s", alice_model_device_name(m));
	device_desc(o, backend, res);
	res->params_b = alice_model_n_params(m) / 1e9;
	res->weight_mib = alice_model_weight_bytes(m) / 1048576.0;
	FILE *f = fopen(path, "rb");
	if (f) {
		fseek(f, 0, SEEK_END);
		res->size_gib = ftell(f) / 1073741824.0;
		fclose(f);
	}
	if (o->n_batch > 0) {
		for (int i = 0; i < o->n_batch; i++)
			if (bench_batch_run(m, o->batch[i], o->p, o->n, o->temp, &res->batch[i]) != 0) {
				snprintf(res->error, sizeof res->error, "%s", res->batch[i].error);
				goto out;
			}
		res->ok = 1;
		goto out;
	}
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	int maxp = o->d + (o->p > o->n ? o->p : o->n);
	cp.n_ctx = (uint32_t)(maxp + 16);
	cp.n_seq = 1;
	cp.n_batch = (uint32_t)(o->p > o->d ? o->p : (o->d > 0 ? o->d : 1));
	if (alice_context_create(m, &cp, &c, &err) != ALICE_OK) {
		snprintf(res->error, sizeof res->error, "%s", err.msg);
		goto out;
	}
	int32_t n_vocab = alice_model_n_vocab(m);
	tok = malloc(sizeof(int32_t) * (size_t)(maxp + 1));
	pos = malloc(sizeof(int32_t) * (size_t)(maxp + 1));
	seq = calloc((size_t)maxp + 1, sizeof(int32_t));
	pp = calloc((size_t)o->r, sizeof(double));
	tg = calloc((size_t)o->r, sizeof(double));
	if (!tok || !pos || !seq || !pp || !tg) {
		snprintf(res->error, sizeof res->error, "out of memory");
		goto out;
	}
	unsigned s = 1234;
	for (int i = 0; i <= maxp; i++) {
		s = s * 1103515245u + 12345u;
		tok[i] = (int32_t)((s >> 8) % (unsigned)n_vocab);
		pos[i] = i;
	}
	/* warm-up, as llama-bench does: one prefill of the measured size (GPU
	 * backends load kernels and pick GEMM algorithms per shape on first use)
	 * and one decode step */
	{
		struct alice_batch b = {o->p > 0 ? o->p : 1, tok, pos, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			snprintf(res->error, sizeof res->error, "%s", err.msg);
			goto out;
		}
		struct alice_batch d = {1, tok + b.n_tokens, pos + b.n_tokens, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (alice_context_decode(c, &d, &err) != ALICE_OK) {
			snprintf(res->error, sizeof res->error, "%s", err.msg);
			goto out;
		}
		alice_context_seq_clear(c, 0);
	}
	/* --warmup-ms: decode steps until that much time has passed (a GPU
	 * idle before the run may still be raising its clocks) */
	for (double t_end = now_s() + o->warmup_ms * 1e-3; o->warmup_ms > 0 && now_s() < t_end;) {
		alice_context_seq_clear(c, 0);
		for (int i = 0; i < 32 && i < maxp; i++) {
			struct alice_batch b = {1, tok + i, pos + i, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
			if (alice_context_decode(c, &b, &err) != ALICE_OK) {
				snprintf(res->error, sizeof res->error, "%s", err.msg);
				goto out;
			}
		}
	}
	alice_context_seq_clear(c, 0);
	for (int rep = 0; rep < o->r && o->p > 0; rep++) {
		alice_context_seq_clear(c, 0);
		if (fill_depth(c, o->d, tok, pos, seq, res) != 0)
			goto out;
		struct alice_batch b = {o->p, tok + o->d, pos + o->d, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		double t0 = now_s();
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			snprintf(res->error, sizeof res->error, "%s", err.msg);
			goto out;
		}
		pp[rep] = o->p / (now_s() - t0);
	}
	for (int rep = 0; rep < o->r && o->n > 0; rep++) {
		alice_context_seq_clear(c, 0);
		if (fill_depth(c, o->d, tok, pos, seq, res) != 0)
			goto out;
		double t0 = now_s();
		for (int i = o->d; i < o->d + o->n; i++) {
			struct alice_batch b = {1, tok + i, pos + i, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
			if (alice_context_decode(c, &b, &err) != ALICE_OK) {
				snprintf(res->error, sizeof res->error, "%s", err.msg);
				goto out;
			}
		}
		tg[rep] = o->n / (now_s() - t0);
	}
	if (o->p > 0) mean_sd(pp, o->r, &res->pp_mean, &res->pp_sd);
	if (o->n > 0) mean_sd(tg, o->r, &res->tg_mean, &res->tg_sd);
	res->ok = 1;
out:
	res->peak_rss_mib = peak_rss_mib();
	free(tok); free(pos); free(seq); free(pp); free(tg);
	alice_context_free(c);
	alice_model_free(m);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-bench -m MODEL.gguf [-m ...] [--backend cpu,cuda,vulkan] [-p 512] [-n 128] "
		   "[-d 0] [-r 5] [-t THREADS] [--backend-dir DIR] [--batch 1,4,16,64] [--warmup-ms 0] [--json]\n"
		   "  -d D:          D tokens in the sequence (untimed) before each pp / tg test (llama-bench's -d)\n"
		   "  --warmup-ms N: decode steps for N ms before the timed runs (default: llama-bench's\n"
		   "                 warm-up only, one prefill and one decode step)\n"
		   "  --batch B,...: B sequences prefill -p tokens each, then decode -n tokens together;\n"
		   "                 prints prefill t/s, total decode t/s and per-sequence decode t/s\n"
		   "  --temp T:      --batch decode rows drawn at temperature T on the device (default greedy)\n"
		   "  --draft D.gguf | --spec ngram [--draft-max 16] [--draft-p-min 0.75] [--spec-ngram 3]:\n"
		   "                 decode -n greedy tokens of fixed prompts through the engine, plain and\n"
		   "                 speculating (draft model D, or prompt lookup); t/s, speed-up, acceptance\n");
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static int parse_batch(const char *v, struct opts *o)
{
	const char *p = v;
	o->n_batch = 0;
	while (*p) {
		char *end;
		long b = strtol(p, &end, 10);
		if (end == p || b < 1 || b > 4096 || o->n_batch == BATCH_MAX || (*end && *end != ',')) {
			fprintf(stderr, "alice-bench: --batch wants up to %d sizes in [1, 4096] separated by commas: '%s'\n",
				BATCH_MAX, v);
			return -1;
		}
		o->batch[o->n_batch++] = (int)b;
		p = *end ? end + 1 : end;
	}
	return o->n_batch ? 0 : -1;
}

static void print_batch(const struct opts *o, const struct result *res, int nres)
{
	if (o->json) {
		printf("[\n");
		for (int i = 0; i < nres; i++)
			for (int k = 0; k < o->n_batch; k++) {
				const struct result *r = &res[i];
				const struct batch_result *b = &r->batch[k];
				printf("  {\"model\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\", \"isa\": \"%s\", "
				       "\"cpu_flags\": \"%s\", \"ok\": %s, \"B\": %d, \"pp\": %d, \"tg\": %d, \"pp_tps\": %.3f, \"tg_tps\": %.3f, "
				       "\"tg_seq_tps\": %.3f, \"step_ms\": %.4f, \"step_whole_ms\": %.4f, \"step_pipe_ms\": %.4f, "
				       "\"peak_rss_mib\": %.1f}%s\n",
				       r->model_name, r->backend, r->device, r->isa, r->flags, b->ok ? "true" : "false", o->batch[k],
				       o->p, o->n, b->pp_tps, b->tg_tps, b->tg_seq_tps, b->step_ms, b->step_whole_ms, b->step_pipe_ms, r->peak_rss_mib,
				       i + 1 < nres || k + 1 < o->n_batch ? "," : "");
			}
		printf("]\n");
		return;
	}
	printf("| model | backend | B | pp | tg | prefill t/s | decode t/s | per-seq t/s | step ms | step ms, rows read whole "
	       "| step ms, pipelined | decode t/s, pipelined |\n");
	printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	for (int i = 0; i < nres; i++) {
		const struct result *r = &res[i];
		for (int k = 0; k < o->n_batch; k++) {
			const struct batch_result *b = &r->batch[k];
			if (!b->ok) {
				printf("| %s | %s | %d | %d | %d | failed: %s | | | | | | |\n", r->model_name, r->backend,
				       o->batch[k], o->p, o->n, r->error);
				break;
			}
			printf("| %s | %s | %d | %d | %d | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f | %.2f |\n", r->model_name,
			       r->backend, b->B, o->p, o->n, b->pp_tps, b->tg_tps, b->tg_seq_tps, b->step_ms,
			       b->step_whole_ms, b->step_pipe_ms, b->step_pipe_ms > 0 ? 1e3 * b->B / b->step_pipe_ms : 0.0);
		}
	}
}

int main(int argc, char **argv)
{
	struct opts o = {.p = 512, .n = 128, .r = 5, .threads = 0};
	char *backend_list = NULL;
	struct bench_spec_opts so = {0};
	alice_spec_params_default(&so.spec);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
		if (!strcmp(a, "--json")) { o.json = 1; continue; }
		if (!v) { fprintf(stderr, "alice-bench: %s needs a value\n", a); return 2; }
		if (!strcmp(a, "-m")) {
			if (o.n_models == MAX_ITEMS) { fprintf(stderr, "alice-bench: too many models\n"); return 2; }
			o.models[o.n_models++] = v;
		} else if (!strcmp(a, "--backend")) backend_list = strdup(v);
		else if (!strcmp(a, "--backend-dir")) o.backend_dir = v;
		else if (!strcmp(a, "-p")) o.p = atoi(v);
		else if (!strcmp(a, "-d")) o.d = atoi(v);
		else if (!strcmp(a, "-n")) o.n = atoi(v);
		else if (!strcmp(a, "-r")) o.r = atoi(v);
		else if (!strcmp(a, "-t")) o.threads = atoi(v);
		else if (!strcmp(a, "--warmup-ms")) o.warmup_ms = atoi(v);
		else if (!strcmp(a, "--temp")) o.temp = (float)atof(v);
		else if (!strcmp(a, "--draft")) { so.draft = v; so.spec.mode = ALICE_SPEC_DRAFT; }
		else if (!strcmp(a, "--spec")) {
			if (strcmp(v, "ngram")) { fprintf(stderr, "alice-bench: --spec wants ngram (or use --draft)\n"); return 2; }
			so.spec.mode = ALICE_SPEC_NGRAM;
		}
		else if (!strcmp(a, "--draft-max")) so.spec.n_max = (uint32_t)atoi(v);
		else if (!strcmp(a, "--draft-p-min")) so.spec.p_min = (float)atof(v);
		else if (!strcmp(a, "--spec-ngram")) so.spec.ngram_n = (uint32_t)atoi(v);
		else if (!strcmp(a, "--batch")) {
			if (parse_batch(v, &o) != 0) return 2;
		}
		else { fprintf(stderr, "alice-bench: unknown option %s\n", a); usage(stderr); return 2; }
		i++;
	}
	if (!o.n_models || o.r < 1 || o.p < 0 || o.n < 0 || o.d < 0 || o.warmup_ms < 0) { usage(stderr); return 2; }
	if (o.d > 0 && (o.n_batch || so.spec.mode != ALICE_SPEC_NONE)) {
		fprintf(stderr, "alice-bench: -d applies to the pp / tg tests, not to --batch or speculation\n");
		free(backend_list);
		return 2;
	}
	if (!backend_list) backend_list = strdup("cpu");
	if (so.spec.mode != ALICE_SPEC_NONE) {
		struct alice_error err = {{0}};
		struct alice_spec_params chk = so.spec;
		chk.draft = so.draft ? (struct alice_model *)1 : NULL; /* only checked for presence */
		if (alice_spec_params_check(&chk, &err) != ALICE_OK) {
			fprintf(stderr, "alice-bench: %s\n", err.msg);
			free(backend_list);
			return 2;
		}
		so.spec.n_max = chk.n_max;
		so.spec.ngram_n = chk.ngram_n;
		so.model = o.models[0];
		so.backend = strtok(backend_list, ",");
		so.backend_dir = o.backend_dir;
		so.threads = o.threads;
		so.n = o.n;
		so.r = o.r;
		so.json = o.json;
		int rc = bench_spec_run(&so);
		free(backend_list);
		return rc;
	}
	for (char *tok = strtok(backend_list, ","); tok && o.n_backends < MAX_ITEMS; tok = strtok(NULL, ","))
		o.backends[o.n_backends++] = tok;

	static struct result res[MAX_ITEMS * MAX_ITEMS];
	int nres = 0, failures = 0;
	for (int mi = 0; mi < o.n_models; mi++) {
		for (int bi = 0; bi < o.n_backends; bi++) {
			struct result *r = &res[nres++];
			memset(r, 0, sizeof *r);
			int fd[2];
			if (pipe(fd) != 0) { perror("alice-bench: pipe"); return 1; }
			fflush(NULL);
			pid_t pid = fork();
			if (pid == 0) {
				close(fd[0]);
				struct result cr = {0};
				run_one(&o, o.models[mi], o.backends[bi], &cr);
				ssize_t w = write(fd[1], &cr, sizeof cr);
				_exit(w == (ssize_t)sizeof cr ? 0 : 1);
			}
			close(fd[1]);
			ssize_t got = read(fd[0], r, sizeof *r);
			close(fd[0]);
			int wst = 0;
			waitpid(pid, &wst, 0);
			if (got != (ssize_t)sizeof *r) {
				snprintf(r->error, sizeof r->error, "benchmark process died (status %d)", wst);
				snprintf(r->backend, sizeof r->backend, "%s", o.backends[bi]);
				r->ok = 0;
			}
			if (!r->model_name[0])
				snprintf(r->model_name, sizeof r->model_name, "%s", base_name(o.models[mi]));
			if (!r->ok) {
				failures++;
				fprintf(stderr, "alice-bench: %s on %s: %s\n", o.models[mi], o.backends[bi], r->error);
			}
		}
	}
	if (o.n_batch) {
		print_batch(&o, res, nres);
	} else if (o.json) {
		printf("[\n");
		for (int i = 0; i < nres; i++) {
			struct result *r = &res[i];
			printf("  {\"model\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\", \"isa\": \"%s\", "
			       "\"cpu_flags\": \"%s\", \"ok\": %s, \"size_gib\": %.4f, \"params_b\": %.4f, \"threads\": %d, "
			       "\"pp\": %d, \"pp_tps\": %.3f, \"pp_sd\": %.3f, \"tg\": %d, \"tg_tps\": %.3f, "
			       "\"tg_sd\": %.3f, \"depth\": %d, \"peak_rss_mib\": %.1f, \"weights_mib\": %.1f}%s\n",
			       r->model_name, r->backend, r->device, r->isa, r->flags, r->ok ? "true" : "false", r->size_gib,
			       r->params_b, o.threads, o.p, r->pp_mean, r->pp_sd, o.n, r->tg_mean, r->tg_sd, o.d,
			       r->peak_rss_mib, r->weight_mib, i + 1 < nres ? "," : "");
		}
		printf("]\n");
	} else {
		printf("| model | size | params | backend | threads | test | t/s | peak RSS |\n");
		printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
		for (int i = 0; i < nres; i++) {
			struct result *r = &res[i];
			if (!r->ok) {
				printf("| %s | | | %s | %d | - | failed: %s | |\n", r->model_name, r->backend,
				       o.threads, r->error);
				continue;
			}
			char at[32] = "";
			if (o.d > 0)
				snprintf(at, sizeof at, " @ d%d", o.d);
			if (o.p > 0)
				printf("| %s | %.2f GiB | %.2f B | %s | %d | pp%d%s | %.2f ± %.2f | %.0f MiB |\n",
				       r->model_name, r->size_gib, r->params_b, r->backend, o.threads, o.p, at,
				       r->pp_mean, r->pp_sd, r->peak_rss_mib);
			if (o.n > 0)
				printf("| %s | %.2f GiB | %.2f B | %s | %d | tg%d%s | %.2f ± %.2f | %.0f MiB |\n",
				       r->model_name, r->size_gib, r->params_b, r->backend, o.threads, o.n, at,
				       r->tg_mean, r->tg_sd, r->peak_rss_mib);
		}
	}
	if (!o.json) /* which machine and kernels the figures come from */
		for (int i = 0; i < nres; i++) {
			int seen = 0;
			for (int k = 0; k < i; k++)
				seen |= !strcmp(res[k].backend, res[i].backend) && !strcmp(res[k].device, res[i].device);
			if (!seen && res[i].device[0])
				printf("\n%s: %s; kernels: %s; cpu flags: %s\n", res[i].backend, res[i].device,
				       res[i].isa[0] ? res[i].isa : "-", res[i].flags[0] ? res[i].flags : "-");
		}
	free(backend_list);
	return failures ? 1 : 0;
}
