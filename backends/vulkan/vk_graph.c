/* vk_graph.c — one forward step = one command buffer: every node is checked
 * first (indices, types, bounds), then logged as dispatches with a pipeline
 * barrier only where one touches memory an earlier dispatch since the last
 * barrier wrote (or writes what one read); vk_rec.c records the log (or
 * submits the previous recording again when the log, or the whole graph, is
 * the same); vk_launch.c submits it with the step's writes and reads.
 * Shaders report bad indices into the status buffer, read back with the
 * step, so bad input fails the call instead of faulting the GPU. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

static const vk_op_fn op_fns[ALICE_OP_COUNT_V1_6] = {
	[ALICE_OP_GET_ROWS] = vk_op_get_rows, [ALICE_OP_MUL_MAT] = vk_op_mul_mat, [ALICE_OP_ADD] = vk_op_ew,
	[ALICE_OP_MUL] = vk_op_ew,	      [ALICE_OP_SCALE] = vk_op_ew,	  [ALICE_OP_RMS_NORM] = vk_op_norm,
	[ALICE_OP_L2_NORM] = vk_op_norm,      [ALICE_OP_ROPE] = vk_op_rope,	  [ALICE_OP_ATTENTION] = vk_op_attention,
	[ALICE_OP_KV_WRITE] = vk_op_kv_write, [ALICE_OP_GLU] = vk_op_ew,	  [ALICE_OP_UNARY] = vk_op_ew,
	[ALICE_OP_SOFTCAP] = vk_op_ew,	      [ALICE_OP_COPY] = vk_op_ew,
	[ALICE_OP_SSM_CONV] = vk_op_ssm_conv, [ALICE_OP_GATED_DELTA_NET] = vk_op_gated_delta_net,
	[ALICE_OP_TOPK] = vk_op_topk,	      [ALICE_OP_TOKEN_MASK] = vk_op_token_mask,
	[ALICE_OP_FEED] = vk_op_feed,	      [ALICE_OP_LOGIT_ADJUST] = vk_op_logit_adjust,
	[ALICE_OP_SAMPLE_TEMP] = vk_op_sample_temp, [ALICE_OP_LOGSUMEXP] = vk_op_logsumexp,
};

/* The largest ne / nb per dim: shaders index with 32-bit element counts. */
static const struct alice_bc_limits vk_limits = {(int64_t)1 << 32, (int64_t)1 << 40};

static enum alice_status check_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, int idx)
{
	enum alice_status st =
		alice_bc_check_tensor(t, idx, &vk_limits, t->buf ? t->buf->size : 0, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	/* shaders address F32/I32 by word and 16-bit types by half-word */
	const struct alice_type_info *ti = alice_type_info(t->type);
	uint32_t al = ti->block_size > 1 ? 1 : (ti->type_size >= 4 ? 4 : ti->type_size);
	for (int d = 0; d < ALICE_MAX_DIMS && al > 1; d++)
		if (t->nb[d] % al)
			return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "tensor %d: stride %lld of dim %d is not a multiple of %u",
				       idx, (long long)t->nb[d], d, al);
	if (t->offset % al)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "tensor %d: offset %llu is not a multiple of %u", idx,
			       (unsigned long long)t->offset, al);
	return ALICE_OK;
}

enum alice_status vk_bind_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, struct vk_bind *b)
{
	uint64_t start = t->buf->base + t->offset, ext = alice_bc_extent(t);
	uint64_t align = ctx->props.limits.minStorageBufferOffsetAlignment;
	if (align == 0)
		align = 1;
	uint64_t aoff = start / align * align;
	uint64_t range = (start - aoff + ext + 3) & ~(uint64_t)3;
	if (range > t->buf->vk_size - aoff)
		range = t->buf->vk_size - aoff;
	if (range > ctx->max_range)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED,
			       "a tensor of %llu bytes exceeds this device's maxStorageBufferRange (%llu)",
			       (unsigned long long)ext, (unsigned long long)ctx->max_range);
	b->buf = t->buf->buf;
	b->off = aoff;
	b->range = range;
	b->rel = (uint32_t)(start - aoff);
	return ALICE_OK;
}

enum alice_status vk_bind_raw(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t off,
			      uint64_t size, struct vk_bind *b)
{
	struct alice_tensor t = {.type = ALICE_TYPE_I8, .ne = {(int64_t)size, 1, 1, 1}, .nb = {1, (int64_t)size,
		(int64_t)size, (int64_t)size}, .buf = buf, .offset = off};
	return vk_bind_tensor(ctx, &t, b);
}

/* A node writes dst (and, for the recurrent ops, its state source): forget
 * rounded activations taken from memory it overwrites. */
