/* vk_graph.c — one forward step = one command buffer: every node is checked
 * first (indices, types, bounds), then recorded as a dispatch with a
 * pipeline barrier only where it touches memory an earlier dispatch since
 * the last barrier wrote (or writes what one read); one submit, one fence
 * wait. Shaders report bad indices into the status buffer, read back after
 * the fence, so bad input fails the call instead of faulting the GPU. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

static const char *const op_names[ALICE_OP_COUNT_V1_1] = {
	[ALICE_OP_NONE] = "NONE",	   [ALICE_OP_GET_ROWS] = "GET_ROWS", [ALICE_OP_MUL_MAT] = "MUL_MAT",
	[ALICE_OP_ADD] = "ADD",		   [ALICE_OP_MUL] = "MUL",	     [ALICE_OP_SCALE] = "SCALE",
	[ALICE_OP_RMS_NORM] = "RMS_NORM", [ALICE_OP_L2_NORM] = "L2_NORM", [ALICE_OP_ROPE] = "ROPE",
	[ALICE_OP_ATTENTION] = "ATTENTION", [ALICE_OP_KV_WRITE] = "KV_WRITE", [ALICE_OP_GLU] = "GLU",
	[ALICE_OP_UNARY] = "UNARY",	   [ALICE_OP_SOFTCAP] = "SOFTCAP",   [ALICE_OP_COPY] = "COPY",
	[ALICE_OP_SSM_CONV] = "SSM_CONV", [ALICE_OP_GATED_DELTA_NET] = "GATED_DELTA_NET",
};

static const vk_op_fn op_fns[ALICE_OP_COUNT_V1_1] = {
	[ALICE_OP_GET_ROWS] = vk_op_get_rows, [ALICE_OP_MUL_MAT] = vk_op_mul_mat, [ALICE_OP_ADD] = vk_op_ew,
	[ALICE_OP_MUL] = vk_op_ew,	      [ALICE_OP_SCALE] = vk_op_ew,	  [ALICE_OP_RMS_NORM] = vk_op_norm,
	[ALICE_OP_L2_NORM] = vk_op_norm,      [ALICE_OP_ROPE] = vk_op_rope,	  [ALICE_OP_ATTENTION] = vk_op_attention,
	[ALICE_OP_KV_WRITE] = vk_op_kv_write, [ALICE_OP_GLU] = vk_op_ew,	  [ALICE_OP_UNARY] = vk_op_ew,
	[ALICE_OP_SOFTCAP] = vk_op_ew,	      [ALICE_OP_COPY] = vk_op_ew,
	[ALICE_OP_SSM_CONV] = vk_op_ssm_conv, [ALICE_OP_GATED_DELTA_NET] = vk_op_gated_delta_net,
};

static const int8_t op_nsrc[ALICE_OP_COUNT_V1_1][2] = {
	[ALICE_OP_GET_ROWS] = {2, 2}, [ALICE_OP_MUL_MAT] = {2, 3}, [ALICE_OP_ADD] = {2, 2},
	[ALICE_OP_MUL] = {2, 2},      [ALICE_OP_SCALE] = {1, 1},   [ALICE_OP_RMS_NORM] = {1, 2},
	[ALICE_OP_L2_NORM] = {1, 1},  [ALICE_OP_ROPE] = {2, 3},    [ALICE_OP_ATTENTION] = {4, 4},
	[ALICE_OP_KV_WRITE] = {2, 2}, [ALICE_OP_GLU] = {2, 2},	   [ALICE_OP_UNARY] = {1, 1},
	[ALICE_OP_SOFTCAP] = {1, 1},  [ALICE_OP_COPY] = {1, 1},
	[ALICE_OP_SSM_CONV] = {4, 4}, [ALICE_OP_GATED_DELTA_NET] = {6, 6},
};

static const char *op_name(uint32_t op)
{
	return op < ALICE_OP_COUNT_V1_1 && op_names[op] ? op_names[op] : "unknown op";
}

bool vk_weight_type_ok(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_F32: case ALICE_TYPE_F16: case ALICE_TYPE_BF16:
	case ALICE_TYPE_Q4_0: case ALICE_TYPE_Q4_1: case ALICE_TYPE_Q5_0: case ALICE_TYPE_Q5_1:
	case ALICE_TYPE_Q8_0: case ALICE_TYPE_Q2_K: case ALICE_TYPE_Q3_K: case ALICE_TYPE_Q4_K:
	case ALICE_TYPE_Q5_K: case ALICE_TYPE_Q6_K: case ALICE_TYPE_IQ4_NL: case ALICE_TYPE_IQ4_XS:
	case ALICE_TYPE_MXFP4: case ALICE_TYPE_Q1_0:
		return true;
	default:
		return false;
	}
}

static bool is_f32(const struct alice_tensor *t) { return t && t->type == ALICE_TYPE_F32; }
static bool is_i32(const struct alice_tensor *t) { return t && t->type == ALICE_TYPE_I32; }
static bool is_f16_32(uint32_t t) { return t == ALICE_TYPE_F16 || t == ALICE_TYPE_F32; }
static bool is_float_type(uint32_t t) { return is_f16_32(t) || t == ALICE_TYPE_BF16; }
static bool act_ok(int a) { return a >= ALICE_ACT_SILU && a <= ALICE_ACT_GELU_ERF; }

/* Bytes from the tensor's first byte to one past its last. */
static uint64_t tensor_extent(const struct alice_tensor *t)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	uint64_t e = 0;
	for (int d = 1; d < ALICE_MAX_DIMS; d++)
		e += (uint64_t)(t->ne[d] - 1) * (uint64_t)t->nb[d];
	if (ti->block_size > 1)
		return e + alice_row_size(t->type, t->ne[0]);
	return e + (uint64_t)(t->ne[0] - 1) * (uint64_t)t->nb[0] + ti->type_size;
}

