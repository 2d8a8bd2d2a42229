/* vk_launch.c — a step as one submission (graph_launch / graph_wait): the
 * small input writes made since the last step (gathered here instead of a
 * staged round trip each), the graph's command buffer, then its results
 * copied back; graph_compute is a launch and its wait. A decode step that
 * made ~10 round trips (each input, the graph, the logits) makes one. Two
 * launches may be in flight (the engine's pipeline): each slot has its own
 * completion (vk_sync.c), head and tail command buffers, gathered-write area
 * and read-back area, and every head begins with a full barrier, so a step
 * runs after the one before it in memory order too. Anything else that
 * touches device memory (a staged write, a read, a clear, a free) first
 * waits for the launches in flight and flushes the gathered writes. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* reads copied back per launch (beyond, a staged read at the wait);
 * ALICE_VK_READBACK_MAX (bytes) lowers it for tests */
#define VK_RB_MAX (64u << 20)

static void full_barrier(VkCommandBuffer cmd)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
			     NULL, 0, NULL);
}

static bool gather_on(void)
{
	static int on = -1;
	if (on < 0) {
		const char *e = getenv("ALICE_VK_GATHER");
		on = !(e && e[0] == '0');
	}
	return on != 0;
}

static struct vk_launch *slot_next(struct alice_backend_ctx *ctx)
{
	return &ctx->lq[(ctx->lq_old + ctx->lq_n) & 1];
}

/* The slot's gathered writes as copies, after a full barrier. */
static void record_gathered(VkCommandBuffer cmd, const struct vk_launch *l)
{
	full_barrier(cmd);
	for (uint32_t i = 0; i < l->n_g; i++) {
		const struct vk_gathered *g = &l->g[i];
		if (g->after_overlap)
			full_barrier(cmd);
		VkBufferCopy reg = {.srcOffset = g->src, .dstOffset = g->dst->base + g->off, .size = g->size};
		vkCmdCopyBuffer(cmd, l->up->buf, g->dst->buf, 1, &reg);
	}
}

/* The gathered writes of the next slot, submitted alone and waited for. */
static enum alice_status flush_gathered(struct alice_backend_ctx *ctx)
{
	struct vk_launch *l = slot_next(ctx);
	if (l->n_g == 0)
		return ALICE_OK;
	enum alice_status st = vk_cmd_begin(ctx);
	if (st != ALICE_OK)
		return st;
	record_gathered(ctx->cmd, l);
	st = vk_cmd_submit_wait(ctx);
	l->n_g = 0;
	l->up_used = 0;
	return st;
}

/* A step's completion: polled for a while first on a GPU, not on a CPU
 * device, whose threads need the cores. */
static enum alice_status step_wait(struct alice_backend_ctx *ctx, struct vk_launch *l)
{
	return vk_sync_wait(ctx, &l->sync, ctx->spin_us);
}

/* A launch's reads too large for its read-back area: staged now (the
 * launch has finished and no later one has been submitted). */
static enum alice_status staged_reads(struct alice_backend_ctx *ctx, struct vk_launch *l)
{
	enum alice_status st = ALICE_OK;
	for (uint32_t i = 0; i < l->n_late && st == ALICE_OK; i++)
		if (l->late[i].staged) {
			st = vk_buffer_read_now(ctx, l->late[i].src, l->late[i].off, l->late[i].dst, l->late[i].size);
		}
	l->has_staged = false;
	return st;
}

enum alice_status vk_launch_settle(struct alice_backend_ctx *ctx)
{
	for (int i = 0; i < ctx->lq_n; i++) {
		struct vk_launch *l = &ctx->lq[(ctx->lq_old + i) & 1];
		if (l->done)
			continue;
		enum alice_status st = step_wait(ctx, l);
		if (st != ALICE_OK)
			return st;
		l->done = true;
		if (l->has_staged && (st = staged_reads(ctx, l)) != ALICE_OK)
			l->st = st; /* reported by its graph_wait */
	}
	return ALICE_OK;
}

enum alice_status vk_launch_quiesce(struct alice_backend_ctx *ctx)
{
	enum alice_status st = vk_launch_settle(ctx);
	return st != ALICE_OK ? st : flush_gathered(ctx);
}