void vk_actq_invalidate(struct alice_backend_ctx *ctx, const struct alice_op_args *a)
{
	const struct alice_tensor *w[2] = {a->dst, NULL};
	if (a->node->op == ALICE_OP_SSM_CONV)
		w[1] = a->src[2];
	else if (a->node->op == ALICE_OP_GATED_DELTA_NET)
		w[1] = a->src[4];
	for (int k = 0; k < 2; k++) {
		if (!w[k])
			continue;
		uint64_t lo = w[k]->offset, hi = lo + alice_bc_extent(w[k]);
		for (int i = 0; i < VK_SCRATCH_RING; i++) {
			const struct alice_tensor *x = &ctx->actq[i].x;
			if (ctx->actq[i].valid && x->buf == w[k]->buf && x->offset < hi && lo < x->offset + alice_bc_extent(x))
				ctx->actq[i].valid = false;
		}
	}
}

/* Scratch for this graph's MUL_MATs: VK_SCRATCH_RING regions of the largest need. */
static enum alice_status ensure_scratch(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	uint64_t need = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		uint64_t n = vk_mm_scratch_need(g, &g->nodes[i]), t = vk_sample_scratch_need(g, &g->nodes[i]);
		n = t > n ? t : n;
		if (n > need)
			need = n;
	}
	need = (need + 255) & ~(uint64_t)255;
	if (need == 0 || (ctx->scratch && ctx->scratch_region >= need))
		return ALICE_OK;
	vk_buffer_free(ctx, ctx->scratch); /* (waits for launches in flight) */
	ctx->scratch = NULL;
	ctx->scratch_region = 0;
	enum alice_status st = vk_buffer_alloc(ctx, need * VK_SCRATCH_RING, ALICE_BUFFER_COMPUTE, &ctx->scratch);
	if (st == ALICE_OK)
		ctx->scratch_region = need;
	return st;
}

/* ---- node checks ---- */

static enum alice_status node_args(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				   const struct alice_node *n, struct alice_op_args *a)
{
	return alice_bc_node_args(ctx, g, n, "vulkan", n->op < ALICE_OP_COUNT_V1_6 && op_fns[n->op], a, ctx->err,
				  sizeof(ctx->err));
}

/* Shapes outside what the shaders handle (the ops check the rest). */
static bool shapes_ok(const struct alice_op_args *a)
{
	const struct alice_tensor *const *s = a->src;
	switch (a->node->op) {
	case ALICE_OP_ATTENTION:
		/* the shader keeps q in shared memory (d_k <= 512) and 4 output dims per thread (d_v <= 512) */
		return s[0]->ne[0] <= 512 && s[2]->ne[0] <= 512 && s[0]->nb[0] == 4;
	default:
		return true;
	}
}

/* Everything but shapes that only the op itself knows. */
enum alice_status vk_check_node(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				const struct alice_node *n, struct alice_op_args *a)
{
	enum alice_status st = node_args(ctx, g, n, a);
	if (st != ALICE_OK)
		return st;
	st = alice_bc_check_node(ctx, check_tensor, n, a->dst, a->src, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	if (!shapes_ok(a))
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "shapes outside what the vulkan shaders handle");
	return ALICE_OK;
}

bool vk_supports_op(struct alice_backend_ctx *ctx, const struct alice_graph *g, const struct alice_node *node)
{
	struct alice_backend_ctx dummy;
	struct alice_op_args a;
	if (!ctx) {
		memset(&dummy, 0, sizeof(dummy));
		ctx = &dummy;
	}
	if (!g || !node || node_args(ctx, g, node, &a) != ALICE_OK)
		return false;
	/* their block sums are doubles */
	if ((node->op == ALICE_OP_SAMPLE_TEMP || node->op == ALICE_OP_LOGSUMEXP) && !ctx->f64)
		return false;
	return alice_bc_types_ok(node, a.dst, a.src) && shapes_ok(&a);
}
/* ---- recording: hazards and dispatches ---- */


/* the next dispatch waits for the ones before it */
static void barrier(struct alice_backend_ctx *ctx)
{
	ctx->bar_next = true;
	ctx->npend = 0;
}

/* Does binding b (slot 0 = written) conflict with a dispatch since the last barrier? */
static bool hazard(const struct alice_backend_ctx *ctx, const struct vk_bind *b, bool write)
{
	for (int i = 0; i < ctx->npend; i++) {
		const struct vk_pending *p = &ctx->pend[i];
		if (p->buf != b->buf || (!write && !p->write))
			continue;
		if (b->off < p->hi && p->lo < b->off + b->range)
			return true;
	}
	return false;
}

