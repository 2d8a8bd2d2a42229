/* vk_internal.h — shared between the Vulkan backend's files (nothing here
 * is exported from the .so): the context, buffers, pipelines, and the
 * per-op recording functions. */
#ifndef ALICE_VK_INTERNAL_H
#define ALICE_VK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "alice/backend.h"
#include "alice/backend_check.h"
#include "alice/quant.h"

#define VK_HIDDEN __attribute__((visibility("hidden")))
#define VK_NBIND 9        /* dst, src0..src5, status, gq.glsl's counters */
#define VK_SLOT_STATUS 7
#define VK_SLOT_CNT 8
#define VK_PUSH_BYTES 128 /* the minimum maxPushConstantsSize */
#define VK_SCRATCH_RING 4
#define VK_STAGING_BYTES (32u << 20) /* bounded staging buffer for discrete GPUs */
#define VK_GATHER_BYTES (4u << 20)   /* per launch slot: small writes gathered into the next step */
#define VK_GATHER_MAX (1u << 20)     /* a larger write goes its own way */
#define VK_GATHER_REGIONS 64

struct alice_buffer {
	VkBuffer buf;
	VkDeviceMemory mem;
	uint64_t size;     /* bytes the caller sees */
	uint64_t base;     /* caller's byte 0 sits at this offset in buf (imports) */
	uint64_t vk_size;  /* size of buf */
	uint8_t *map;      /* host mapping of buf's byte 0, or NULL (device-only) */
	bool coherent;
	bool cached;   /* host reads of map are cached */
	bool imported;
	uint32_t usage;
};

/* Pipelines are made on first use, keyed by shader name. */
struct vk_pipeline {
	const char *name;
	VkPipeline pipe;
};

#define VK_MAX_PIPES 160

/* vk_launch.c: a write gathered for the next step's head */
struct vk_gathered {
	struct alice_buffer *dst;
	uint64_t off, size;
	uint64_t src;        /* its bytes in the slot's upload area */
	bool after_overlap;  /* overlaps an earlier one: a barrier before it */
};
/* a read finished at the wait: from the read-back area, or staged when too large */
struct vk_late {
	void *dst;
	struct alice_buffer *src;
	uint64_t off, size, rb_off;
	bool staged;
};
/* a submission's completion (vk_sync.c): a value of the context's timeline
 * semaphore, or a fence where the device has no timeline */
struct vk_sync {
	VkFence fence;
	uint64_t value;
};
/* one of the two launch slots */
struct vk_launch {
	struct vk_sync sync;
	VkCommandBuffer hcmd, tcmd;  /* head (gathered writes), tail (reads back) */
	struct alice_buffer *up, *rb;
	struct vk_gathered g[VK_GATHER_REGIONS];
	uint32_t n_g;
	uint64_t up_used;
	struct vk_late *late;
	uint32_t n_late, late_cap;
	bool graph;       /* the graph's command buffer was in the submission */
	bool done;        /* seen finished before graph_wait */
	bool has_staged;  /* reads left for a staged copy after it finished */
	enum alice_status st;
	/* what hcmd / tcmd hold, so a step like the last submits them again */
	bool h_ok, t_ok, t_staged;
	uint32_t h_n, t_n, t_cap;
	struct vk_gathered h_g[VK_GATHER_REGIONS];
	struct alice_read *t_reads;
};

struct alice_backend_ctx {
	char err[512];
	bool lost; /* VK_ERROR_DEVICE_LOST seen: every later call fails */
	int dev_index;