void vk_launch_drop(struct alice_backend_ctx *ctx, const struct alice_buffer *buf)
{
	struct vk_launch *l = slot_next(ctx);
	uint32_t k = 0;
	for (uint32_t i = 0; i < l->n_g; i++)
		if (l->g[i].dst != buf)
			l->g[k++] = l->g[i];
	l->n_g = k;
}

bool vk_launch_gather(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t off, const void *src,
		      uint64_t size)
{
	if (!gather_on() || size > VK_GATHER_MAX)
		return false;
	/* mapped memory is written in place unless a step in flight may read
	 * it, or an earlier gathered write would land after this one */
	struct vk_launch *l = slot_next(ctx);
	if (buf->map && ctx->lq_n == 0 && l->n_g == 0)
		return false;
	if (l->n_g == VK_GATHER_REGIONS || l->up_used + size > VK_GATHER_BYTES)
		return false;
	if (!l->up) {
		if (vk_buffer_host(ctx, VK_GATHER_BYTES, &l->up) != ALICE_OK) {
			ctx->err[0] = '\0'; /* the write goes its own way instead */
			return false;
		}
	}
	/* the slot's area may still feed a launch in flight (two were) */
	if (l->n_g == 0 && ctx->lq_n == 2 && !l->done) {
		if (step_wait(ctx, l) != ALICE_OK)
			return false;
		l->done = true;
		if (l->has_staged && (l->st = staged_reads(ctx, l)) != ALICE_OK)
			return false;
	}
	bool overlap = false;
	for (uint32_t i = 0; i < l->n_g && !overlap; i++)
		overlap = l->g[i].dst == buf && l->g[i].off < off + size && off < l->g[i].off + l->g[i].size;
	uint64_t at = l->up_used;
	memcpy(l->up->map + at, src, (size_t)size);
	l->g[l->n_g++] = (struct vk_gathered){buf, off, size, at, overlap};
	l->up_used = (at + size + 15) & ~(uint64_t)15;
	if (!l->up->coherent) {
		VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = l->up->mem,
					  .size = VK_WHOLE_SIZE};
		vkFlushMappedMemoryRanges(ctx->dev, 1, &mr);
	}
	return true;
}

bool vk_launch_lookup(struct alice_backend_ctx *ctx, const struct alice_buffer *buf, uint64_t off, void *dst,
		      uint64_t size)
{
	const struct vk_launch *l = slot_next(ctx);
	for (uint32_t i = l->n_g; i-- > 0;) { /* the latest write of the range */
		const struct vk_gathered *g = &l->g[i];
		if (g->dst != buf || !(g->off < off + size && off < g->off + g->size))
			continue;
		if (g->off > off || g->off + g->size < off + size)
			return false; /* partly covered: the device has the rest */
		memcpy(dst, l->up->map + g->src + (off - g->off), (size_t)size);
		return true;
	}
	return false;
}

/* ---- host memory the reads fill directly ---- */

void *vk_host_alloc(struct alice_backend_ctx *ctx, uint64_t size)
{
	if (!ctx || size == 0 || (ctx->unified && !ctx->force_staging))
		return NULL;
	if (ctx->n_ha == ctx->ha_cap) {
		int cap = ctx->ha_cap ? 2 * ctx->ha_cap : 8;
		struct alice_buffer **n = realloc(ctx->ha, (size_t)cap * sizeof(*n));
		if (!n)
			return NULL;
		ctx->ha = n;
		ctx->ha_cap = cap;
	}
	struct alice_buffer *b;
	/* the core reads the logits there: cached host memory only */
	if (vk_buffer_host(ctx, size, &b) != ALICE_OK || !b->map || !b->coherent || !b->cached) {
		if (b)
			vk_buffer_free(ctx, b);
		ctx->err[0] = '\0';
		return NULL;
	}
	ctx->ha[ctx->n_ha++] = b;
	return b->map;
}

