/* vk_mem.c — buffers: allocation, host-pointer import, write/read/clear.
 *
 * Unified memory (integrated GPU, CPU device such as lavapipe): every buffer
 * is host-visible device memory, mapped once and written with memcpy; the
 * weights are either imported in place from the caller's mmap with
 * VK_EXT_external_memory_host (zero copies: the mapping is the one copy) or
 * written once into such a buffer. Discrete GPU: buffers are device-local
 * and data moves through one bounded staging buffer (VK_STAGING_BYTES), so
 * the host never holds a second full copy of the weights. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static int find_type(struct alice_backend_ctx *ctx, uint32_t bits, VkMemoryPropertyFlags need,
		     VkMemoryPropertyFlags want)
{
	int best = -1, best_score = -1;
	for (uint32_t i = 0; i < ctx->memprops.memoryTypeCount; i++) {
		VkMemoryPropertyFlags f = ctx->memprops.memoryTypes[i].propertyFlags;
		if (!(bits & (1u << i)) || (f & need) != need)
			continue;
		int score = __builtin_popcount(f & want);
		if (score > best_score) {
			best = (int)i;
			best_score = score;
		}
	}
	return best;
}

static enum alice_status make_buffer(struct alice_backend_ctx *ctx, uint64_t vk_size, const void *next,
				     VkBuffer *out)
{
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = next,
		.size = vk_size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	return vk_check(ctx, vkCreateBuffer(ctx->dev, &bci, NULL, out), "vkCreateBuffer");
}

static enum alice_status alloc_impl(struct alice_backend_ctx *ctx, uint64_t size, uint32_t usage, bool host,
				    struct alice_buffer **out)
{
	*out = NULL;
	if (ctx->lost)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "the Vulkan device was lost");
	uint64_t vk_size = (size + 255) & ~(uint64_t)255;
	if (vk_size == 0)
		vk_size = 256;
	uint64_t lim = usage == ALICE_BUFFER_WEIGHTS ? ctx->max_weights : ctx->max_alloc;
	if (vk_size > lim)
		return vk_fail(ctx, ALICE_ERR_NOMEM, "buffer of %llu bytes exceeds the device's maxMemoryAllocationSize (%llu)",
			       (unsigned long long)size, (unsigned long long)lim);
	struct alice_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return vk_fail(ctx, ALICE_ERR_NOMEM, "out of memory");
	b->size = size;
	b->vk_size = vk_size;
	b->usage = usage;
	enum alice_status st = make_buffer(ctx, vk_size, NULL, &b->buf);
	if (st != ALICE_OK)
		goto fail_free;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(ctx->dev, b->buf, &req);
	int ti;
	if (host || ctx->unified)
		ti = find_type(ctx, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
			       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT |
				       (host ? 0 : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT));
	else
		ti = find_type(ctx, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
	if (ti < 0) {
		st = vk_fail(ctx, ALICE_ERR_BACKEND, "no suitable Vulkan memory type for a %s buffer",
			     host ? "host-visible" : "device");
		goto fail_buf;
	}
	VkMemoryAllocateInfo mai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = (uint32_t)ti,
	};
	VkResult r = vkAllocateMemory(ctx->dev, &mai, NULL, &b->mem);
	if (r != VK_SUCCESS) {
		vk_check(ctx, r, "vkAllocateMemory");
		st = vk_fail(ctx, ALICE_ERR_NOMEM, "cannot allocate %llu bytes of Vulkan memory: %s",
			     (unsigned long long)size, vk_result_str(r));
		b->mem = VK_NULL_HANDLE;
		goto fail_buf;
	}
	if ((st = vk_check(ctx, vkBindBufferMemory(ctx->dev, b->buf, b->mem, 0), "vkBindBufferMemory")) != ALICE_OK)
		goto fail_mem;
	VkMemoryPropertyFlags f = ctx->memprops.memoryTypes[ti].propertyFlags;
	if ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (host || !ctx->force_staging)) {
		void *p;
		if ((st = vk_check(ctx, vkMapMemory(ctx->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory")) != ALICE_OK)
			goto fail_mem;
		b->map = p;
		b->coherent = (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
		b->cached = (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
	}
	vk_account(ctx, (int64_t)vk_size, 0);
	ctx->bytes_held[usage <= ALICE_BUFFER_CACHE ? usage : 1] += vk_size;
	if (usage == ALICE_BUFFER_WEIGHTS && !host)
		vk_log(1, "vulkan: weights: %.1f MiB in %s memory (one copy)", (double)size / 1048576.0,
		       ctx->unified ? "host-visible device" : "device-local");
	*out = b;
	return ALICE_OK;
fail_mem:
	vkFreeMemory(ctx->dev, b->mem, NULL);
fail_buf:
	vkDestroyBuffer(ctx->dev, b->buf, NULL);
fail_free:
	free(b);
	return st;
}

enum alice_status vk_buffer_alloc(struct alice_backend_ctx *ctx, uint64_t size, uint32_t usage,
				  struct alice_buffer **out)
{
	return alloc_impl(ctx, size, usage, false, out);
}

enum alice_status vk_buffer_host(struct alice_backend_ctx *ctx, uint64_t size, struct alice_buffer **out)
{
	return alloc_impl(ctx, size, ALICE_BUFFER_COMPUTE, true, out);
}

enum alice_status vk_buffer_import(struct alice_backend_ctx *ctx, const void *host, uint64_t size,
				   struct alice_buffer **out)
{
	*out = NULL;
	if (ctx->lost)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "the Vulkan device was lost");
	if (!ctx->host_import)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "%s",
			       ctx->unified ? "the Vulkan driver lacks VK_EXT_external_memory_host"
					    : "discrete GPU: weights go to device memory (import would read them over the bus)");
	if (!host || size == 0)
		return vk_fail(ctx, ALICE_ERR_INVALID, "buffer_import of an empty range");
	/* the driver needs an aligned pointer and size: import the aligned superset
	 * of [host, host + size) (the mmap covers whole pages, so it exists) */
	uint64_t al = ctx->import_align;
	uintptr_t p0 = (uintptr_t)host & ~(uintptr_t)(al - 1);
	uintptr_t p1 = ((uintptr_t)host + size + al - 1) & ~(uintptr_t)(al - 1);
	uint64_t len = p1 - p0;
	if (len > ctx->max_weights)
		return vk_fail(ctx, ALICE_ERR_NOMEM, "import of %llu bytes exceeds maxMemoryAllocationSize (%llu)",
			       (unsigned long long)len, (unsigned long long)ctx->max_weights);
	VkMemoryHostPointerPropertiesEXT hpp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	enum alice_status st = vk_check(ctx,
					ctx->get_host_ptr_props(ctx->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
								(void *)p0, &hpp),
					"vkGetMemoryHostPointerPropertiesEXT");
	if (st != ALICE_OK)
		return st;
	struct alice_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return vk_fail(ctx, ALICE_ERR_NOMEM, "out of memory");
	VkExternalMemoryBufferCreateInfo ebi = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	if ((st = make_buffer(ctx, len, &ebi, &b->buf)) != ALICE_OK)
		goto fail_free;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(ctx->dev, b->buf, &req);
	int ti = find_type(ctx, req.memoryTypeBits & hpp.memoryTypeBits, 0,
			   VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	if (ti < 0) {
		st = vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "no memory type can import this host pointer");
		goto fail_buf;
	}
	VkImportMemoryHostPointerInfoEXT imp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = (void *)p0,
	};
	VkMemoryAllocateInfo mai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = &imp,
		.allocationSize = len,
		.memoryTypeIndex = (uint32_t)ti,
	};
	VkResult r = vkAllocateMemory(ctx->dev, &mai, NULL, &b->mem);
	if (r != VK_SUCCESS) {
		b->mem = VK_NULL_HANDLE;
		st = vk_check(ctx, r, "vkAllocateMemory (host pointer import)");
		goto fail_buf;
	}
	if ((st = vk_check(ctx, vkBindBufferMemory(ctx->dev, b->buf, b->mem, 0), "vkBindBufferMemory")) != ALICE_OK)
		goto fail_mem;
	b->size = size;
	b->vk_size = len;
	b->base = (uintptr_t)host - p0;
	b->map = (uint8_t *)p0; /* reads go straight to the caller's memory */
	b->coherent = true;
	b->imported = true;
	b->usage = ALICE_BUFFER_WEIGHTS;
	ctx->bytes_imported += len;
	vk_account(ctx, 0, (int64_t)len);
	vk_log(1, "vulkan: weights: %.1f MiB imported in place from host memory (no copy; alignment %llu)",
	       (double)size / 1048576.0, (unsigned long long)al);
	*out = b;
	return ALICE_OK;