	VkInstance inst;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t qfam;
	VkPhysicalDeviceProperties props;
	VkPhysicalDeviceMemoryProperties memprops;
	bool unified;       /* integrated GPU / CPU device: host-visible memory is device memory */
	bool force_staging; /* ALICE_VK_FORCE_STAGING=1: never map device buffers (tests the discrete path) */
	bool subgroup_arith;/* subgroupAdd/Max in compute shaders */
	unsigned fuse;      /* chains of nodes as one dispatch (vk_fuse.c): VK_FUSE_* */
	bool coopmat;       /* prefill GEMM on NV cooperative matrices (mmc.comp; ALICE_VK_COOPMAT=0: off) */
	bool f64;           /* shaderFloat64 on: SAMPLE_TEMP and LOGSUMEXP (ALICE_VK_F64=0: off) */
	bool cm_emu;        /* ALICE_VK_COOPMAT=emu: mmc.comp with emulated cooperative matrices (cmemu.glsl; tests) */
	bool host_import;   /* VK_EXT_external_memory_host enabled */
	uint64_t import_align;
	uint64_t max_range;  /* maxStorageBufferRange */
	uint64_t max_alloc;  /* maxMemoryAllocationSize */
	uint64_t max_weights; /* the same, or less for weight buffers and imports (ALICE_VK_MAX_ALLOC, tests) */
	PFN_vkGetMemoryHostPointerPropertiesEXT get_host_ptr_props;
	uint64_t bytes_held[3]; /* per usage: device memory we allocated */
	uint64_t bytes_imported;

	VkCommandPool cmdpool;
	VkCommandBuffer cmd;
	struct vk_sync once; /* ctx->cmd's submissions */
	VkSemaphore tl;      /* the timeline (null: fences) */
	uint64_t tl_last;    /* the last value a submission will signal */
	PFN_vkWaitSemaphoresKHR sem_wait;
	PFN_vkGetSemaphoreCounterValueKHR sem_value;
	VkPipelineCache pcache;
	VkDescriptorSetLayout dsl;
	VkPipelineLayout playout;
	VkDescriptorPool dpool;
	uint32_t dpool_cap;
	struct vk_pipeline pipes[VK_MAX_PIPES];
	int n_pipes;

	struct alice_buffer *staging; /* host-visible, VK_STAGING_BYTES (discrete only) */
	struct alice_buffer *status;  /* 16 bytes, host-visible: shader error reports */
	struct alice_buffer *dummy;   /* bound to unused slots */
	struct alice_buffer *gq_cnt;  /* VK_GQ_COUNTERS words, zero (mv.comp's GQ) */

	/* MUL_MAT activations rounded for the weight type (actq.comp): a ring of
	 * VK_SCRATCH_RING regions so neighbouring matmuls need no barrier */
	struct alice_buffer *scratch;
	uint64_t scratch_region;
	uint32_t scratch_next;
	/* which activations each region holds, so Q/K/V (gate/up) matmuls of
	 * one input round it once; dropped when a node writes over the input */
	struct vk_actq_entry {
		bool valid;
		uint32_t fmt;
		struct alice_tensor x;
	} actq[VK_SCRATCH_RING];

	/* MUL_MAT row regimes (src2) of the graph being recorded, read first */
#define VK_MAX_REGIMES 4
	struct vk_regime {
		const struct alice_buffer *buf;
		uint64_t offset;
		int64_t M, cap;
		int32_t *v;
	} regimes[VK_MAX_REGIMES];
	int n_regimes;

	/* recording state of one graph_compute: what the dispatches since the
	 * last barrier touched (a later one that conflicts gets a barrier) */
#define VK_MAX_PENDING 64
	struct vk_pending {
		VkBuffer buf;
		uint64_t lo, hi;
		bool write;
	} pend[VK_MAX_PENDING];
	int npend;
	uint32_t n_dispatch;
	bool bar_next; /* the next logged dispatch waits on the earlier ones */
	/* the graph's dispatches as logged (vk_rec.c); prev: those recorded in
	 * gcmd, submitted again while a graph logs the same (decode steps) */
	struct vk_rec *log, *prev;
	uint32_t log_n, log_cap, prev_n, prev_cap;
	VkCommandBuffer gcmd;
	bool gcmd_ok;
	/* the graph gcmd holds (vk_rec_same_graph) */
	struct alice_node *g_nodes;
	struct alice_tensor *g_tensors;
	uint32_t g_n_nodes, g_n_tensors;
	bool g_keep;
	uint64_t n_replayed, n_recorded;
	struct vk_prof *prof; /* ALICE_VK_PROFILE=1 (vk_prof.c), else NULL */

