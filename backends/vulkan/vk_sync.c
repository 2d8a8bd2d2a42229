/* vk_sync.c — when a submission has finished: a value of the context's
 * timeline semaphore (VK_KHR_timeline_semaphore, where the device has it),
 * else a fence per waiter. The timeline needs no reset between steps and its
 * counter is one read for any number of submissions in flight.
 * ALICE_VK_TIMELINE=0 keeps the fences (tests take both paths). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_internal.h"

/* The device has the extension and the feature (device_info says so) */
bool vk_timeline_supported(VkPhysicalDevice pd)
{
	VkPhysicalDeviceTimelineSemaphoreFeaturesKHR f;
	return vk_timeline_probe(pd, &f, false);
}

/* ... and, unless ALICE_VK_TIMELINE=0 (use_env), it is used: before
 * vkCreateDevice, f goes into its pNext chain when this returns true. */
bool vk_timeline_probe(VkPhysicalDevice pd, VkPhysicalDeviceTimelineSemaphoreFeaturesKHR *f, bool use_env)
{
	const char *e = use_env ? getenv("ALICE_VK_TIMELINE") : NULL;
	if ((e && e[0] == '0') || !vk_has_device_ext(pd, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME))
		return false;
	memset(f, 0, sizeof(*f));
	f->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES_KHR;
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = f};
	vkGetPhysicalDeviceFeatures2(pd, &f2);
	f->pNext = NULL;
	return f->timelineSemaphore == VK_TRUE;
}

/* After vkCreateDevice with the feature on: the semaphore and its entry
 * points. Any failure leaves ctx->tl null, and the fences serve. */
void vk_timeline_init(struct alice_backend_ctx *ctx)
{
	ctx->sem_wait = (PFN_vkWaitSemaphoresKHR)vkGetDeviceProcAddr(ctx->dev, "vkWaitSemaphoresKHR");
	ctx->sem_value = (PFN_vkGetSemaphoreCounterValueKHR)vkGetDeviceProcAddr(ctx->dev, "vkGetSemaphoreCounterValueKHR");
	if (!ctx->sem_wait || !ctx->sem_value)
		return;
	VkSemaphoreTypeCreateInfoKHR ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO_KHR,
					   .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE_KHR};
	VkSemaphoreCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
	if (vkCreateSemaphore(ctx->dev, &ci, NULL, &ctx->tl) != VK_SUCCESS)
		ctx->tl = VK_NULL_HANDLE;
	ctx->tl_last = 0;
}

void vk_timeline_free(struct alice_backend_ctx *ctx)
{
	if (ctx->tl)
		vkDestroySemaphore(ctx->dev, ctx->tl, NULL);
	ctx->tl = VK_NULL_HANDLE;
}

enum alice_status vk_sync_init(struct alice_backend_ctx *ctx, struct vk_sync *s)
{
	if (ctx->tl || s->fence)
		return ALICE_OK;
	VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	return vk_check(ctx, vkCreateFence(ctx->dev, &fci, NULL, &s->fence), "vkCreateFence");
}

void vk_sync_free(struct alice_backend_ctx *ctx, struct vk_sync *s)
{
	if (s->fence)
		vkDestroyFence(ctx->dev, s->fence, NULL);
	s->fence = VK_NULL_HANDLE;
}

enum alice_status vk_sync_submit(struct alice_backend_ctx *ctx, VkSubmitInfo *si, struct vk_sync *s)
{
	if (!ctx->tl) {
		enum alice_status st = vk_check(ctx, vkResetFences(ctx->dev, 1, &s->fence), "vkResetFences");
		if (st != ALICE_OK)
			return st;
		return vk_check(ctx, vkQueueSubmit(ctx->queue, 1, si, s->fence), "vkQueueSubmit");
	}
	/* values only grow: a failed submission's value is never waited for */
	uint64_t v = ctx->tl_last + 1;
	VkTimelineSemaphoreSubmitInfoKHR ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO_KHR,
					       .signalSemaphoreValueCount = 1,
					       .pSignalSemaphoreValues = &v};
	si->pNext = &ts;
	si->signalSemaphoreCount = 1;
	si->pSignalSemaphores = &ctx->tl;
	enum alice_status st = vk_check(ctx, vkQueueSubmit(ctx->queue, 1, si, VK_NULL_HANDLE), "vkQueueSubmit");
	si->pNext = NULL;
	si->signalSemaphoreCount = 0;
	si->pSignalSemaphores = NULL;
	if (st == ALICE_OK)
		ctx->tl_last = s->value = v;
	return st;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* VK_SUCCESS when finished, VK_NOT_READY when not, else an error */
static VkResult sync_status(struct alice_backend_ctx *ctx, const struct vk_sync *s)
{
	if (!ctx->tl)
		return vkGetFenceStatus(ctx->dev, s->fence);
	uint64_t v = 0;
	VkResult r = ctx->sem_value(ctx->dev, ctx->tl, &v);
	return r != VK_SUCCESS ? r : v >= s->value ? VK_SUCCESS : VK_NOT_READY;
}

/* Polled for spin_us first (a blocking wait's wake-up comes tens of
 * microseconds late; a decode step is ~1 ms), then a blocking wait, generous
 * since a long prefill on a software device can take minutes. */
enum alice_status vk_sync_wait(struct alice_backend_ctx *ctx, const struct vk_sync *s, int spin_us)
{
	if (spin_us > 0) {
		double t_end = now_us() + spin_us;
		VkResult r;
		while ((r = sync_status(ctx, s)) == VK_NOT_READY && now_us() < t_end)
			;
		if (r == VK_SUCCESS)
			return ALICE_OK;
	}
	const uint64_t timeout = 600ull * 1000000000ull;
	VkResult r;
	const char *what;
	if (ctx->tl) {
		VkSemaphoreWaitInfoKHR wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO_KHR,
					     .semaphoreCount = 1,
					     .pSemaphores = &ctx->tl,
					     .pValues = &s->value};
		r = ctx->sem_wait(ctx->dev, &wi, timeout);
		what = "vkWaitSemaphores";
	} else {
		r = vkWaitForFences(ctx->dev, 1, &s->fence, VK_TRUE, timeout);
		what = "vkWaitForFences";
	}
	if (r == VK_TIMEOUT) {
		ctx->lost = true;
		return vk_fail(ctx, ALICE_ERR_BACKEND, "%s: the GPU did not finish in 600 s; context unusable", what);
	}
	return vk_check(ctx, r, what);
}
