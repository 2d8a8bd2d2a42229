/* prof.cu — ALICE_CUDA_PROFILE=2: where a decode step's wall time goes
 * with graphs on (host work before the launch, the graph on the GPU, the
 * host between steps); see cu_steps below.
 * ALICE_CUDA_PROFILE=1: an event before every launch group of a
 * graph (and one after the last), elapsed times summed per label (op, weight
 * type, decode "dec" / prefill "pre" by the graph's largest MUL_MAT M), a
 * table printed to stderr when the context is freed. Graph replay is off
 * while profiling, so each group's time includes its launch gap; the totals
 * per graph kind are wall time of the stream. For finding where time goes,
 * not for reporting throughput. */
#include <stdlib.h>

#include "common.cuh"

#define PROF_MAX_LABELS 128

struct prof_row {
	char label[64];
	double ms;
	long count;
};

struct cu_prof {
	cudaEvent_t *ev;
	int *lab; /* label index of the group that starts at ev[i] */
	int n, cap;
	bool pre; /* current graph is a prefill */
	struct prof_row rows[PROF_MAX_LABELS];
	int n_rows;
	double graph_ms[2];
	long graphs[2];
};

struct cu_prof *cu_prof_new(void)
{
	return (struct cu_prof *)calloc(1, sizeof(struct cu_prof));
}

static int prof_label(struct cu_prof *p, const char *s)
{
	for (int i = 0; i < p->n_rows; i++)
		if (!strcmp(p->rows[i].label, s))
			return i;
	if (p->n_rows == PROF_MAX_LABELS)
		return PROF_MAX_LABELS - 1;
	snprintf(p->rows[p->n_rows].label, sizeof(p->rows[0].label), "%s", s);
	return p->n_rows++;
}

void cu_prof_graph(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	struct cu_prof *p = ctx->prof;
	p->pre = false;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].op == ALICE_OP_MUL_MAT && g->nodes[i].dst >= 0 &&
		    !cu_mm_decode(&g->nodes[i], g->tensors[g->nodes[i].dst].ne[1]))
			p->pre = true;
	p->n = 0;
}

void cu_prof_mark(struct alice_backend_ctx *ctx, const struct alice_graph *g, int64_t node)
{
	struct cu_prof *p = ctx->prof;
	if (p->n == p->cap) {
		int nc = p->cap ? 2 * p->cap : 1024;
		cudaEvent_t *ev = (cudaEvent_t *)realloc(p->ev, (size_t)nc * sizeof(*ev));
		int *lab = (int *)realloc(p->lab, (size_t)nc * sizeof(int));
		if (!ev || !lab) {
			free(ev ? ev : p->ev);
			free(lab ? lab : p->lab);
			p->ev = NULL;
			p->lab = NULL;
			p->cap = p->n = 0;
			return;
		}
		p->ev = ev;
		p->lab = lab;
		for (int i = p->cap; i < nc; i++)
			cudaEventCreate(&p->ev[i]);
		p->cap = nc;
	}
	char s[64];
	if (node < 0) {
		snprintf(s, sizeof(s), "(end)");
	} else {
		const struct alice_node *n = &g->nodes[node];
		const char *op = alice_bc_op_name(n->op);
		if ((n->op == ALICE_OP_MUL_MAT || n->op == ALICE_OP_GET_ROWS) && n->src[0] >= 0)
			snprintf(s, sizeof(s), "%s %s %s", p->pre ? "pre" : "dec", op,
				 alice_type_name(g->tensors[n->src[0]].type));
		else
			snprintf(s, sizeof(s), "%s %s", p->pre ? "pre" : "dec", op);
	}
	p->lab[p->n] = prof_label(p, s);
	cudaEventRecord(p->ev[p->n], ctx->stream);
	p->n++;
}

void cu_prof_collect(struct alice_backend_ctx *ctx)
{
	struct cu_prof *p = ctx->prof;
	if (p->n < 2)
		return;
	for (int i = 0; i + 1 < p->n; i++) {
		float ms = 0.f;
		if (cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]) == cudaSuccess) {
			p->rows[p->lab[i]].ms += ms;
			p->rows[p->lab[i]].count++;
		}
	}
	float tot = 0.f;
	if (cudaEventElapsedTime(&tot, p->ev[0], p->ev[p->n - 1]) == cudaSuccess) {
		p->graph_ms[p->pre] += tot;
		p->graphs[p->pre]++;
	}
	cudaGetLastError();
	p->n = 0;
}