enum alice_status vk_dispatch_rw(struct alice_backend_ctx *ctx, const char *shader, const struct vk_bind *binds,
				 int n_binds, uint32_t extra_writes, const void *push, uint32_t push_bytes,
				 uint32_t groups)
{
	VkPipeline pipe = vk_pipe_get(ctx, shader);
	if (!pipe)
		return ALICE_ERR_UNSUPPORTED;
	if (groups == 0)
		return ALICE_OK;
	bool need = ctx->npend + n_binds > VK_MAX_PENDING;
	for (int i = 0; i < n_binds && !need; i++)
		if (binds[i].buf)
			need = hazard(ctx, &binds[i], i == 0 || (extra_writes >> i & 1));
	if (need)
		barrier(ctx);
	if (push_bytes > VK_PUSH_BYTES)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "%s: %u bytes of push constants", shader, push_bytes);
	struct vk_rec r;
	memset(&r, 0, sizeof(r));
	r.pipe = pipe;
	r.barrier = ctx->bar_next;
	snprintf(r.name, sizeof(r.name), "%s", shader);
	for (int i = 0; i < VK_NBIND; i++) {
		if (i < n_binds && binds[i].buf)
			r.bi[i] = (VkDescriptorBufferInfo){binds[i].buf, binds[i].off, binds[i].range};
		else if (i == VK_SLOT_STATUS)
			r.bi[i] = (VkDescriptorBufferInfo){ctx->status->buf, 0, VK_WHOLE_SIZE};
		else
			r.bi[i] = (VkDescriptorBufferInfo){ctx->dummy->buf, 0, VK_WHOLE_SIZE};
	}
	r.push_bytes = push_bytes;
	memcpy(r.push, push, push_bytes);
	r.gx = groups < 65535 ? groups : 65535;
	r.gy = (groups + r.gx - 1) / r.gx;
	enum alice_status st = vk_rec_add(ctx, &r);
	if (st != ALICE_OK)
		return st;
	ctx->bar_next = false;
	for (int i = 0; i < n_binds; i++)
		if (binds[i].buf)
			ctx->pend[ctx->npend++] = (struct vk_pending){binds[i].buf, binds[i].off, binds[i].off + binds[i].range,
							     i == 0 || (extra_writes >> i & 1)};
	ctx->n_dispatch++;
	return ALICE_OK;
}

/* Log the graph's dispatches and record them (or find gcmd holding them). */
static enum alice_status prepare(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	struct alice_op_args a;
	enum alice_status st;
	if (vk_rec_same_graph(ctx, g)) { /* a decode step like the last: submit it again */
		ctx->n_replayed++;
		return ALICE_OK;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		st = vk_check_node(ctx, g, &g->nodes[i], &a);
		if (st != ALICE_OK) {
			alice_bc_prefix_node(ctx->err, sizeof(ctx->err), i, g->nodes[i].op);
			return st;
		}
	}
	if ((st = ensure_scratch(ctx, g)) != ALICE_OK)
		return st;
	if ((st = vk_mm_read_regimes(ctx, g)) != ALICE_OK)
		return st;
	ctx->npend = 0;
	ctx->n_dispatch = 0;
	ctx->log_n = 0;
	ctx->bar_next = false;
	ctx->scratch_next = 0; /* the same regions every step: the log can repeat */
	for (int i = 0; i < VK_SCRATCH_RING; i++)
		ctx->actq[i].valid = false;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		vk_check_node(ctx, g, &g->nodes[i], &a);
		uint32_t used = 0;
		st = ctx->fuse ? vk_fuse(ctx, g, i, &a, &used) : ALICE_OK;
		if (st == ALICE_OK && used == 0) {
			st = op_fns[g->nodes[i].op](&a);
			vk_actq_invalidate(ctx, &a);
		}
		if (used > 1)
			i += used - 1;
		if (st != ALICE_OK) {
			ctx->log_n = 0;
			alice_bc_prefix_node(ctx->err, sizeof(ctx->err), i, g->nodes[i].op);
			return st;
		}
	}
	if ((st = vk_rec_prepare(ctx)) != ALICE_OK)
		return st;
	vk_rec_keep_graph(ctx, g, ctx->n_regimes == 0);
	return ALICE_OK;
}

enum alice_status vk_graph_launch(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				  const struct alice_read *reads, uint32_t n_reads)
{
	if (!ctx)
		return ALICE_ERR_INVALID;
	if (ctx->lost)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "the Vulkan device was lost; this context is unusable");
	if (ctx->lq_n >= 2)
		return vk_fail(ctx, ALICE_ERR_INVALID, "graph_launch: two launches are in flight: wait for one first");
	if (!g || (g->n_nodes && !g->nodes) || (g->n_tensors && !g->tensors) || (n_reads && !reads))
		return vk_fail(ctx, ALICE_ERR_INVALID, "graph_launch: malformed graph");
	for (uint32_t i = 0; i < n_reads; i++) {
		const struct alice_read *r = &reads[i];
		if (r->size == 0)
			continue;
		if (!r->dst)
			return vk_fail(ctx, ALICE_ERR_INVALID, "graph_launch: read %u has no destination", i);
		enum alice_status st = alice_bc_check_range(r->buf != NULL, r->buf ? r->buf->size : 0, r->offset, r->size,
							    "graph_launch: a read", ctx->err, sizeof(ctx->err));
		if (st != ALICE_OK)
			return st;
	}
	ctx->err[0] = '\0';
	vk_prof_start(ctx);
	enum alice_status st = g->n_nodes ? prepare(ctx, g) : ALICE_OK;
	/* the profile's timestamps belong to one step at a time */
	if (st == ALICE_OK && ctx->prof)
		st = vk_launch_settle(ctx);
	return st != ALICE_OK ? st : vk_launch_submit(ctx, g->n_nodes > 0, reads, n_reads);
}

enum alice_status vk_graph_compute(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	enum alice_status st = vk_graph_launch(ctx, g, NULL, 0);
	return st != ALICE_OK ? st : vk_graph_wait(ctx);
}