static enum alice_status check_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, int idx)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	if (!ti || !ti->supported)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "tensor %d: type %s (%u) is not supported", idx,
			       alice_type_name(t->type), t->type);
	if (!t->buf)
		return vk_fail(ctx, ALICE_ERR_INVALID, "tensor %d has no buffer", idx);
	for (int d = 0; d < ALICE_MAX_DIMS; d++)
		if (t->ne[d] < 1 || t->ne[d] > ((int64_t)1 << 32) || t->nb[d] < 0 || t->nb[d] > ((int64_t)1 << 40))
			return vk_fail(ctx, ALICE_ERR_INVALID, "tensor %d: bad ne/nb in dim %d (%lld, %lld)", idx, d,
				       (long long)t->ne[d], (long long)t->nb[d]);
	if (ti->block_size > 1 && (t->ne[0] % ti->block_size != 0 || t->nb[0] != (int64_t)ti->type_size))
		return vk_fail(ctx, ALICE_ERR_INVALID,
			       "tensor %d: %s rows need ne[0] %% %u == 0 and nb[0] == %u (got %lld, %lld)", idx,
			       ti->name, ti->block_size, ti->type_size, (long long)t->ne[0], (long long)t->nb[0]);
	/* shaders address F32/I32 by word and 16-bit types by half-word */
	uint32_t al = ti->block_size > 1 ? 1 : (ti->type_size >= 4 ? 4 : ti->type_size);
	for (int d = 0; d < ALICE_MAX_DIMS && al > 1; d++)
		if (t->nb[d] % al)
			return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "tensor %d: stride %lld of dim %d is not a multiple of %u",
				       idx, (long long)t->nb[d], d, al);
	if (t->offset % al)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "tensor %d: offset %llu is not a multiple of %u", idx,
			       (unsigned long long)t->offset, al);
	uint64_t ext = tensor_extent(t);
	if (t->offset > t->buf->size || ext > t->buf->size - t->offset)
		return vk_fail(ctx, ALICE_ERR_RANGE, "tensor %d: [%llu, +%llu) is outside its buffer of %llu bytes", idx,
			       (unsigned long long)t->offset, (unsigned long long)ext,
			       (unsigned long long)t->buf->size);
	return ALICE_OK;
}

