/* vk.c — the Vulkan backend's vtable: instance and device choice, the probe
 * that says why there is no usable device, device info, contexts. Buffers
 * are in vk_mem.c, pipelines in vk_pipe.c, graph recording in vk_graph.c and
 * the ops in vk_ops_*.c.
 *
 * Device choice: the `device` option is an index into the physical devices
 * that have a compute queue and Vulkan >= 1.1, ordered discrete GPUs first,
 * then integrated, virtual, CPU (lavapipe); -1 (and 0) take the first. On unified-memory devices (integrated, CPU) weights live once,
 * in host-visible memory or imported in place from the mmap. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend_log.h"
#include "vk_internal.h"

static const struct alice_backend_host *g_host;

/* Bytes held by every context of this process, per device index (device_info
 * reports them; a context adds on alloc, subtracts on free). */
#define VK_MAX_DEV 16
static uint64_t g_held[VK_MAX_DEV];
static uint64_t g_imported[VK_MAX_DEV];

ALICE_BACKEND_DEFINE_LOG(, vk_log, g_host)
ALICE_BACKEND_DEFINE_FAIL(, vk_fail)

const char *vk_result_str(VkResult r)
{
	switch (r) {
	case VK_SUCCESS: return "VK_SUCCESS";
	case VK_NOT_READY: return "VK_NOT_READY";
	case VK_TIMEOUT: return "VK_TIMEOUT";
	case VK_INCOMPLETE: return "VK_INCOMPLETE";
	case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
	case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
	case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
	case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
	case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
	case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
	case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
	case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
	case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
	case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
	case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
	case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
	case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
	case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
	default: return "VK_ERROR_UNKNOWN";
	}
}

enum alice_status vk_check(struct alice_backend_ctx *ctx, VkResult r, const char *what)
{
	if (r == VK_SUCCESS)
		return ALICE_OK;
	if (r == VK_ERROR_DEVICE_LOST)
		ctx->lost = true;
	enum alice_status st = (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
				       ? ALICE_ERR_NOMEM
				       : ALICE_ERR_BACKEND;
	return vk_fail(ctx, st, "%s: %s (%d)%s", what, vk_result_str(r), (int)r,
		       r == VK_ERROR_DEVICE_LOST ? "; the Vulkan device is lost, this context is unusable" : "");
}

/* ---- instance and device enumeration ---- */

static VkResult make_instance(VkInstance *out)
{
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "alice-llm",
		.pEngineName = "alice",
		.apiVersion = VK_API_VERSION_1_1,
	};
	VkInstanceCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	return vkCreateInstance(&ci, NULL, out);
}

static bool has_compute_queue(VkPhysicalDevice pd, uint32_t *fam)
{
	uint32_t n = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
	VkQueueFamilyProperties qf[32];
	if (n > 32)
		n = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, qf);
	/* a family without graphics where there is one: on the H100's driver
	 * pp512 +12-14% and tg128 +1% against the graphics family (1B Q4_K_M /
	 * Q8_0, session 25); ALICE_VK_QUEUE=any: the first compute family */
	const char *qe = getenv("ALICE_VK_QUEUE");
	bool conly = !(qe && strcmp(qe, "any") == 0);
	int first = -1;
	for (uint32_t i = 0; i < n; i++)
		if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qf[i].queueCount > 0) {
			if (first < 0)
				first = (int)i;
			if (!conly || !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
				first = (int)i;
				break;
			}
		}
	if (first >= 0 && fam)
		*fam = (uint32_t)first;
	return first >= 0;
}

static int type_rank(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
	default: return 4;
	}
}

/* Usable devices (compute queue, Vulkan >= 1.1): discrete GPUs first, then
 * integrated, virtual, CPU (stable within a kind), so device 0 is the default. */
