/* vk_rec.c — a graph's dispatches are first logged, then recorded into
 * their own command buffer (gcmd). A decode step logs exactly what the
 * step before it logged (same pipelines, bindings, push constants and
 * group counts: what changes between steps lives in device memory), so
 * gcmd is submitted again without recording: no descriptor set
 * allocation or update, no command recording on the host between steps
 * (on the H200's driver ~11 us a dispatch, 3.8 ms a 1B token). vk_launch.c
 * submits it between the step's head and tail. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

enum alice_status vk_rec_add(struct alice_backend_ctx *ctx, const struct vk_rec *r)
{
	if (ctx->log_n == ctx->log_cap) {
		uint32_t cap = ctx->log_cap ? 2 * ctx->log_cap : 512;
		struct vk_rec *n = realloc(ctx->log, (size_t)cap * sizeof(*n));
		if (!n)
			return vk_fail(ctx, ALICE_ERR_NOMEM, "recording: out of memory");
		ctx->log = n;
		ctx->log_cap = cap;
	}
	ctx->log[ctx->log_n++] = *r;
	return ALICE_OK;
}

void vk_rec_forget(struct alice_backend_ctx *ctx)
{
	ctx->gcmd_ok = false;
	ctx->prev_n = 0;
	vk_launch_forget(ctx);
}

void vk_rec_free(struct alice_backend_ctx *ctx)
{
	free(ctx->log);
	free(ctx->prev);
	free(ctx->g_nodes);
	free(ctx->g_tensors);
	ctx->g_nodes = NULL;
	ctx->g_tensors = NULL;
	ctx->log = ctx->prev = NULL;
	ctx->log_n = ctx->log_cap = ctx->prev_n = ctx->prev_cap = 0;
}

static void mem_barrier(VkCommandBuffer cmd, VkAccessFlags src, VkAccessFlags dst, VkPipelineStageFlags s0,
			VkPipelineStageFlags s1)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
	vkCmdPipelineBarrier(cmd, s0, s1, 0, 1, &mb, 0, NULL, 0, NULL);
}

static enum alice_status record(struct alice_backend_ctx *ctx)
{
	VkCommandBuffer cmd = ctx->gcmd;
	/* a launch in flight may still run gcmd and its descriptor sets */
	enum alice_status st = vk_launch_settle(ctx);
	if (st != ALICE_OK || (st = vk_desc_reserve(ctx, ctx->log_n)) != ALICE_OK)
		return st;
	if ((st = vk_check(ctx, vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer")) != ALICE_OK)
		return st;
	/* two launches in flight may both hold it */
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
	if ((st = vk_check(ctx, vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer")) != ALICE_OK)
		return st;
	/* earlier submissions (staged uploads, the previous step) wrote what this one reads */
	mem_barrier(cmd, VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
		    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
		    VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
	vk_prof_record(ctx, cmd);
	for (uint32_t i = 0; i < ctx->log_n; i++) {
		const struct vk_rec *r = &ctx->log[i];
		if (r->barrier) {
			mem_barrier(cmd, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
				    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
				    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
			vk_prof_barrier(ctx);
		}
		VkDescriptorSetAllocateInfo dai = {
			.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
			.descriptorPool = ctx->dpool,
			.descriptorSetCount = 1,
			.pSetLayouts = &ctx->dsl,
		};
		VkDescriptorSet set;
		if ((st = vk_check(ctx, vkAllocateDescriptorSets(ctx->dev, &dai, &set), "vkAllocateDescriptorSets")) != ALICE_OK) {
			vkEndCommandBuffer(cmd);
			return st;
		}
		VkWriteDescriptorSet wr[VK_NBIND];
		for (int b = 0; b < VK_NBIND; b++)
			wr[b] = (VkWriteDescriptorSet){
				.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
				.dstSet = set,
				.dstBinding = (uint32_t)b,
				.descriptorCount = 1,
				.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
				.pBufferInfo = &r->bi[b],
			};
		vkUpdateDescriptorSets(ctx->dev, VK_NBIND, wr, 0, NULL);
		vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->pipe);
		vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx->playout, 0, 1, &set, 0, NULL);
		vkCmdPushConstants(cmd, ctx->playout, VK_SHADER_STAGE_COMPUTE_BIT, 0, r->push_bytes, r->push);
		vkCmdDispatch(cmd, r->gx, r->gy, 1);
		vk_prof_dispatch(ctx, cmd, r->name);
	}
	vk_prof_record_end(ctx, cmd);
	mem_barrier(cmd, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT,
		    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
	return vk_check(ctx, vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
}

enum alice_status vk_rec_prepare(struct alice_backend_ctx *ctx)
{
	enum alice_status st;
	if (!ctx->gcmd) {
		VkCommandBufferAllocateInfo cai = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
			.commandPool = ctx->cmdpool,
			.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
			.commandBufferCount = 1,
		};
		if ((st = vk_check(ctx, vkAllocateCommandBuffers(ctx->dev, &cai, &ctx->gcmd), "vkAllocateCommandBuffers")) !=
		    ALICE_OK)
			return st;
	}
	bool same = ctx->gcmd_ok && ctx->prev_n == ctx->log_n &&
		    memcmp(ctx->prev, ctx->log, (size_t)ctx->log_n * sizeof(struct vk_rec)) == 0;
	if (!same) {
		ctx->gcmd_ok = false;
		if ((st = record(ctx)) != ALICE_OK)
			return st;
		/* the log just recorded becomes prev (swap the arrays) */
		struct vk_rec *t = ctx->prev;
		uint32_t tc = ctx->prev_cap;
		ctx->prev = ctx->log;
		ctx->prev_cap = ctx->log_cap;
		ctx->prev_n = ctx->log_n;
		ctx->log = t;
		ctx->log_cap = tc;
		ctx->gcmd_ok = true;
		ctx->n_recorded++;
	} else {
		ctx->n_replayed++;
	}
	ctx->log_n = 0;
	return ALICE_OK;
}

/* The graph gcmd was recorded from, kept when the recording depended on
 * nothing but the graph (no row regimes read from the device): a graph
 * equal to it byte for byte records the same, so it is not even logged. */
bool vk_rec_same_graph(const struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	return ctx->gcmd_ok && ctx->g_keep && ctx->g_n_nodes == g->n_nodes && ctx->g_n_tensors == g->n_tensors &&
	       memcmp(ctx->g_nodes, g->nodes, (size_t)g->n_nodes * sizeof(*g->nodes)) == 0 &&
	       memcmp(ctx->g_tensors, g->tensors, (size_t)g->n_tensors * sizeof(*g->tensors)) == 0;
}

void vk_rec_keep_graph(struct alice_backend_ctx *ctx, const struct alice_graph *g, bool keep)
{
	ctx->g_keep = false;
	if (!keep)
		return;
	struct alice_node *n = realloc(ctx->g_nodes, (size_t)g->n_nodes * sizeof(*n) + 1);
	if (n)
		ctx->g_nodes = n;
	struct alice_tensor *t = realloc(ctx->g_tensors, (size_t)g->n_tensors * sizeof(*t) + 1);
	if (t)
		ctx->g_tensors = t;
	if (!n || !t)
		return;
	memcpy(n, g->nodes, (size_t)g->n_nodes * sizeof(*n));
	memcpy(t, g->tensors, (size_t)g->n_tensors * sizeof(*t));
	ctx->g_n_nodes = g->n_nodes;
	ctx->g_n_tensors = g->n_tensors;
	ctx->g_keep = true;
}