void cu_prof_free(struct cu_prof *p)
{
	if (!p)
		return;
	fprintf(stderr, "cuda profile: decode graphs %ld (%.3f ms each), prefill graphs %ld (%.3f ms each)\n",
		p->graphs[0], p->graphs[0] ? p->graph_ms[0] / p->graphs[0] : 0.0, p->graphs[1],
		p->graphs[1] ? p->graph_ms[1] / p->graphs[1] : 0.0);
	/* sorted by total time, largest first */
	for (int k = 0; k < p->n_rows; k++) {
		int best = -1;
		for (int i = 0; i < p->n_rows; i++)
			if (p->rows[i].count >= 0 && (best < 0 || p->rows[i].ms > p->rows[best].ms))
				best = i;
		if (best < 0)
			break;
		struct prof_row *r = &p->rows[best];
		bool pre = r->label[0] == 'p';
		long ng = p->graphs[pre] ? p->graphs[pre] : 1;
		if (r->count > 0)
			fprintf(stderr, "  %-28s %10.3f ms total  %8ld groups  %8.2f us/group  %8.3f ms/graph\n", r->label,
				r->ms, r->count, 1000.0 * r->ms / r->count, r->ms / ng);
		r->count = -1;
	}
	for (int i = 0; i < p->cap; i++)
		cudaEventDestroy(p->ev[i]);
	free(p->ev);
	free(p->lab);
	free(p);
}

/* ---- ALICE_CUDA_PROFILE=2: per decode step (graphs on), and per graph
 * launched plainly (prefills): how long the host takes to enqueue it
 * against its span on the GPU (a launch-bound graph has the two close) ---- */
#include <time.h>

struct cu_steps {
	cudaEvent_t e0, e1;
	double t_entry, t_launch, t_done, t_prev_done;
	double host_pre, gpu, wait, between, n;
	double t_enq, p_enq[256], p_gpu[256], p_wait[256]; /* plain launches (the first 256) */
	double blas, p_blas[256]; /* host time in cuBLAS calls: this graph's, each graph's */
	int p_n, n_blas, p_nblas[256];
	bool timed, plain;
};

double cu_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* host time a GEMM spent in its cuBLAS calls (matmul.cu) */
void cu_steps_blas(struct cu_steps *s, double us)
{
	s->blas += us;
	s->n_blas++;
}

struct cu_steps *cu_steps_new(void)
{
	struct cu_steps *s = (struct cu_steps *)calloc(1, sizeof(struct cu_steps));
	if (s && (cudaEventCreate(&s->e0) != cudaSuccess || cudaEventCreate(&s->e1) != cudaSuccess)) {
		free(s);
		return NULL;
	}
	return s;
}

void cu_steps_entry(struct cu_steps *s)
{
	s->t_entry = cu_now_us();
	s->timed = false;
}

/* around a decode graph's replay or a plain launch: record the GPU span */
void cu_steps_launch(struct cu_steps *s, cudaStream_t st, bool begin, bool plain)
{
	if (begin) {
		s->t_launch = cu_now_us();
		s->plain = plain;
		s->blas = 0;
		s->n_blas = 0;
		cudaEventRecord(s->e0, st);
	} else {
		cudaEventRecord(s->e1, st);
		s->t_enq = cu_now_us();
		s->timed = true;
	}
}

void cu_steps_done(struct cu_steps *s)
{
	double t = cu_now_us();
	if (s->timed) {
		float ms = 0.f;
		if (cudaEventElapsedTime(&ms, s->e0, s->e1) != cudaSuccess) {
			/* no span: nothing recorded */
		} else if (s->plain) {
			if (s->p_n < 256) {
				s->p_enq[s->p_n] = s->t_enq - s->t_launch;
				s->p_gpu[s->p_n] = 1000.0 * ms;
				s->p_wait[s->p_n] = t - s->t_launch;
				s->p_blas[s->p_n] = s->blas;
				s->p_nblas[s->p_n] = s->n_blas;
				s->p_n++;
			}
		} else {
			s->host_pre += s->t_launch - s->t_entry;
			s->gpu += 1000.0 * ms;
			s->wait += t - s->t_launch;
			if (s->t_prev_done > 0)
				s->between += s->t_entry - s->t_prev_done;
			s->n++;
		}
		cudaGetLastError();
	}
	s->t_prev_done = s->timed && !s->plain ? t : 0;
	s->timed = false;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

void cu_steps_free(struct cu_steps *s)
{
	if (!s)
		return;
	if (s->n > 0)
		fprintf(stderr,
			"cuda steps: %.0f replayed decode steps, per step: host before launch %.1f us, graph on gpu %.1f us, "
			"launch to sync return %.1f us, host between steps %.1f us\n",
			s->n, s->host_pre / s->n, s->gpu / s->n, s->wait / s->n, s->between / (s->n > 1 ? s->n - 1 : 1));
	if (s->p_n > 0) /* medians: the first graphs set up (weight copies, cuBLAS) */
		fprintf(stderr,
			"cuda steps: %d graphs launched plainly (prefills), median per graph: host enqueue %.1f us (in %d "
			"GEMMs' cuBLAS calls %.1f us), on gpu %.1f us, launch to sync return %.1f us\n",
			s->p_n, median(s->p_enq, s->p_n), s->p_nblas[s->p_n - 1], median(s->p_blas, s->p_n),
			median(s->p_gpu, s->p_n), median(s->p_wait, s->p_n));
	cudaEventDestroy(s->e0);
	cudaEventDestroy(s->e1);
	free(s);
}