void vk_host_free(struct alice_backend_ctx *ctx, void *p)
{
	if (!ctx || !p)
		return;
	for (int i = 0; i < ctx->n_ha; i++)
		if (ctx->ha[i]->map == p) {
			vk_launch_settle(ctx);
			vk_buffer_free(ctx, ctx->ha[i]);
			ctx->ha[i] = ctx->ha[--ctx->n_ha];
			return;
		}
}

/* The host_alloc buffer holding [p, p + size), or NULL. */
static struct alice_buffer *host_buf_of(const struct alice_backend_ctx *ctx, const void *p, uint64_t size)
{
	const uint8_t *q = p;
	for (int i = 0; i < ctx->n_ha; i++) {
		struct alice_buffer *b = ctx->ha[i];
		if (q >= b->map && q + size <= b->map + b->size)
			return b;
	}
	return NULL;
}

/* ---- launch and wait ---- */

static enum alice_status slot_init(struct alice_backend_ctx *ctx, struct vk_launch *l)
{
	if (l->hcmd)
		return ALICE_OK;
	VkCommandBuffer cb[2];
	VkCommandBufferAllocateInfo cai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = ctx->cmdpool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 2,
	};
	enum alice_status st = vk_check(ctx, vkAllocateCommandBuffers(ctx->dev, &cai, cb), "vkAllocateCommandBuffers");
	if (st != ALICE_OK)
		return st;
	if ((st = vk_sync_init(ctx, &l->sync)) != ALICE_OK) {
		vkFreeCommandBuffers(ctx->dev, ctx->cmdpool, 2, cb);
		return st;
	}
	l->hcmd = cb[0];
	l->tcmd = cb[1];
	/* ALICE_VK_SPIN=N: poll N us on any device (0: block at once; tests poll on lavapipe) */
	const char *sp = getenv("ALICE_VK_SPIN");
	ctx->spin_us = sp && *sp ? atoi(sp) : ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : 5000;
	const char *e = getenv("ALICE_VK_READBACK_MAX");
	ctx->rb_max = e && atoll(e) > 0 && atoll(e) < VK_RB_MAX ? (uint64_t)atoll(e) : VK_RB_MAX;
	return ALICE_OK;
}

static enum alice_status add_late(struct alice_backend_ctx *ctx, struct vk_launch *l, struct vk_late v)
{
	if (l->n_late == l->late_cap) {
		uint32_t cap = l->late_cap ? 2 * l->late_cap : 16;
		struct vk_late *n = realloc(l->late, cap * sizeof(*n));
		if (!n)
			return vk_fail(ctx, ALICE_ERR_NOMEM, "graph_launch: out of memory");
		l->late = n;
		l->late_cap = cap;
	}
	l->late[l->n_late++] = v;
	return ALICE_OK;
}