static int usable_devices(VkInstance inst, VkPhysicalDevice *out, int max, char *why, size_t why_len)
{
	uint32_t n = 0;
	VkResult r = vkEnumeratePhysicalDevices(inst, &n, NULL);
	if (r != VK_SUCCESS) {
		snprintf(why, why_len, "no Vulkan ICD: vkEnumeratePhysicalDevices returned %s", vk_result_str(r));
		return 0;
	}
	if (n == 0) {
		snprintf(why, why_len, "no Vulkan ICD: the loader found no physical device (check VK_ICD_FILENAMES / VK_DRIVER_FILES)");
		return 0;
	}
	VkPhysicalDevice all[VK_MAX_DEV];
	if (n > VK_MAX_DEV)
		n = VK_MAX_DEV;
	r = vkEnumeratePhysicalDevices(inst, &n, all);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
		snprintf(why, why_len, "no Vulkan ICD: vkEnumeratePhysicalDevices returned %s", vk_result_str(r));
		return 0;
	}
	int k = 0;
	size_t w = 0;
	why[0] = '\0';
	for (uint32_t i = 0; i < n && k < max; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(all[i], &p);
		bool binds = p.limits.maxPerStageDescriptorStorageBuffers >= VK_NBIND;
		bool ok = p.apiVersion >= VK_API_VERSION_1_1 && has_compute_queue(all[i], NULL) && binds;
		if (ok)
			out[k++] = all[i];
		else if (w < why_len)
			w += (size_t)snprintf(why + w, why_len - w, "%s%s: %s", w ? "; " : "", p.deviceName,
					      p.apiVersion < VK_API_VERSION_1_1 ? "Vulkan < 1.1"
					      : !binds ? "fewer than 9 storage buffers per shader stage"
						       : "no compute queue");
	}
	if (k == 0 && w == 0)
		snprintf(why, why_len, "no Vulkan device with a compute queue");
	for (int i = 1; i < k; i++) { /* insertion sort by kind, stable */
		VkPhysicalDevice d = out[i];
		VkPhysicalDeviceProperties pd;
		vkGetPhysicalDeviceProperties(d, &pd);
		int j = i;
		while (j > 0) {
			VkPhysicalDeviceProperties pj;
			vkGetPhysicalDeviceProperties(out[j - 1], &pj);
			if (type_rank(pj.deviceType) <= type_rank(pd.deviceType))
				break;
			out[j] = out[j - 1];
			j--;
		}
		out[j] = d;
	}
	return k;
}

/* Index into the (sorted) usable list for option `device` (-1 = the first), or -1. */
static int choose_device(VkPhysicalDevice *devs, int n, int want)
{
	(void)devs;
	if (want < 0)
		return n > 0 ? 0 : -1;
	return want < n ? want : -1;
}

bool vk_has_device_ext(VkPhysicalDevice pd, const char *name)
{
	uint32_t n = 0;
	if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
		return false;
	VkExtensionProperties *e = calloc(n, sizeof(*e));
	if (!e)
		return false;
	bool found = false;
	if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
		for (uint32_t i = 0; i < n && !found; i++)
			found = strcmp(e[i].extensionName, name) == 0;
	free(e);
	return found;
}

/* VK_NV_cooperative_matrix with a 16 x 16 x 16 F16 x F16 -> F32 subgroup
 * shape, F16 arithmetic and the Vulkan memory model (mmc.comp needs all
 * three); the feature structs are filled for vkCreateDevice. */
struct vk_coopmat_feats {
	VkPhysicalDeviceCooperativeMatrixFeaturesNV cm;
	VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16;
	VkPhysicalDeviceVulkanMemoryModelFeaturesKHR mm;
};