fail_mem:
	vkFreeMemory(ctx->dev, b->mem, NULL);
fail_buf:
	vkDestroyBuffer(ctx->dev, b->buf, NULL);
fail_free:
	free(b);
	return st;
}

void vk_buffer_free(struct alice_backend_ctx *ctx, struct alice_buffer *buf)
{
	if (!buf || !ctx)
		return;
	if (ctx->lq_n)
		vk_launch_settle(ctx); /* a step in flight may use it */
	vk_launch_drop(ctx, buf);
	vk_rec_forget(ctx); /* the recorded step may bind it */
	if (ctx->dev) {
		if (buf->map && !buf->imported)
			vkUnmapMemory(ctx->dev, buf->mem);
		vkDestroyBuffer(ctx->dev, buf->buf, NULL);
		vkFreeMemory(ctx->dev, buf->mem, NULL);
	}
	if (buf->imported) {
		ctx->bytes_imported -= buf->vk_size;
		vk_account(ctx, 0, -(int64_t)buf->vk_size);
	} else {
		ctx->bytes_held[buf->usage <= ALICE_BUFFER_CACHE ? buf->usage : 1] -= buf->vk_size;
		vk_account(ctx, -(int64_t)buf->vk_size, 0);
	}
	free(buf);
}

enum alice_status vk_cmd_begin(struct alice_backend_ctx *ctx)
{
	enum alice_status st = vk_check(ctx, vkResetCommandBuffer(ctx->cmd, 0), "vkResetCommandBuffer");
	if (st != ALICE_OK)
		return st;
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	if ((st = vk_check(ctx, vkBeginCommandBuffer(ctx->cmd, &bi), "vkBeginCommandBuffer")) != ALICE_OK)
		return st;
	/* after earlier submissions' writes (steps already waited for) */
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
	vkCmdPipelineBarrier(ctx->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb,
			     0, NULL, 0, NULL);
	return ALICE_OK;
}