enum alice_status vk_bind_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, struct vk_bind *b)
{
	uint64_t start = t->buf->base + t->offset, ext = tensor_extent(t);
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
static void actq_invalidate(struct alice_backend_ctx *ctx, const struct vk_op_args *a)
{
	const struct alice_tensor *w[2] = {a->dst, NULL};
	if (a->node->op == ALICE_OP_SSM_CONV)
		w[1] = a->src[2];
	else if (a->node->op == ALICE_OP_GATED_DELTA_NET)
		w[1] = a->src[4];
	for (int k = 0; k < 2; k++) {
		if (!w[k])
			continue;
		uint64_t lo = w[k]->offset, hi = lo + tensor_extent(w[k]);
		for (int i = 0; i < VK_SCRATCH_RING; i++) {
			const struct alice_tensor *x = &ctx->actq[i].x;
			if (ctx->actq[i].valid && x->buf == w[k]->buf && x->offset < hi && lo < x->offset + tensor_extent(x))
				ctx->actq[i].valid = false;
		}
	}
}

/* Scratch for this graph's MUL_MATs: VK_SCRATCH_RING regions of the largest need. */
static enum alice_status ensure_scratch(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	uint64_t need = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		uint64_t n = vk_mm_scratch_need(g, &g->nodes[i]);
		if (n > need)
			need = n;
	}
	need = (need + 255) & ~(uint64_t)255;
	if (need == 0 || (ctx->scratch && ctx->scratch_region >= need))
		return ALICE_OK;
	vk_buffer_free(ctx, ctx->scratch);
	ctx->scratch = NULL;
	ctx->scratch_region = 0;
	enum alice_status st = vk_buffer_alloc(ctx, need * VK_SCRATCH_RING, ALICE_BUFFER_COMPUTE, &ctx->scratch);
	if (st == ALICE_OK)
		ctx->scratch_region = need;
	return st;
}

/* ---- node checks ---- */

static enum alice_status node_args(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				   const struct alice_node *n, struct vk_op_args *a)
{
	memset(a, 0, sizeof(*a));
	a->ctx = ctx;
	a->node = n;
	if (n->op == ALICE_OP_NONE || n->op >= ALICE_OP_COUNT_V1_1 || !op_fns[n->op])
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "op %u is not supported by the vulkan backend", n->op);
	if (n->dst < 0 || (uint32_t)n->dst >= g->n_tensors)
		return vk_fail(ctx, ALICE_ERR_INVALID, "dst tensor index %d out of range", n->dst);
	a->dst = &g->tensors[n->dst];
	int nsrc = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++) {
		if (n->src[i] < 0)
			continue;
		if ((uint32_t)n->src[i] >= g->n_tensors)
			return vk_fail(ctx, ALICE_ERR_INVALID, "src[%d] tensor index %d out of range", i, n->src[i]);
		a->src[i] = &g->tensors[n->src[i]];
		nsrc = i + 1;
	}
	for (int i = 0; i < op_nsrc[n->op][0]; i++)
		if (!a->src[i])
			return vk_fail(ctx, ALICE_ERR_INVALID, "src[%d] is required", i);
	if (nsrc > op_nsrc[n->op][1])
		return vk_fail(ctx, ALICE_ERR_INVALID, "too many sources (%d, at most %d)", nsrc, op_nsrc[n->op][1]);
	return ALICE_OK;
}