/* A slot's head or tail begins (it is submitted again while unchanged) after everything before it. */
static enum alice_status begin_after_all(struct alice_backend_ctx *ctx, VkCommandBuffer cmd)
{
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	enum alice_status st = vk_check(ctx, vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
	if (st == ALICE_OK)
		full_barrier(cmd);
	return st;
}

static bool same_reads(const struct vk_launch *l, const struct alice_read *reads, uint32_t n)
{
	if (!l->t_ok || l->t_n != n)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (l->t_reads[i].buf != reads[i].buf || l->t_reads[i].offset != reads[i].offset ||
		    l->t_reads[i].size != reads[i].size || l->t_reads[i].dst != reads[i].dst)
			return false;
	return true;
}

/* The tail: the status words and the reads, copied back behind the graph
 * (recorded again only when the reads change: decode steps repeat them). */
static enum alice_status record_tail(struct alice_backend_ctx *ctx, struct vk_launch *l, const struct alice_read *reads,
				     uint32_t n_reads)
{
	if (same_reads(l, reads, n_reads)) {
		l->has_staged = l->t_staged;
		return ALICE_OK;
	}
	l->t_ok = false;
	if (n_reads > l->t_cap) {
		struct alice_read *n = realloc(l->t_reads, n_reads * sizeof(*n));
		if (!n)
			return vk_fail(ctx, ALICE_ERR_NOMEM, "graph_launch: out of memory");
		l->t_reads = n;
		l->t_cap = n_reads;
	}
	uint64_t need = 16;
	for (uint32_t i = 0; i < n_reads; i++)
		if (reads[i].size && !host_buf_of(ctx, reads[i].dst, reads[i].size) && need + reads[i].size <= ctx->rb_max)
			need = (need + reads[i].size + 15) & ~(uint64_t)15;
	if (!l->rb || l->rb->size < need) {
		vk_buffer_free(ctx, l->rb);
		l->rb = NULL;
		uint64_t cap = need < (1u << 20) ? (1u << 20) : need;
		enum alice_status st = vk_buffer_host(ctx, cap, &l->rb);
		if (st != ALICE_OK)
			return st;
	}
	VkCommandBuffer cmd = l->tcmd;
	enum alice_status st = begin_after_all(ctx, cmd);
	if (st != ALICE_OK)
		return st;
	VkBufferCopy sreg = {.srcOffset = 0, .dstOffset = 0, .size = 16};
	vkCmdCopyBuffer(cmd, ctx->status->buf, l->rb->buf, 1, &sreg);
	uint64_t at = 16;
	l->n_late = 0;
	l->has_staged = false;
	for (uint32_t i = 0; i < n_reads && st == ALICE_OK; i++) {
		const struct alice_read *r = &reads[i];
		if (r->size == 0)
			continue;
		struct alice_buffer *hb = host_buf_of(ctx, r->dst, r->size);
		VkBufferCopy reg = {.srcOffset = r->buf->base + r->offset, .size = r->size};
		if (hb) { /* straight into the caller's host_alloc memory */
			reg.dstOffset = (uint64_t)((const uint8_t *)r->dst - hb->map);
			vkCmdCopyBuffer(cmd, r->buf->buf, hb->buf, 1, &reg);
			continue;
		}
		bool fits = at + r->size <= ctx->rb_max && at + r->size <= l->rb->size;
		if (fits) {
			reg.dstOffset = at;
			vkCmdCopyBuffer(cmd, r->buf->buf, l->rb->buf, 1, &reg);
		}
		st = add_late(ctx, l, (struct vk_late){r->dst, r->buf, r->offset, r->size, at, !fits});
		if (fits)
			at = (at + r->size + 15) & ~(uint64_t)15;
		else
			l->has_staged = true;
	}
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	enum alice_status e = vk_check(ctx, vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
	if (st != ALICE_OK || e != ALICE_OK)
		return st != ALICE_OK ? st : e;
	if (n_reads)
		memcpy(l->t_reads, reads, n_reads * sizeof(*reads));
	l->t_n = n_reads;
	l->t_staged = l->has_staged;
	l->t_ok = true;
	return ALICE_OK;
}

static bool same_gathered(const struct vk_launch *l)
{
	if (!l->h_ok || l->h_n != l->n_g)
		return false;
	for (uint32_t i = 0; i < l->n_g; i++) {
		const struct vk_gathered *a = &l->g[i], *b = &l->h_g[i];
		if (a->dst != b->dst || a->off != b->off || a->size != b->size || a->src != b->src ||
		    a->after_overlap != b->after_overlap)
			return false;
	}
	return true;
}

/* The head: a full barrier, the status words cleared, the gathered writes
 * (recorded again only when their places change). */
static enum alice_status record_head(struct alice_backend_ctx *ctx, struct vk_launch *l)
{
	if (same_gathered(l))
		return ALICE_OK;
	l->h_ok = false;
	VkCommandBuffer cmd = l->hcmd;
	enum alice_status st = begin_after_all(ctx, cmd);
	if (st != ALICE_OK)
		return st;
	vkCmdFillBuffer(cmd, ctx->status->buf, 0, 16, 0);
	if (l->n_g)
		record_gathered(cmd, l);
	/* gcmd's first barrier makes these writes visible to its shaders */
	full_barrier(cmd);
	if ((st = vk_check(ctx, vkEndCommandBuffer(cmd), "vkEndCommandBuffer")) != ALICE_OK)
		return st;
	memcpy(l->h_g, l->g, l->n_g * sizeof(l->g[0]));
	l->h_n = l->n_g;
	l->h_ok = true;
	return ALICE_OK;
}

void vk_launch_forget(struct alice_backend_ctx *ctx)
{
	for (int s = 0; s < 2; s++)
		ctx->lq[s].h_ok = ctx->lq[s].t_ok = false;
}

enum alice_status vk_launch_submit(struct alice_backend_ctx *ctx, bool graph, const struct alice_read *reads,
				   uint32_t n_reads)
{
	struct vk_launch *l = slot_next(ctx);
	enum alice_status st = slot_init(ctx, l);
	if (st != ALICE_OK)
		return st;
	/* a launch in flight whose reads are staged at its wait: made now,
	 * before this one can overwrite their sources */
	for (int i = 0; i < ctx->lq_n; i++) {
		struct vk_launch *o = &ctx->lq[(ctx->lq_old + i) & 1];
		if (!o->has_staged)
			continue;
		if (!o->done && (st = step_wait(ctx, o)) != ALICE_OK)
			return st;
		o->done = true;
		o->st = staged_reads(ctx, o);
	}
	if ((st = record_head(ctx, l)) != ALICE_OK || (st = record_tail(ctx, l, reads, n_reads)) != ALICE_OK)
		return st;
	VkCommandBuffer cbs[3];
	uint32_t n = 0;
	cbs[n++] = l->hcmd;
	if (graph)
		cbs[n++] = ctx->gcmd;
	cbs[n++] = l->tcmd;
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = n, .pCommandBuffers = cbs};
	vk_prof_submit(ctx);
	st = vk_sync_submit(ctx, &si, &l->sync);
	l->n_g = 0;
	l->up_used = 0;
	if (st != ALICE_OK) {
		vk_rec_forget(ctx);
		return st;
	}
	l->done = false;
	l->st = ALICE_OK;
	l->graph = graph;
	ctx->lq_n++;
	return ALICE_OK;
}

enum alice_status vk_graph_wait(struct alice_backend_ctx *ctx)
{
	if (!ctx)
		return ALICE_ERR_INVALID;
	if (ctx->lq_n <= 0)
		return vk_fail(ctx, ALICE_ERR_INVALID, "graph_wait: no graph was launched");
	struct vk_launch *l = &ctx->lq[ctx->lq_old];
	enum alice_status st = l->done ? ALICE_OK : step_wait(ctx, l);
	ctx->lq_old = (ctx->lq_old + 1) & 1;
	ctx->lq_n--;
	if (st != ALICE_OK) {
		vk_rec_forget(ctx);
		return st;
	}
	if (l->graph)
		vk_prof_end(ctx);
	if (l->has_staged)
		l->st = staged_reads(ctx, l);
	if (l->st != ALICE_OK)
		return l->st;
	if (!l->rb->coherent) {
		VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = l->rb->mem,
					  .size = VK_WHOLE_SIZE};
		vkInvalidateMappedMemoryRanges(ctx->dev, 1, &mr);
	}
	uint32_t code, detail;
	memcpy(&code, l->rb->map, 4);
	memcpy(&detail, l->rb->map + 4, 4);
	if (code)
		return vk_fail(ctx, ALICE_ERR_RANGE,
			       "an index read by GET_ROWS, KV_WRITE, ATTENTION or FEED is out of range (value %d)",
			       (int32_t)detail);
	for (uint32_t i = 0; i < l->n_late; i++)
		if (!l->late[i].staged && l->late[i].size)
			memcpy(l->late[i].dst, l->rb->map + l->late[i].rb_off, (size_t)l->late[i].size);
	return ALICE_OK;
}

void vk_launch_free(struct alice_backend_ctx *ctx)
{
	ctx->lq_n = 0; /* the device is idle */
	for (int s = 0; s < 2; s++) {
		struct vk_launch *l = &ctx->lq[s];
		vk_buffer_free(ctx, l->up);
		vk_buffer_free(ctx, l->rb);
		free(l->late);
		free(l->t_reads);
		vk_sync_free(ctx, &l->sync);
		memset(l, 0, sizeof(*l));
	}
	for (int i = 0; i < ctx->n_ha; i++)
		vk_buffer_free(ctx, ctx->ha[i]);
	free(ctx->ha);
	ctx->ha = NULL;
	ctx->n_ha = ctx->ha_cap = 0;
}
