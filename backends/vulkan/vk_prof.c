/* vk_prof.c — ALICE_VK_PROFILE=1: where a graph's time goes. A timestamp
 * after every dispatch (the GPU time since the previous one, summed per
 * shader; dispatches not separated by a barrier may overlap, so a shader's
 * share is approximate), and per graph the host's recording time and the
 * submit-to-fence wait. A table goes to the log when the context is freed.
 * For finding where time goes, not for reporting throughput.
 * ALICE_VK_PROFILE=3: only a graph's first and last timestamps (its GPU
 * span without the serializing timestamps between dispatches). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_internal.h"

#define PROF_QUERIES 4096
#define PROF_LABELS 96

struct vk_prof {
	VkQueryPool pool;
	uint32_t n;			/* timestamps written in this graph */
	uint16_t lab[PROF_QUERIES];	/* label of the dispatch ending at query i */
	char labels[PROF_LABELS][24];
	double ms[PROF_LABELS];
	long count[PROF_LABELS];
	int n_labels;
	double t0, t_submit, rec_ms, wait_ms, gpu_ms, rec_first, wait_first;
	double t_end, gap_ms; /* the last graph's end; host time between graphs */
	long gaps;
	long graphs, dispatches, barriers;
	uint32_t graph_barriers;
	int verbose; /* ALICE_VK_PROFILE=2: a line per graph */
	int span; /* ALICE_VK_PROFILE=3: no timestamps between dispatches */
	long syncs; /* submit-and-wait copies outside the steps (staged writes, reads, clears) */
	double sync_ms;
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void vk_prof_init(struct alice_backend_ctx *ctx)
{
	const char *e = getenv("ALICE_VK_PROFILE");
	if (!e || atoi(e) <= 0 || ctx->props.limits.timestampPeriod <= 0)
		return;
	struct vk_prof *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	VkQueryPoolCreateInfo qi = {
		.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
		.queryType = VK_QUERY_TYPE_TIMESTAMP,
		.queryCount = PROF_QUERIES,
	};
	if (vkCreateQueryPool(ctx->dev, &qi, NULL, &p->pool) != VK_SUCCESS) {
		free(p);
		return;
	}
	p->verbose = atoi(e) == 2;
	p->span = atoi(e) >= 3;
	ctx->prof = p;
	vk_log(1, "vulkan profile on: %s", p->span ? "each graph's first and last timestamps" : "a timestamp after every dispatch");
}

void vk_prof_start(struct alice_backend_ctx *ctx)
{
	struct vk_prof *p = ctx->prof;
	if (!p)
		return;
	p->t0 = now_ms();
	if (p->t_end > 0 && p->graphs > 1) { /* the first graphs build pipelines */
		p->gap_ms += p->t0 - p->t_end;
		p->gaps++;
	}
}

/* a recording starts (a replayed one keeps its timestamps and counts) */
void vk_prof_record(struct alice_backend_ctx *ctx, VkCommandBuffer cmd)
{
	struct vk_prof *p = ctx->prof;
	if (!p)
		return;
	p->n = 0;
	p->graph_barriers = 0;
	vkCmdResetQueryPool(cmd, p->pool, 0, PROF_QUERIES);
	vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, p->n++);
}

void vk_prof_barrier(struct alice_backend_ctx *ctx)
{
	if (ctx->prof)
		ctx->prof->graph_barriers++;
}

void vk_prof_dispatch(struct alice_backend_ctx *ctx, VkCommandBuffer cmd, const char *shader)
{
	struct vk_prof *p = ctx->prof;
	if (!p || p->n >= PROF_QUERIES || p->span)
		return;
	int l = 0;
	while (l < p->n_labels && strcmp(p->labels[l], shader) != 0)
		l++;
	if (l == p->n_labels) {
		if (p->n_labels == PROF_LABELS)
			l = PROF_LABELS - 1; /* the last label takes the rest */
		else
			snprintf(p->labels[p->n_labels++], sizeof(p->labels[0]), "%s", shader);
	}
	p->lab[p->n] = (uint16_t)l;
	vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, p->n++);
}

/* the recording ends: in span mode the graph's closing timestamp */
void vk_prof_record_end(struct alice_backend_ctx *ctx, VkCommandBuffer cmd)
{
	struct vk_prof *p = ctx->prof;
	if (!p || !p->span)
		return;
	p->span = 0;
	vk_prof_dispatch(ctx, cmd, "(graph span)");
	p->span = 1;
}