static bool types_ok(const struct alice_node *n, const struct alice_tensor *dst, const struct alice_tensor *const *s)
{
	switch (n->op) {
	case ALICE_OP_GET_ROWS:
		return vk_weight_type_ok(s[0]->type) && is_i32(s[1]) && is_f32(dst);
	case ALICE_OP_MUL_MAT:
		return vk_weight_type_ok(s[0]->type) && is_f32(s[1]) && is_f32(dst);
	case ALICE_OP_ADD:
	case ALICE_OP_MUL:
	case ALICE_OP_GLU:
		return is_f32(s[0]) && is_f32(s[1]) && is_f32(dst) && (n->op != ALICE_OP_GLU || act_ok(n->ip[0]));
	case ALICE_OP_UNARY:
		return is_f32(s[0]) && is_f32(dst) && act_ok(n->ip[0]);
	case ALICE_OP_SCALE:
	case ALICE_OP_L2_NORM:
	case ALICE_OP_SOFTCAP:
		return is_f32(s[0]) && is_f32(dst);
	case ALICE_OP_RMS_NORM:
		return is_f32(s[0]) && is_f32(dst) && (!s[1] || is_f32(s[1]));
	case ALICE_OP_ROPE:
		return is_f32(s[0]) && is_i32(s[1]) && is_f32(dst) && (!s[2] || is_f32(s[2])) &&
		       (n->ip[1] == ALICE_ROPE_NORMAL || n->ip[1] == ALICE_ROPE_NEOX || n->ip[1] == ALICE_ROPE_IMROPE);
	case ALICE_OP_ATTENTION:
		/* the shader keeps q in shared memory (d_k <= 512) and 4 output dims per thread (d_v <= 512) */
		return is_f32(s[0]) && is_f16_32(s[1]->type) && is_f16_32(s[2]->type) && is_i32(s[3]) &&
		       is_f32(dst) && s[0]->ne[0] <= 512 && s[2]->ne[0] <= 512 && s[0]->nb[0] == 4;
	case ALICE_OP_KV_WRITE:
		return is_f32(s[0]) && is_i32(s[1]) && is_f16_32(dst->type);
	case ALICE_OP_COPY:
		return is_float_type(s[0]->type) && is_float_type(dst->type);
	case ALICE_OP_SSM_CONV:
		return is_f32(s[0]) && is_f32(s[1]) && is_f32(s[2]) && is_i32(s[3]) && is_f32(dst);
	case ALICE_OP_GATED_DELTA_NET:
		return is_f32(s[0]) && is_f32(s[1]) && is_f32(s[2]) && is_f32(s[3]) && is_f32(s[4]) && is_i32(s[5]) &&
		       is_f32(dst);
	default:
		return false;
	}
}

/* Everything but shapes that only the op itself knows. */
static enum alice_status check_node(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				    const struct alice_node *n, struct vk_op_args *a)
{
	enum alice_status st = node_args(ctx, g, n, a);
	if (st != ALICE_OK)
		return st;
	st = check_tensor(ctx, a->dst, n->dst);
	for (int i = 0; i < ALICE_MAX_SRC && st == ALICE_OK; i++)
		if (a->src[i])
			st = check_tensor(ctx, a->src[i], n->src[i]);
	if (st != ALICE_OK)
		return st;
	if (!types_ok(n, a->dst, a->src)) {
		char types[160];
		int w = snprintf(types, sizeof(types), "dst %s", alice_type_name(a->dst->type));
		for (int i = 0; i < ALICE_MAX_SRC && w > 0 && (size_t)w < sizeof(types); i++)
			if (a->src[i])
				w += snprintf(types + w, sizeof(types) - (size_t)w, ", src%d %s", i,
					      alice_type_name(a->src[i]->type));
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "unsupported types or params (%s; ip[0]=%d ip[1]=%d)", types,
			       n->ip[0], n->ip[1]);
	}
	return ALICE_OK;
}

bool vk_supports_op(struct alice_backend_ctx *ctx, const struct alice_graph *g, const struct alice_node *node)
{
	struct alice_backend_ctx dummy;
	struct vk_op_args a;
	if (!ctx) {
		memset(&dummy, 0, sizeof(dummy));
		ctx = &dummy;
	}
	if (!g || !node || node_args(ctx, g, node, &a) != ALICE_OK)
		return false;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		if (a.src[i] && (!alice_type_info(a.src[i]->type) || !alice_type_info(a.src[i]->type)->supported))
			return false;
	if (!alice_type_info(a.dst->type))
		return false;
	return types_ok(node, a.dst, a.src);
}

/* ---- recording: hazards and dispatches ---- */


