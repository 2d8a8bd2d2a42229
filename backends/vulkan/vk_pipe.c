/* vk_pipe.c — the one descriptor-set layout every pipeline shares (dst,
 * src0..src3, status: storage buffers), the pipeline layout (128 bytes of
 * push constants), compute pipelines made on first use from the embedded
 * SPIR-V (the `_sg` variant, with subgroup arithmetic, where the device has
 * it; the shared-memory variant otherwise), and the per-graph descriptor pool. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_shaders.h"

enum alice_status vk_pipe_init(struct alice_backend_ctx *ctx)
{
	VkDescriptorSetLayoutBinding b[VK_NBIND];
	for (uint32_t i = 0; i < VK_NBIND; i++)
		b[i] = (VkDescriptorSetLayoutBinding){
			.binding = i,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = 1,
			.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		};
	VkDescriptorSetLayoutCreateInfo dli = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.bindingCount = VK_NBIND,
		.pBindings = b,
	};
	enum alice_status st = vk_check(ctx, vkCreateDescriptorSetLayout(ctx->dev, &dli, NULL, &ctx->dsl),
					"vkCreateDescriptorSetLayout");
	if (st != ALICE_OK)
		return st;
	VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = VK_PUSH_BYTES};
	VkPipelineLayoutCreateInfo pli = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &ctx->dsl,
		.pushConstantRangeCount = 1,
		.pPushConstantRanges = &pr,
	};
	st = vk_check(ctx, vkCreatePipelineLayout(ctx->dev, &pli, NULL, &ctx->playout), "vkCreatePipelineLayout");
	if (st != ALICE_OK)
		return st;
	VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
	return vk_check(ctx, vkCreatePipelineCache(ctx->dev, &pci, NULL, &ctx->pcache), "vkCreatePipelineCache");
}

void vk_pipe_free(struct alice_backend_ctx *ctx)
{
	for (int i = 0; i < ctx->n_pipes; i++)
		vkDestroyPipeline(ctx->dev, ctx->pipes[i].pipe, NULL);
	ctx->n_pipes = 0;
	if (ctx->dpool)
		vkDestroyDescriptorPool(ctx->dev, ctx->dpool, NULL);
	if (ctx->pcache)
		vkDestroyPipelineCache(ctx->dev, ctx->pcache, NULL);
	if (ctx->playout)
		vkDestroyPipelineLayout(ctx->dev, ctx->playout, NULL);
	if (ctx->dsl)
		vkDestroyDescriptorSetLayout(ctx->dev, ctx->dsl, NULL);
}

static const struct vk_shader_blob *find_blob(const char *name)
{
	for (const struct vk_shader_blob *b = vk_shader_table; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b;
	return NULL;
}

bool vk_shader_built(const char *name)
{
	return find_blob(name) != NULL;
}

VkPipeline vk_pipe_get(struct alice_backend_ctx *ctx, const char *name)
{
	const struct vk_shader_blob *blob = NULL;
	if (ctx->subgroup_arith) {
		char sg[64];
		snprintf(sg, sizeof(sg), "%s_sg", name);
		blob = find_blob(sg);
	}
	if (!blob)
		blob = find_blob(name);
	if (!blob) {
		vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "no shader named %s", name);
		return VK_NULL_HANDLE;
	}
	for (int i = 0; i < ctx->n_pipes; i++)
		if (ctx->pipes[i].name == blob->name)
			return ctx->pipes[i].pipe;
	if (ctx->n_pipes >= VK_MAX_PIPES) {
		vk_fail(ctx, ALICE_ERR_BACKEND, "too many pipelines");
		return VK_NULL_HANDLE;
	}
	VkShaderModuleCreateInfo smi = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = blob->size,
		.pCode = blob->words,
	};
	VkShaderModule mod;
	if (vk_check(ctx, vkCreateShaderModule(ctx->dev, &smi, NULL, &mod), "vkCreateShaderModule") != ALICE_OK)
		return VK_NULL_HANDLE;
	VkComputePipelineCreateInfo cpi = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = mod,
			.pName = "main",
		},
		.layout = ctx->playout,
	};
	VkPipeline pipe;
	VkResult r = vkCreateComputePipelines(ctx->dev, ctx->pcache, 1, &cpi, NULL, &pipe);
	vkDestroyShaderModule(ctx->dev, mod, NULL);
	if (r != VK_SUCCESS) {
		char what[96];
		snprintf(what, sizeof(what), "vkCreateComputePipelines(%s)", blob->name);
		vk_check(ctx, r, what);
		return VK_NULL_HANDLE;
	}
	ctx->pipes[ctx->n_pipes].name = blob->name;
	ctx->pipes[ctx->n_pipes].pipe = pipe;
	ctx->n_pipes++;
	return pipe;
}

enum alice_status vk_desc_reserve(struct alice_backend_ctx *ctx, uint32_t n)
{
	if (n == 0)
		n = 1;
	if (ctx->dpool && n <= ctx->dpool_cap)
		return vk_check(ctx, vkResetDescriptorPool(ctx->dev, ctx->dpool, 0), "vkResetDescriptorPool");
	if (ctx->dpool) {
		vkDestroyDescriptorPool(ctx->dev, ctx->dpool, NULL);
		ctx->dpool = VK_NULL_HANDLE;
	}
	uint32_t cap = 256;
	while (cap < n)
		cap *= 2;
	VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = cap * VK_NBIND};
	VkDescriptorPoolCreateInfo dpi = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
		.maxSets = cap,
		.poolSizeCount = 1,
		.pPoolSizes = &ps,
	};
	enum alice_status st = vk_check(ctx, vkCreateDescriptorPool(ctx->dev, &dpi, NULL, &ctx->dpool),
					"vkCreateDescriptorPool");
	if (st != ALICE_OK) {
		ctx->dpool = VK_NULL_HANDLE;
		ctx->dpool_cap = 0;
		return st;
	}
	ctx->dpool_cap = cap;
	return ALICE_OK;
}