static bool coopmat_probe(VkInstance inst, VkPhysicalDevice pd, uint32_t subgroup, struct vk_coopmat_feats *f)
{
	const char *e = getenv("ALICE_VK_COOPMAT");
	if ((e && e[0] == '0') || subgroup != 32 || !vk_has_device_ext(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) ||
	    !vk_has_device_ext(pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME) ||
	    !vk_has_device_ext(pd, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME))
		return false;
	memset(f, 0, sizeof(*f));
	f->cm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
	f->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR;
	f->mm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR;
	f->cm.pNext = &f->f16;
	f->f16.pNext = &f->mm;
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f->cm};
	vkGetPhysicalDeviceFeatures2(pd, &f2);
	if (!f->cm.cooperativeMatrix || !f->f16.shaderFloat16 || !f->mm.vulkanMemoryModel)
		return false;
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV props =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
			inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
	uint32_t n = 0;
	if (!props || props(pd, &n, NULL) != VK_SUCCESS || n == 0)
		return false;
	VkCooperativeMatrixPropertiesNV *cp = calloc(n, sizeof(*cp));
	if (!cp)
		return false;
	for (uint32_t i = 0; i < n; i++)
		cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
	bool ok = false;
	if (props(pd, &n, cp) == VK_SUCCESS)
		for (uint32_t i = 0; i < n && !ok; i++)
			ok = cp[i].MSize == 16 && cp[i].NSize == 16 && cp[i].KSize == 16 &&
			     cp[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV && cp[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
			     cp[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV && cp[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
			     cp[i].scope == VK_SCOPE_SUBGROUP_NV;
	free(cp);
	/* enable only what the shader uses */
	f->cm.cooperativeMatrixRobustBufferAccess = VK_FALSE;
	f->f16.shaderInt8 = VK_FALSE;
	f->mm.vulkanMemoryModelDeviceScope = VK_FALSE;
	f->mm.vulkanMemoryModelAvailabilityVisibilityChains = VK_FALSE;
	return ok;
}

static bool is_unified(VkPhysicalDeviceType t)
{
	return t == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || t == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

static const char *type_name(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
	default: return "other";
	}
}

/* ---- probe / device_info ---- */

static int vk_probe(char *reason, size_t reason_len)
{
	VkInstance inst;
	VkResult r = make_instance(&inst);
	if (r != VK_SUCCESS) {
		snprintf(reason, reason_len, "no Vulkan ICD: vkCreateInstance returned %s%s", vk_result_str(r),
			 r == VK_ERROR_INCOMPATIBLE_DRIVER
				 ? " (the loader found no driver, or none supports Vulkan 1.1; see VK_DRIVER_FILES)"
				 : "");
		return 0;
	}
	VkPhysicalDevice devs[VK_MAX_DEV];
	char why[512];
	int n = usable_devices(inst, devs, VK_MAX_DEV, why, sizeof(why));
	vkDestroyInstance(inst, NULL);
	if (n == 0)
		snprintf(reason, reason_len, "%s", why);
	return n;
}

static uint64_t device_local_bytes(const VkPhysicalDeviceMemoryProperties *mp)
{
	uint64_t t = 0;
	for (uint32_t i = 0; i < mp->memoryHeapCount; i++)
		if (mp->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
			t += mp->memoryHeaps[i].size;
	return t;
}

static enum alice_status vk_device_info(int device, struct alice_device_info *out)
{
	if (!out)
		return ALICE_ERR_INVALID;
	memset(out, 0, sizeof(*out));
	VkInstance inst;
	if (make_instance(&inst) != VK_SUCCESS)
		return ALICE_ERR_BACKEND;
	VkPhysicalDevice devs[VK_MAX_DEV];
	char why[512];
	int n = usable_devices(inst, devs, VK_MAX_DEV, why, sizeof(why));
	int i = choose_device(devs, n, device);
	if (i < 0) {
		vkDestroyInstance(inst, NULL);
		return ALICE_ERR_INVALID;
	}
	VkPhysicalDeviceProperties p;
	vkGetPhysicalDeviceProperties(devs[i], &p);
	VkPhysicalDeviceMemoryProperties mp;
	vkGetPhysicalDeviceMemoryProperties(devs[i], &mp);
	bool imp = vk_has_device_ext(devs[i], VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	snprintf(out->name, sizeof(out->name), "%.127s", p.deviceName);
	out->mem_total = device_local_bytes(&mp);
	out->mem_free = out->mem_total;
	if (vk_has_device_ext(devs[i], VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
		VkPhysicalDeviceMemoryBudgetPropertiesEXT bud = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
		VkPhysicalDeviceMemoryProperties2 mp2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
							 .pNext = &bud};
		vkGetPhysicalDeviceMemoryProperties2(devs[i], &mp2);
		uint64_t fr = 0;
		for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
			if ((mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
			    bud.heapBudget[h] > bud.heapUsage[h])
				fr += bud.heapBudget[h] - bud.heapUsage[h];
		out->mem_free = fr;
	}
	int di = i < VK_MAX_DEV ? i : VK_MAX_DEV - 1;
	snprintf(out->description, sizeof(out->description),
		 "Vulkan %u.%u.%u, %s, driver 0x%x, vendor 0x%04x%s; this process holds %.1f MiB allocated + %.1f MiB imported in place",
		 VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion),
		 VK_API_VERSION_PATCH(p.apiVersion), type_name(p.deviceType), p.driverVersion, p.vendorID,
		 vk_timeline_supported(devs[i]) ? ", timeline semaphores" : "",
		 (double)__atomic_load_n(&g_held[di], __ATOMIC_RELAXED) / 1048576.0,
		 (double)__atomic_load_n(&g_imported[di], __ATOMIC_RELAXED) / 1048576.0);
	const char *fs = getenv("ALICE_VK_FORCE_STAGING");
	bool unified = is_unified(p.deviceType) && !(fs && *fs == '1');
	if (unified)
		out->flags |= ALICE_DEVICE_UNIFIED_MEMORY;
	if (unified && imp)
		out->flags |= ALICE_DEVICE_HOST_IMPORT;
	if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
		out->flags |= ALICE_DEVICE_SOFTWARE; /* lavapipe: auto prefers the CPU backend */
	vkDestroyInstance(inst, NULL);
	return ALICE_OK;
}

/* ---- contexts ---- */

void vk_account(struct alice_backend_ctx *ctx, int64_t held, int64_t imported)
{
	__atomic_add_fetch(&g_held[ctx->dev_index], (uint64_t)held, __ATOMIC_RELAXED);
	__atomic_add_fetch(&g_imported[ctx->dev_index], (uint64_t)imported, __ATOMIC_RELAXED);
}

static void ctx_destroy(struct alice_backend_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->dev) {
		vkDeviceWaitIdle(ctx->dev);
		vk_launch_free(ctx);
		vk_prof_free(ctx);
		vk_rec_free(ctx);
		vk_buffer_free(ctx, ctx->staging);
		vk_buffer_free(ctx, ctx->scratch);
		vk_buffer_free(ctx, ctx->status);
		vk_buffer_free(ctx, ctx->dummy);
		vk_buffer_free(ctx, ctx->gq_cnt);
		vk_pipe_free(ctx);
		vk_sync_free(ctx, &ctx->once);
		vk_timeline_free(ctx);
		if (ctx->cmdpool)
			vkDestroyCommandPool(ctx->dev, ctx->cmdpool, NULL);
		vkDestroyDevice(ctx->dev, NULL);
	}
	if (ctx->inst)
		vkDestroyInstance(ctx->inst, NULL);
	for (int i = 0; i < VK_MAX_REGIMES; i++)
		free(ctx->regimes[i].v);
	free(ctx);
}

static enum alice_status vk_init(const struct alice_backend_options *opts, struct alice_backend_ctx **out,
				 char *err, size_t err_len)
{
	*out = NULL;
	int want = -1;
	if (opts && opts->size >= offsetof(struct alice_backend_options, device) + sizeof(int32_t))
		want = opts->device;
	struct alice_backend_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(err, err_len, "out of memory");
		return ALICE_ERR_NOMEM;
	}
	VkResult r = make_instance(&ctx->inst);
	if (r != VK_SUCCESS) {
		snprintf(err, err_len, "no Vulkan ICD: vkCreateInstance returned %s", vk_result_str(r));
		ctx->inst = VK_NULL_HANDLE;
		ctx_destroy(ctx);
		return ALICE_ERR_UNSUPPORTED;
	}
	VkPhysicalDevice devs[VK_MAX_DEV];
	char why[512];
	int n = usable_devices(ctx->inst, devs, VK_MAX_DEV, why, sizeof(why));
	int di = choose_device(devs, n, want);
	if (di < 0) {
		if (n == 0)
			snprintf(err, err_len, "%s", why);
		else
			snprintf(err, err_len, "device %d does not exist (%d usable Vulkan device(s))", want, n);
		ctx_destroy(ctx);
		return n == 0 ? ALICE_ERR_UNSUPPORTED : ALICE_ERR_INVALID;
	}
	ctx->phys = devs[di];
	ctx->dev_index = di < VK_MAX_DEV ? di : VK_MAX_DEV - 1;
	vkGetPhysicalDeviceProperties(ctx->phys, &ctx->props);
	vkGetPhysicalDeviceMemoryProperties(ctx->phys, &ctx->memprops);
	has_compute_queue(ctx->phys, &ctx->qfam);
	ctx->unified = is_unified(ctx->props.deviceType);
	/* tests: take the discrete-GPU path (device-only buffers, staging) on any device */
	const char *fs = getenv("ALICE_VK_FORCE_STAGING");
	ctx->force_staging = fs && *fs == '1';
	if (ctx->force_staging)
		ctx->unified = false;
	ctx->max_range = ctx->props.limits.maxStorageBufferRange;
	/* tests shrink it to exercise the sliced paths a 128 MiB-range device takes */
	const char *mr = getenv("ALICE_VK_MAX_RANGE");
	if (mr && strtoull(mr, NULL, 10) >= 4096 && strtoull(mr, NULL, 10) < ctx->max_range)
		ctx->max_range = strtoull(mr, NULL, 10);

	VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
	VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
						     .pNext = &sg};
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
	bool imp = vk_has_device_ext(ctx->phys, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	if (imp)
		sg.pNext = &hp;
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
	vkGetPhysicalDeviceProperties2(ctx->phys, &p2);
	ctx->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : ((uint64_t)1 << 31);
	/* tests cap weight buffers and imports (ALICE_VK_MAX_ALLOC) so a small
	 * model takes the split-weights load an 8B model takes on a device
	 * whose largest allocation is 4 GiB (the H200's) */
	ctx->max_weights = ctx->max_alloc;
	const char *ma = getenv("ALICE_VK_MAX_ALLOC");
	if (ma && strtoull(ma, NULL, 10) >= 65536 && strtoull(ma, NULL, 10) < ctx->max_alloc)
		ctx->max_weights = strtoull(ma, NULL, 10);
	/* ALICE_VK_FUSE=0: every node its own dispatches (comparisons, tests);
	 * a comma-separated list of norm, normq (norm with the rounded copy),
	 * rope, mv, mvq, gq (gate/up + GLU and attention rounding for the next
	 * mat-vec): only those fusions */
	const char *fz = getenv("ALICE_VK_FUSE");
	ctx->fuse = VK_FUSE_ALL;
	if (fz && fz[0] == '0')
		ctx->fuse = 0;
	else if (fz && *fz && strcmp(fz, "1")) {
		static const struct {
			const char *name;
			unsigned bits;
		} fz_names[] = {{"norm", VK_FUSE_NORM}, {"normq", VK_FUSE_NORM | VK_FUSE_NORMQ}, {"rope", VK_FUSE_ROPE},
				{"mv", VK_FUSE_MV}, {"mvq", VK_FUSE_MVQ}, {"gq", VK_FUSE_MV | VK_FUSE_GQ}};
		ctx->fuse = 0;
		for (const char *t = fz; *t;) {
			size_t n = strcspn(t, ",");
			for (size_t k = 0; k < sizeof(fz_names) / sizeof(fz_names[0]); k++)
				if (strlen(fz_names[k].name) == n && !strncmp(t, fz_names[k].name, n))
					ctx->fuse |= fz_names[k].bits;
			t += n + (t[n] == ',');
		}
	}
	const char *nosg = getenv("ALICE_VK_NO_SUBGROUP");
	ctx->subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
			      (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
			      (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) && !(nosg && *nosg == '1');
	/* import only where it saves a copy: on a discrete GPU, device memory is the one copy */
	ctx->host_import = imp && ctx->unified && hp.minImportedHostPointerAlignment > 0;
	ctx->import_align = hp.minImportedHostPointerAlignment;

	float prio = 1.0f;
	VkDeviceQueueCreateInfo qci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = ctx->qfam,
		.queueCount = 1,
		.pQueuePriorities = &prio,
	};
	const char *exts[6];
	uint32_t n_ext = 0;
	if (ctx->host_import)
		exts[n_ext++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	struct vk_coopmat_feats cmf;
	ctx->coopmat = coopmat_probe(ctx->inst, ctx->phys, sg.subgroupSize, &cmf);
	if (ctx->coopmat) {
		exts[n_ext++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
		exts[n_ext++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
		exts[n_ext++] = VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME;
	}
	/* ALICE_VK_COOPMAT=emu, where the device has none: the prefill GEMM on
	 * emulated fragments (its tiling, loads and decode tested on lavapipe) */
	const char *cme = getenv("ALICE_VK_COOPMAT");
	ctx->cm_emu = !ctx->coopmat && cme && strcmp(cme, "emu") == 0;
	/* doubles for the sampling ops' block sums (temp_sample.h's order) */
	VkPhysicalDeviceFeatures have, feats;
	memset(&feats, 0, sizeof(feats));
	vkGetPhysicalDeviceFeatures(ctx->phys, &have);
	const char *f64e = getenv("ALICE_VK_F64");
	ctx->f64 = have.shaderFloat64 && !(f64e && f64e[0] == '0');
	feats.shaderFloat64 = ctx->f64 ? VK_TRUE : VK_FALSE;
	VkPhysicalDeviceTimelineSemaphoreFeaturesKHR tlf;
	bool tl = vk_timeline_probe(ctx->phys, &tlf, true);
	if (tl)
		exts[n_ext++] = VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME;
	void *chain = tl ? (void *)&tlf : NULL;
	if (ctx->coopmat) {
		cmf.mm.pNext = chain;
		chain = &cmf.cm;
	}
	VkDeviceCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = chain,
		.pEnabledFeatures = &feats,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &qci,
		.enabledExtensionCount = n_ext,
		.ppEnabledExtensionNames = exts,
	};
	r = vkCreateDevice(ctx->phys, &dci, NULL, &ctx->dev);
	if (r != VK_SUCCESS) {
		snprintf(err, err_len, "vkCreateDevice(%s): %s", ctx->props.deviceName, vk_result_str(r));
		ctx->dev = VK_NULL_HANDLE;
		ctx_destroy(ctx);
		return ALICE_ERR_BACKEND;
	}
	vkGetDeviceQueue(ctx->dev, ctx->qfam, 0, &ctx->queue);
	if (ctx->host_import)
		ctx->get_host_ptr_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(
			ctx->dev, "vkGetMemoryHostPointerPropertiesEXT");
	if (!ctx->get_host_ptr_props)
		ctx->host_import = false;

	VkCommandPoolCreateInfo cpi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = ctx->qfam,
	};
	enum alice_status st = vk_check(ctx, vkCreateCommandPool(ctx->dev, &cpi, NULL, &ctx->cmdpool), "vkCreateCommandPool");
	if (st == ALICE_OK) {
		VkCommandBufferAllocateInfo cai = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
			.commandPool = ctx->cmdpool,
			.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
			.commandBufferCount = 1,
		};
		st = vk_check(ctx, vkAllocateCommandBuffers(ctx->dev, &cai, &ctx->cmd), "vkAllocateCommandBuffers");
	}
	if (tl)
		vk_timeline_init(ctx);
	if (st == ALICE_OK)
		st = vk_sync_init(ctx, &ctx->once);
	if (st == ALICE_OK)
		st = vk_pipe_init(ctx);
	if (st == ALICE_OK)
		st = vk_buffer_host(ctx, 256, &ctx->status);
	if (st == ALICE_OK)
		st = vk_buffer_host(ctx, 256, &ctx->dummy);
	if (st == ALICE_OK && (st = vk_buffer_alloc(ctx, VK_GQ_COUNTERS * 4ull, ALICE_BUFFER_COMPUTE, &ctx->gq_cnt)) == ALICE_OK)
		st = vk_buffer_clear(ctx, ctx->gq_cnt, 0, VK_GQ_COUNTERS * 4ull);
	if (st == ALICE_OK && !ctx->unified)
		st = vk_buffer_host(ctx, VK_STAGING_BYTES, &ctx->staging);
	if (st != ALICE_OK) {
		snprintf(err, err_len, "%s", ctx->err);
		ctx_destroy(ctx);
		return st;
	}
	memset(ctx->status->map, 0, 256);
	vk_prof_init(ctx);
	vk_log(1, "vulkan backend: %s (%s, Vulkan %u.%u, queue family %u), subgroup ops %s (size %u), %s%s%s, %s",
	       ctx->props.deviceName, type_name(ctx->props.deviceType), VK_API_VERSION_MAJOR(ctx->props.apiVersion),
	       VK_API_VERSION_MINOR(ctx->props.apiVersion), ctx->qfam, ctx->subgroup_arith ? "on" : "off", sg.subgroupSize,
	       ctx->unified ? "unified memory: weights held once in host-visible memory" : "discrete: weights uploaded through a bounded staging buffer",
	       ctx->host_import ? ", host-pointer import on" : "",
	       ctx->coopmat ? ", cooperative-matrix prefill GEMM" : ctx->cm_emu ? ", prefill GEMM on emulated cooperative matrices" : "",
	       ctx->tl ? "steps waited for on a timeline semaphore" : "steps waited for on fences");
	*out = ctx;
	return ALICE_OK;
}

static void vk_free_ctx(struct alice_backend_ctx *ctx)
{
	ctx_destroy(ctx);
}

static const char *vk_last_error(struct alice_backend_ctx *ctx)
{
	return ctx ? ctx->err : "no context";
}

static const struct alice_backend_vtable vk_vtable = {
	.abi_major = ALICE_BACKEND_ABI_MAJOR,
	.abi_minor = ALICE_BACKEND_ABI_MINOR,
	.size = sizeof(struct alice_backend_vtable),
	.name = "vulkan",
	.probe = vk_probe,
	.device_info = vk_device_info,
	.init = vk_init,
	.free = vk_free_ctx,
	.last_error = vk_last_error,
	.buffer_alloc = vk_buffer_alloc,
	.buffer_import = vk_buffer_import,
	.buffer_free = vk_buffer_free,
	.buffer_write = vk_buffer_write,
	.buffer_read = vk_buffer_read,
	.buffer_clear = vk_buffer_clear,
	.supports_op = vk_supports_op,
	.graph_compute = vk_graph_compute,
	.host_alloc = vk_host_alloc,
	.host_free = vk_host_free,
	.graph_launch = vk_graph_launch,
	.graph_wait = vk_graph_wait,
	.tensor_pack = vk_tensor_pack,
};

ALICE_BACKEND_EXPORT const struct alice_backend_vtable *alice_backend_entry(const struct alice_backend_host *host)
{
	g_host = alice_backend_host_accept(host);
	return &vk_vtable;
}

ALICE_BACKEND_EXPORT int alice_backend_score(void)
{
	char why[512];
	return vk_probe(why, sizeof(why)) > 0 ? 1 : 0;
}