static void barrier(struct alice_backend_ctx *ctx)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
	};
	vkCmdPipelineBarrier(ctx->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
			     &mb, 0, NULL, 0, NULL);
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
	VkDescriptorSetAllocateInfo dai = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
		.descriptorPool = ctx->dpool,
		.descriptorSetCount = 1,
		.pSetLayouts = &ctx->dsl,
	};
	VkDescriptorSet set;
	enum alice_status st = vk_check(ctx, vkAllocateDescriptorSets(ctx->dev, &dai, &set), "vkAllocateDescriptorSets");
	if (st != ALICE_OK)
		return st;
	VkDescriptorBufferInfo bi[VK_NBIND];
	VkWriteDescriptorSet wr[VK_NBIND];
	for (int i = 0; i < VK_NBIND; i++) {
		if (i < n_binds && binds[i].buf)
			bi[i] = (VkDescriptorBufferInfo){binds[i].buf, binds[i].off, binds[i].range};
		else if (i == VK_NBIND - 1)
			bi[i] = (VkDescriptorBufferInfo){ctx->status->buf, 0, VK_WHOLE_SIZE};
		else
			bi[i] = (VkDescriptorBufferInfo){ctx->dummy->buf, 0, VK_WHOLE_SIZE};
		wr[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstSet = set,
			.dstBinding = (uint32_t)i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &bi[i],
		};
	}
	vkUpdateDescriptorSets(ctx->dev, VK_NBIND, wr, 0, NULL);
	vkCmdBindPipeline(ctx->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
	vkCmdBindDescriptorSets(ctx->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx->playout, 0, 1, &set, 0, NULL);
	vkCmdPushConstants(ctx->cmd, ctx->playout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
	uint32_t gx = groups < 65535 ? groups : 65535, gy = (groups + gx - 1) / gx;
	vkCmdDispatch(ctx->cmd, gx, gy, 1);
	for (int i = 0; i < n_binds; i++)
		if (binds[i].buf)
			ctx->pend[ctx->npend++] = (struct vk_pending){binds[i].buf, binds[i].off, binds[i].off + binds[i].range,
							     i == 0 || (extra_writes >> i & 1)};
	ctx->n_dispatch++;
	return ALICE_OK;
}

enum alice_status vk_graph_compute(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	if (ctx->lost)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "the Vulkan device was lost; this context is unusable");
	if (!g || (g->n_nodes && !g->nodes) || (g->n_tensors && !g->tensors))
		return vk_fail(ctx, ALICE_ERR_INVALID, "graph_compute: malformed graph");
	ctx->err[0] = '\0';
	struct vk_op_args a;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		enum alice_status st = check_node(ctx, g, &g->nodes[i], &a);
		if (st != ALICE_OK) {
			char msg[sizeof(ctx->err)];
			snprintf(msg, sizeof(msg), "%s", ctx->err);
			snprintf(ctx->err, sizeof(ctx->err), "node %u (%s): %.440s", i, op_name(g->nodes[i].op), msg);
			return st;
		}
	}
	if (g->n_nodes == 0)
		return ALICE_OK;
	enum alice_status st = ensure_scratch(ctx, g);
	if (st != ALICE_OK)
		return st;
	/* MUL_MAT records two dispatches (rounding + product), sliced ones more */
	if ((st = vk_desc_reserve(ctx, 4 * g->n_nodes + 16)) != ALICE_OK)
		return st;
	memset(ctx->status->map, 0, 16);
	if ((st = vk_cmd_begin(ctx)) != ALICE_OK)
		return st;
	/* earlier submissions (staged uploads, the previous step) wrote what this one reads */
	VkMemoryBarrier mb0 = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
	};
	vkCmdPipelineBarrier(ctx->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb0, 0, NULL, 0, NULL);
	ctx->npend = 0;
	ctx->n_dispatch = 0;
	for (int i = 0; i < VK_SCRATCH_RING; i++)
		ctx->actq[i].valid = false;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		check_node(ctx, g, &g->nodes[i], &a);
		st = op_fns[g->nodes[i].op](&a);
		actq_invalidate(ctx, &a);
		if (st != ALICE_OK) {
			vkEndCommandBuffer(ctx->cmd);
			char msg[sizeof(ctx->err)];
			snprintf(msg, sizeof(msg), "%s", ctx->err);
			snprintf(ctx->err, sizeof(ctx->err), "node %u (%s): %.440s", i, op_name(g->nodes[i].op), msg);
			return st;
		}
	}
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT,
	};
	vkCmdPipelineBarrier(ctx->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
			     VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	if ((st = vk_cmd_submit_wait(ctx)) != ALICE_OK)
		return st;
	uint32_t code, detail;
	memcpy(&code, ctx->status->map, 4);
	memcpy(&detail, ctx->status->map + 4, 4);
	if (code)
		return vk_fail(ctx, ALICE_ERR_RANGE,
			       "an index read by GET_ROWS, KV_WRITE or ATTENTION is out of range (value %d)",
			       (int32_t)detail);
	return ALICE_OK;
}