void vk_prof_submit(struct alice_backend_ctx *ctx)
{
	if (ctx->prof)
		ctx->prof->t_submit = now_ms();
}

void vk_prof_end(struct alice_backend_ctx *ctx)
{
	struct vk_prof *p = ctx->prof;
	if (!p)
		return;
	double t = now_ms();
	p->t_end = t;
	if (p->graphs == 0) { /* the first graph builds the pipelines it uses */
		p->rec_first = p->t_submit - p->t0;
		p->wait_first = t - p->t_submit;
	}
	p->rec_ms += p->t_submit - p->t0;
	p->wait_ms += t - p->t_submit;
	p->graphs++;
	p->dispatches += p->n - 1;
	p->barriers += p->graph_barriers;
	uint64_t *ts = malloc((size_t)p->n * sizeof(uint64_t));
	if (!ts)
		return;
	if (vkGetQueryPoolResults(ctx->dev, p->pool, 0, p->n, (size_t)p->n * sizeof(uint64_t), ts, sizeof(uint64_t),
				  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS) {
		double per = ctx->props.limits.timestampPeriod * 1e-6; /* ns -> ms */
		for (uint32_t i = 1; i < p->n; i++) {
			p->ms[p->lab[i]] += (double)(ts[i] - ts[i - 1]) * per;
			p->count[p->lab[i]]++;
		}
		p->gpu_ms += (double)(ts[p->n - 1] - ts[0]) * per;
		if (p->verbose)
			fprintf(stderr, "vulkan profile: graph %ld: %u dispatches, host until submit %.3f ms, submit to fence %.3f ms, GPU %.3f ms\n",
				p->graphs, p->n - 1, p->t_submit - p->t0, t - p->t_submit, (double)(ts[p->n - 1] - ts[0]) * per);
	}
	free(ts);
}

double vk_prof_now(const struct alice_backend_ctx *ctx)
{
	return ctx->prof ? now_ms() : 0.0;
}

void vk_prof_sync(struct alice_backend_ctx *ctx, double t0)
{
	struct vk_prof *p = ctx->prof;
	if (!p)
		return;
	double ms = now_ms() - t0;
	p->syncs++;
	p->sync_ms += ms;
	if (p->verbose)
		fprintf(stderr, "vulkan profile: a copy outside the steps waited %.3f ms\n", ms);
}

void vk_prof_free(struct alice_backend_ctx *ctx)
{
	struct vk_prof *p = ctx->prof;
	if (!p)
		return;
	if (p->graphs) {
		double g = (double)p->graphs;
		double g1 = g > 1 ? g - 1 : 1;
		fprintf(stderr,
			"vulkan profile: %ld graphs (%llu command buffers recorded, %llu replayed); per graph %.1f dispatches, "
			"%.1f barriers, host until submit %.3f ms, submit to fence %.3f ms, GPU first to last dispatch %.3f ms; "
			"after the first graph (%.3f ms host, %.3f ms to fence) host until submit %.3f ms, submit to fence %.3f ms\n",
			p->graphs, (unsigned long long)ctx->n_recorded, (unsigned long long)ctx->n_replayed, p->dispatches / g,
			p->barriers / g, p->rec_ms / g, p->wait_ms / g, p->gpu_ms / g, p->rec_first, p->wait_first,
			g > 1 ? (p->rec_ms - p->rec_first) / g1 : 0.0, g > 1 ? (p->wait_ms - p->wait_first) / g1 : 0.0);
		fprintf(stderr, "vulkan profile: %ld copies outside the steps, %.3f ms waited for them\n", p->syncs, p->sync_ms);
		fprintf(stderr, "vulkan profile: host time from a graph's fence to the next graph's launch %.3f ms (mean of %ld)\n",
			p->gaps ? p->gap_ms / (double)p->gaps : 0.0, p->gaps);
		for (int k = 0; k < p->n_labels; k++) { /* largest first */
			int best = -1;
			for (int l = 0; l < p->n_labels; l++)
				if (p->count[l] >= 0 && (best < 0 || p->ms[l] > p->ms[best]))
					best = l;
			fprintf(stderr, "  %-24s %10.3f ms %8ld dispatches %8.2f us each %8.3f ms/graph\n", p->labels[best],
				p->ms[best], p->count[best], p->count[best] ? 1e3 * p->ms[best] / p->count[best] : 0.0,
				p->ms[best] / g);
			p->count[best] = -1;
		}
	}
	vkDestroyQueryPool(ctx->dev, p->pool, NULL);
	free(p);
	ctx->prof = NULL;
}