/* Submit cmd (ended) and wait for it. */
enum alice_status vk_submit_wait(struct alice_backend_ctx *ctx, VkCommandBuffer cmd)
{
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
	double t0 = vk_prof_now(ctx);
	enum alice_status st = vk_sync_submit(ctx, &si, &ctx->once);
	if (st == ALICE_OK && (st = vk_sync_wait(ctx, &ctx->once, 0)) == ALICE_OK)
		vk_prof_sync(ctx, t0);
	return st;
}

enum alice_status vk_cmd_submit_wait(struct alice_backend_ctx *ctx)
{
	enum alice_status st = vk_check(ctx, vkEndCommandBuffer(ctx->cmd), "vkEndCommandBuffer");
	if (st != ALICE_OK)
		return st;
	return vk_submit_wait(ctx, ctx->cmd);
}

static enum alice_status check_range(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				     uint64_t size, const char *what, bool writing)
{
	if (ctx->lost)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "%s: the Vulkan device was lost", what);
	enum alice_status st =
		alice_bc_check_range(buf != NULL, buf ? buf->size : 0, offset, size, what, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	if (writing && buf->imported)
		return vk_fail(ctx, ALICE_ERR_INVALID, "%s: an imported buffer is read-only", what);
	return ALICE_OK;
}

static void flush(struct alice_backend_ctx *ctx, struct alice_buffer *b)
{
	if (b->coherent)
		return;
	VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = b->mem, .size = VK_WHOLE_SIZE};
	vkFlushMappedMemoryRanges(ctx->dev, 1, &mr);
}

static void invalidate(struct alice_backend_ctx *ctx, struct alice_buffer *b)
{
	if (b->coherent)
		return;
	VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = b->mem, .size = VK_WHOLE_SIZE};
	vkInvalidateMappedMemoryRanges(ctx->dev, 1, &mr);
}