	/* launches in flight (vk_launch.c): lq[lq_old] is the oldest of lq_n */
	struct vk_launch lq[2];
	int lq_old, lq_n;
	uint64_t rb_max; /* reads copied back per launch */
	int spin_us;     /* a step's completion is polled this long before a blocking wait */
	struct alice_buffer **ha; /* host_alloc buffers */
	int n_ha, ha_cap;
};

/* One logged dispatch: everything its recording depends on, compared
 * byte for byte (entries are zeroed first, so padding compares too). */
struct vk_rec {
	VkPipeline pipe;
	uint32_t gx, gy, push_bytes;
	uint8_t barrier;
	char name[27];
	VkDescriptorBufferInfo bi[VK_NBIND];
	uint8_t push[VK_PUSH_BYTES];
};

/* vk.c */
enum alice_status vk_fail(struct alice_backend_ctx *ctx, enum alice_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4))) VK_HIDDEN;
/* Turn a VkResult into a failure with "what: VK_ERROR_..." (device lost is remembered). */
enum alice_status vk_check(struct alice_backend_ctx *ctx, VkResult r, const char *what) VK_HIDDEN;
const char *vk_result_str(VkResult r) VK_HIDDEN;
bool vk_has_device_ext(VkPhysicalDevice pd, const char *name) VK_HIDDEN;
/* Add to the process-wide bytes-held counters device_info reports. */
void vk_account(struct alice_backend_ctx *ctx, int64_t held, int64_t imported) VK_HIDDEN;
void vk_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3))) VK_HIDDEN;