/* Copy through the staging buffer, one bounded chunk at a time. */
static enum alice_status staged(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				void *host, uint64_t size, bool to_device)
{
	struct alice_buffer *sb = ctx->staging;
	uint64_t done = 0;
	while (done < size) {
		uint64_t n = size - done < VK_STAGING_BYTES ? size - done : VK_STAGING_BYTES;
		if (to_device) {
			memcpy(sb->map, (uint8_t *)host + done, n);
			flush(ctx, sb);
		}
		enum alice_status st = vk_cmd_begin(ctx);
		if (st != ALICE_OK)
			return st;
		VkBufferCopy reg = {
			.srcOffset = to_device ? 0 : buf->base + offset + done,
			.dstOffset = to_device ? buf->base + offset + done : 0,
			.size = n,
		};
		if (to_device)
			vkCmdCopyBuffer(ctx->cmd, sb->buf, buf->buf, 1, &reg);
		else
			vkCmdCopyBuffer(ctx->cmd, buf->buf, sb->buf, 1, &reg);
		if ((st = vk_cmd_submit_wait(ctx)) != ALICE_OK)
			return st;
		if (!to_device) {
			invalidate(ctx, sb);
			memcpy((uint8_t *)host + done, sb->map, n);
		}
		done += n;
	}
	return ALICE_OK;
}

enum alice_status vk_buffer_write(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				  const void *src, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_write", true);
	if (st != ALICE_OK || size == 0)
		return st;
	/* a step's inputs: copied at the head of the next step */
	if (vk_launch_gather(ctx, buf, offset, src, size))
		return ALICE_OK;
	if ((st = vk_launch_quiesce(ctx)) != ALICE_OK)
		return st;
	if (buf->map) {
		memcpy(buf->map + buf->base + offset, src, (size_t)size);
		flush(ctx, buf);
		return ALICE_OK;
	}
	return staged(ctx, buf, offset, (void *)(uintptr_t)src, size, true);
}

enum alice_status vk_buffer_read(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				 void *dst, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_read", false);
	if (st != ALICE_OK || size == 0)
		return st;
	if (vk_launch_lookup(ctx, buf, offset, dst, size))
		return ALICE_OK;
	if ((st = vk_launch_quiesce(ctx)) != ALICE_OK)
		return st;
	return vk_buffer_read_now(ctx, buf, offset, dst, size);
}

enum alice_status vk_buffer_read_now(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				     void *dst, uint64_t size)
{
	if (buf->map) {
		invalidate(ctx, buf);
		memcpy(dst, buf->map + buf->base + offset, (size_t)size);
		return ALICE_OK;
	}
	return staged(ctx, buf, offset, dst, size, false);
}

enum alice_status vk_buffer_clear(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				  uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_clear", true);
	if (st != ALICE_OK || size == 0)
		return st;
	if ((st = vk_launch_quiesce(ctx)) != ALICE_OK)
		return st;
	if (buf->map) {
		memset(buf->map + buf->base + offset, 0, (size_t)size);
		flush(ctx, buf);
		return ALICE_OK;
	}
	/* vkCmdFillBuffer needs 4-byte alignment: fill the aligned middle, write the edges */
	static const uint8_t zeros[4];
	uint64_t a0 = (offset + 3) & ~(uint64_t)3, a1 = (offset + size) & ~(uint64_t)3;
	if (a1 <= a0)
		return staged(ctx, buf, offset, (void *)(uintptr_t)zeros, size, true);
	if (a0 > offset && (st = staged(ctx, buf, offset, (void *)(uintptr_t)zeros, a0 - offset, true)) != ALICE_OK)
		return st;
	if (offset + size > a1 &&
	    (st = staged(ctx, buf, a1, (void *)(uintptr_t)zeros, offset + size - a1, true)) != ALICE_OK)
		return st;
	if ((st = vk_cmd_begin(ctx)) != ALICE_OK)
		return st;
	vkCmdFillBuffer(ctx->cmd, buf->buf, buf->base + a0, a1 - a0, 0);
	return vk_cmd_submit_wait(ctx);
}