/* vk_sync.c */
bool vk_timeline_supported(VkPhysicalDevice pd) VK_HIDDEN;
bool vk_timeline_probe(VkPhysicalDevice pd, VkPhysicalDeviceTimelineSemaphoreFeaturesKHR *f, bool use_env) VK_HIDDEN;
void vk_timeline_init(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_timeline_free(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* a fence for s where the context has no timeline */
enum alice_status vk_sync_init(struct alice_backend_ctx *ctx, struct vk_sync *s) VK_HIDDEN;
void vk_sync_free(struct alice_backend_ctx *ctx, struct vk_sync *s) VK_HIDDEN;
/* vkQueueSubmit of si that marks s when it finishes */
enum alice_status vk_sync_submit(struct alice_backend_ctx *ctx, VkSubmitInfo *si, struct vk_sync *s) VK_HIDDEN;
/* until s has finished: polled for spin_us, then a blocking wait */
enum alice_status vk_sync_wait(struct alice_backend_ctx *ctx, const struct vk_sync *s, int spin_us) VK_HIDDEN;

/* vk_mem.c */
enum alice_status vk_buffer_alloc(struct alice_backend_ctx *ctx, uint64_t size, uint32_t usage,
				  struct alice_buffer **out) VK_HIDDEN;
enum alice_status vk_buffer_import(struct alice_backend_ctx *ctx, const void *host, uint64_t size,
				   struct alice_buffer **out) VK_HIDDEN;
void vk_buffer_free(struct alice_backend_ctx *ctx, struct alice_buffer *buf) VK_HIDDEN;
enum alice_status vk_buffer_write(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				  const void *src, uint64_t size) VK_HIDDEN;
enum alice_status vk_buffer_read(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				 void *dst, uint64_t size) VK_HIDDEN;
enum alice_status vk_buffer_clear(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				  uint64_t size) VK_HIDDEN;
/* Internal host-visible buffer (staging, status). */
enum alice_status vk_buffer_host(struct alice_backend_ctx *ctx, uint64_t size, struct alice_buffer **out) VK_HIDDEN;
/* Begin/submit-and-wait a one-off command buffer on ctx->cmd. */
enum alice_status vk_cmd_begin(struct alice_backend_ctx *ctx) VK_HIDDEN;
enum alice_status vk_cmd_submit_wait(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* Submit an ended command buffer and wait for it. */
enum alice_status vk_submit_wait(struct alice_backend_ctx *ctx, VkCommandBuffer cmd) VK_HIDDEN;

/* The read itself (vk_buffer_read first settles launches and gathered writes). */
enum alice_status vk_buffer_read_now(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				     void *dst, uint64_t size) VK_HIDDEN;

/* vk_launch.c: steps as one submission each, up to two in flight */
/* Gather a small write into the next step's head (false: write it now). */
bool vk_launch_gather(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t off, const void *src,
		      uint64_t size) VK_HIDDEN;
/* A read served from the gathered writes when one covers it. */
bool vk_launch_lookup(struct alice_backend_ctx *ctx, const struct alice_buffer *buf, uint64_t off, void *dst,
		      uint64_t size) VK_HIDDEN;
/* Wait for the launches in flight (their results stay for graph_wait). */
enum alice_status vk_launch_settle(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* ... and submit the gathered writes: device memory is then as written. */
enum alice_status vk_launch_quiesce(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* Forget gathered writes into a buffer being freed. */
void vk_launch_drop(struct alice_backend_ctx *ctx, const struct alice_buffer *buf) VK_HIDDEN;
/* Submit head + gcmd (when graph) + tail with the reads, without waiting. */
enum alice_status vk_launch_submit(struct alice_backend_ctx *ctx, bool graph, const struct alice_read *reads,
				   uint32_t n_reads) VK_HIDDEN;
enum alice_status vk_graph_wait(struct alice_backend_ctx *ctx) VK_HIDDEN;
void *vk_host_alloc(struct alice_backend_ctx *ctx, uint64_t size) VK_HIDDEN;
void vk_host_free(struct alice_backend_ctx *ctx, void *p) VK_HIDDEN;
void vk_launch_free(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* Drop the recorded heads and tails (a buffer they name is being freed). */
void vk_launch_forget(struct alice_backend_ctx *ctx) VK_HIDDEN;

/* vk_rec.c: log a dispatch; record the log into gcmd unless gcmd holds
 * the same log; forget gcmd (buffers freed) */
enum alice_status vk_rec_add(struct alice_backend_ctx *ctx, const struct vk_rec *r) VK_HIDDEN;
enum alice_status vk_rec_prepare(struct alice_backend_ctx *ctx) VK_HIDDEN;
bool vk_rec_same_graph(const struct alice_backend_ctx *ctx, const struct alice_graph *g) VK_HIDDEN;
void vk_rec_keep_graph(struct alice_backend_ctx *ctx, const struct alice_graph *g, bool keep) VK_HIDDEN;
void vk_rec_forget(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_rec_free(struct alice_backend_ctx *ctx) VK_HIDDEN;

/* vk_prof.c: ALICE_VK_PROFILE=1 timestamps (no-ops when off) */
void vk_prof_init(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_prof_free(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_prof_start(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_prof_record(struct alice_backend_ctx *ctx, VkCommandBuffer cmd) VK_HIDDEN;
void vk_prof_barrier(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_prof_dispatch(struct alice_backend_ctx *ctx, VkCommandBuffer cmd, const char *shader) VK_HIDDEN;
void vk_prof_record_end(struct alice_backend_ctx *ctx, VkCommandBuffer cmd) VK_HIDDEN;
void vk_prof_submit(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_prof_end(struct alice_backend_ctx *ctx) VK_HIDDEN;
double vk_prof_now(const struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_prof_sync(struct alice_backend_ctx *ctx, double t0) VK_HIDDEN;

/* vk_pipe.c */
enum alice_status vk_pipe_init(struct alice_backend_ctx *ctx) VK_HIDDEN;
void vk_pipe_free(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* The pipeline for shader `name` (made on first use), or VK_NULL_HANDLE with ctx->err. */
VkPipeline vk_pipe_get(struct alice_backend_ctx *ctx, const char *name) VK_HIDDEN;
/* Whether the build embeds a shader of that name (without the _sg form). */
bool vk_shader_built(const char *name) VK_HIDDEN;
/* Make room for n descriptor sets in this graph (resets the pool). */
enum alice_status vk_desc_reserve(struct alice_backend_ctx *ctx, uint32_t n) VK_HIDDEN;

/* A tensor bound to a slot: the descriptor range and the byte offset of the
 * tensor inside it (what shaders add to every address). */
struct vk_bind {
	VkBuffer buf;
	VkDeviceSize off, range;
	uint32_t rel; /* tensor byte 0 relative to off */
};

/* vk_graph.c: record one dispatch (binds, push constants, a barrier before
 * it where it depends on earlier ones). Slot 0 is written; so are the slots
 * in extra_writes (bit i = binds[i], for sources updated in place). */
enum alice_status vk_dispatch_rw(struct alice_backend_ctx *ctx, const char *shader, const struct vk_bind *binds,
				 int n_binds, uint32_t extra_writes, const void *push, uint32_t push_bytes,
				 uint32_t groups) VK_HIDDEN;
static inline enum alice_status vk_dispatch(struct alice_backend_ctx *ctx, const char *shader,
					    const struct vk_bind *binds, int n_binds, const void *push,
					    uint32_t push_bytes, uint32_t groups)
{
	return vk_dispatch_rw(ctx, shader, binds, n_binds, 0, push, push_bytes, groups);
}
/* Bind bytes [off, off + size) of buffer buf. */
enum alice_status vk_bind_raw(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t off,
			      uint64_t size, struct vk_bind *b) VK_HIDDEN;
/* Scratch bytes MUL_MAT node n needs for its rounded activations (0: none). */
uint64_t vk_mm_scratch_need(const struct alice_graph *g, const struct alice_node *n) VK_HIDDEN;
/* Scratch bytes a sampling node needs (TOPK: its chunks' candidates;
 * SAMPLE_TEMP, LOGSUMEXP: block sums and maxima; 0: none). */
uint64_t vk_sample_scratch_need(const struct alice_graph *g, const struct alice_node *n) VK_HIDDEN;
/* A scratch region for an op's own intermediate: its byte offset (the
 * rounded activations it held are forgotten). */
uint64_t vk_scratch_claim(struct alice_backend_ctx *ctx) VK_HIDDEN;
/* Bind tensor t (checking its extent fits one descriptor range). */
enum alice_status vk_bind_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t,
				 struct vk_bind *b) VK_HIDDEN;
bool vk_supports_op(struct alice_backend_ctx *ctx, const struct alice_graph *g,
		    const struct alice_node *node) VK_HIDDEN;
/* A node's arguments, checked (the graph was checked whole before recording). */
enum alice_status vk_check_node(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				const struct alice_node *n, struct alice_op_args *a) VK_HIDDEN;
/* Forget rounded activations held for memory node a writes. */
void vk_actq_invalidate(struct alice_backend_ctx *ctx, const struct alice_op_args *a) VK_HIDDEN;
/* actq.comp's format for a weight type (0: read as F32), its block size in bs. */
uint32_t vk_act_fmt(uint32_t type, uint32_t *bs) VK_HIDDEN;
/* A scratch region now holding x rounded as fmt (by a fused shader): its byte
 * offset; the MUL_MATs reading x take it from there. */
uint64_t vk_actq_claim(struct alice_backend_ctx *ctx, const struct alice_tensor *x, uint32_t fmt) VK_HIDDEN;
/* Consecutive MUL_MATs a[0..n) of one input (and glu, their GLU, n = 2)
 * as one dispatch: whether mv.comp's MULTI / GLU form (decode) or mmc.comp's
 * MULTI form (prefill, no GLU) runs them as their own dispatches would (the
 * same rows, the same order), and doing it. */
bool vk_mm_multi_ok(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n,
		    const struct alice_op_args *glu) VK_HIDDEN;
enum alice_status vk_mm_multi(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n,
			      const struct alice_op_args *glu, bool gq) VK_HIDDEN;
/* gq for vk_mm_multi: the gate/up + GLU dispatch also rounds the GLU output
 * for mm, the MUL_MAT reading it next (no actq dispatch before mm) */
bool vk_mm_gq_ok(struct alice_backend_ctx *ctx, const struct alice_op_args *a, const struct alice_op_args *glu,
		 const struct alice_op_args *mm) VK_HIDDEN;
/* forget a rounded copy of exactly x */
void vk_actq_drop(struct alice_backend_ctx *ctx, const struct alice_tensor *x) VK_HIDDEN;
/* Whether MUL_MAT a reads its whole x rounded by actq (where a fused shader
 * may round it instead): not its row runs, not the cooperative-matrix GEMM. */
bool vk_mm_reads_rounded(struct alice_backend_ctx *ctx, const struct alice_op_args *a) VK_HIDDEN;
/* ctx->fuse: [ADD] + RMS_NORM, the rounding for the next MUL_MAT in it too,
 * ROPE + KV_WRITE, mat-vecs of one input */
#define VK_FUSE_NORM 1u
#define VK_FUSE_NORMQ 2u
#define VK_FUSE_ROPE 4u
#define VK_FUSE_MV 8u
#define VK_FUSE_MVQ 16u /* a decode mat-vec rounds its own activations (no actq dispatch) */
#define VK_FUSE_GQ 32u	/* gate/up + GLU, attention round their output for the next mat-vec (no actq dispatch) */
#define VK_FUSE_ALL 63u
/* mv.comp GQ's block counters (one per 256-block and column), zero between dispatches */
#define VK_GQ_COUNTERS 65536u
/* vk_fuse.c: an RMS_NORM alone on the fused norm's shader where it fits
 * (*done), so a norm is the same code fused or not */
enum alice_status vk_norm_addnorm(const struct alice_op_args *a, bool *done) VK_HIDDEN;
/* vk_fuse.c: record nodes i, i+1, ... as one dispatch where they form a
 * chain a fused shader computes alike; *used = how many (0: none). */
enum alice_status vk_fuse(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
			  const struct alice_op_args *a, uint32_t *used) VK_HIDDEN;
enum alice_status vk_graph_compute(struct alice_backend_ctx *ctx, const struct alice_graph *g) VK_HIDDEN;
enum alice_status vk_graph_launch(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				  const struct alice_read *reads, uint32_t n_reads) VK_HIDDEN;

/* vk_pack.c: the vtable's tensor_pack (Q8_0 / Q6_K into Q8_0P / Q6_KP) */
enum alice_status vk_tensor_pack(struct alice_backend_ctx *ctx, struct alice_tensor *t) VK_HIDDEN;
/* The shaders' name for a weight's type (packed forms included). */
const char *vk_wtype_name(const struct alice_tensor *w) VK_HIDDEN;

/* per-op recording (vk_ops_*.c): validate shapes, bind, dispatch */
typedef enum alice_status (*vk_op_fn)(const struct alice_op_args *a);
enum alice_status vk_op_mul_mat(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_mm_read_regimes(struct alice_backend_ctx *ctx, const struct alice_graph *g) VK_HIDDEN;
enum alice_status vk_op_get_rows(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_ew(const struct alice_op_args *a) VK_HIDDEN; /* ADD MUL SCALE SOFTCAP GLU UNARY COPY */
enum alice_status vk_op_norm(const struct alice_op_args *a) VK_HIDDEN; /* RMS_NORM L2_NORM */
enum alice_status vk_op_rope(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_attention(const struct alice_op_args *a) VK_HIDDEN;
/* ATTENTION, its output also rounded for the MUL_MAT reading it as gqx
 * where attn.comp takes it (*gq; vk_fuse.c) */
enum alice_status vk_attention(const struct alice_op_args *a, const struct alice_tensor *gqx, bool *gq) VK_HIDDEN;
enum alice_status vk_op_kv_write(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_ssm_conv(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_gated_delta_net(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_topk(const struct alice_op_args *a) VK_HIDDEN; /* vk_ops_sample.c */
enum alice_status vk_op_token_mask(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_feed(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_logit_adjust(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_sample_temp(const struct alice_op_args *a) VK_HIDDEN;
enum alice_status vk_op_logsumexp(const struct alice_op_args *a) VK_HIDDEN;

static inline int64_t vk_nelem(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static inline bool vk_same_shape(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

#endif
