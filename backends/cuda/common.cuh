/* common.cuh — shared by the CUDA backend's files (nothing here is exported
 * from the .so): the context and buffer structs, the status-returning
 * CUDA_CHECK, tensor helpers and the launch functions of each op family.
 *
 * Every op launcher validates its node on the host, enqueues kernels on
 * ctx->stream and returns a status; a CUDA error fails the call with
 * ctx->err set, never aborts the process. Launchers must not synchronize or
 * read device memory: graph_compute may be capturing them into a CUDA graph. */
#ifndef ALICE_CUDA_COMMON_CUH
#define ALICE_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "alice/backend.h"
#include "alice/quant.h"
}
#include "alice/backend_check.h"

#define CU_HIDDEN __attribute__((visibility("hidden")))

struct alice_buffer {
	uint8_t *dev;
	uint64_t size;
	uint32_t usage;
};

/* Captured step graphs, one per signature seen (decode steps of different
 * batch sizes each keep theirs), least recently used replaced. A server's
 * steps take many row counts (1 to its busy slots, plus one-token prefills
 * of cached prompts), and a capture costs milliseconds: enough entries to
 * keep them all. */
#define CU_GRAPHS 96
struct cu_graph_entry {
	uint8_t *sig;          /* signature of the graph (see backend.cu); sig_len 0: free */
	size_t sig_len, sig_cap;
	int repeats;           /* calls with this signature */
	cudaGraphExec_t exec;  /* instantiated replay of that graph, or NULL */
	uint64_t scratch_gen;  /* scratch generation the exec was captured with */
	uint64_t used;         /* tick of the last call */
};
struct cu_graph_cache {
	struct cu_graph_entry e[CU_GRAPHS];
	int cur;       /* the entry of this call's graph, -1 none */
	uint64_t tick;
};

/* quantized decode activations staged in scratch (alice_backend_ctx.xq) */
struct cu_xq {
	const uint8_t *x; /* NULL: none valid */
	int64_t nb0, nb1, K, M;
	int qk;
	int32_t tid; /* the graph tensor they were made from */
};

/* inputs.cu: one small input write, src in the mapped staging ring */
struct cu_copy {
	uint8_t *dst;
	const uint8_t *src;
	uint64_t size;
};
#define CU_PEND_MAX 32
#define CU_GATHER_MAX ((uint64_t)64 << 10)
/* the records travel as k_gather's parameter (768 bytes): no read of them
 * over PCIe before the data's */
struct cu_gather {
	struct cu_copy c[CU_PEND_MAX];
};

/* a graph_launch in flight (alice_backend_ctx.lq) */
struct cu_launch {
	cudaEvent_t ev;
	size_t half; /* the staging half its inputs used */
	const struct alice_read *late;
	uint32_t n_late;
};

struct alice_backend_ctx {
	int device;
	int n_sm;
	cudaStream_t stream;
	cublasHandle_t cublas;
	void *cublas_ws;
	char err[512];
	/* scratch: one region reused by every op (ops run in stream order) */
	uint8_t *scratch;
	size_t scratch_size;
	uint64_t scratch_gen; /* bumped on every reallocation */
	unsigned *cnt;        /* zeroed counters; every user leaves them at 0 */
	/* fattn.cu: the flash-attention regime byte per token, made by a
	 * graph's first ATTENTION and kept for its other layers (same ranges
	 * tensor, same graph_compute: fa_key) */
	uint8_t *fa_reg;
	size_t fa_reg_n;
	struct {
		const uint8_t *rng;
		int64_t n, nb0, nb1;
		uint64_t compute;
	} fa_key;
	/* kernels that meet bad input data (a row id, cell or cell range out
	 * of range) set bits here; graph_compute fails the call then */
	int *dflag, *hflag;
	size_t cnt_n;
	bool use_graphs;
	bool fuse; /* one launch for mat-vecs sharing their input */
	bool mix_logged; /* matmul.cu: a launch of two weight types was logged */
	bool rope_mv; /* ROPE / KV_WRITE in the Q/K/V mat-vec (ALICE_CUDA_ROPE_MV=0: off) */
	bool rope_logged; /* backend.cu: a Q/K/V launch that rotated q / k was logged */
	bool att_xq; /* the o-proj's rounding in the attention kernel (ALICE_CUDA_ATT_XQ=1) */
	bool xq_logged; /* backend.cu: an attention launch that rounded for the o-proj was logged */
	/* backend.cu: the next Q/K/V mat-vec launch may take ROPE and KV_WRITE
	 * (rope.cuh); NULL between those calls; rope_taken: it did */
	struct mmv_rope *rope_req;
	bool rope_taken;
	struct cu_graph_cache gc;
	/* pinned staging for small buffer_write / buffer_read: writes are
	 * enqueued without a host sync (the stream orders them before the
	 * next graph); the ring is reset whenever the stream is idle */
	uint8_t *stage;
	size_t stage_size, stage_used;
	const uint8_t *stage_dev; /* the ring's device address (NULL: not mapped, no gather) */
	/* inputs.cu: small writes not yet on the stream, then the records of
	 * those the next graph_compute copies (one k_gather at its head) */
	struct cu_copy pend[CU_PEND_MAX];
	int n_pend;
	struct cu_gather gather;
	int gather_n;
	struct cu_prof *prof; /* ALICE_CUDA_PROFILE=1, else NULL */
	struct cu_steps *steps; /* ALICE_CUDA_PROFILE=2, else NULL */
	/* Decode activations quantized for the mat-vecs (mmvq.cu) live in
	 * scratch at xq_off, past every op's own scratch. xq says whose they
	 * are, so the next mat-vecs of the same tensor (V after Q/K, the
	 * launch after a norm that emitted them) skip quantizing again;
	 * launch_all clears it before any other op (x.x = NULL). */
	size_t xq_off;
	struct cu_xq xq;
	int32_t xq_cur; /* tensor id of the activations of the group being launched */
	/* ALICE_CUDA_INJECT_FAULT=N (tests, backend.cu): the Nth graph_compute
	 * meets a real CUDA launch error at its first node */
	uint64_t n_compute, fault_at;
	/* graph_launch .. graph_wait: up to two launches in flight, the oldest
	 * lq[lq_old]. Each has its event (after its reads and its copy of the
	 * flag word, hflag[1 + slot]), the staging half its inputs used, and
	 * its reads into memory that is not page-locked (made after its wait).
	 * Small writes go to the half at stage_off; a launch moves them to the
	 * other, so the next step's inputs never overwrite those a launch in
	 * flight still reads. */
	struct cu_launch lq[2];
	int lq_n, lq_old;
	size_t stage_off;
	struct cu_wcache *wc; /* wcache.cu: F16 copies of quantized weights, or NULL */
	bool gemm_group; /* matmul.cu: a prefill's products of one input as one GEMM (ALICE_CUDA_GEMM_GROUP=0: off) */
};

enum alice_status cu_fail(struct alice_backend_ctx *ctx, enum alice_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4))) CU_HIDDEN;
/* a line through the host's log (level 1: info) */
void cu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3))) CU_HIDDEN;

/* wcache.cu: F16 copies of quantized weights for the prefill GEMM. find: the
 * copy of (w, nb1, N, K, kt) or NULL; add: room for a new one (the caller
 * fills it) or NULL (not a weight buffer's tensor, past the budget); drop:
 * the copies of weights overlapping a byte range; release: all of them, no
 * more made (true if any were held: memory to retry an allocation with). */
const __half *cu_wcache_find(struct alice_backend_ctx *ctx, const uint8_t *w, int64_t nb1, int64_t N, int64_t K,
			     uint32_t kt) CU_HIDDEN;
__half *cu_wcache_add(struct alice_backend_ctx *ctx, const struct alice_tensor *t, const uint8_t *w, int64_t nb1,
		      int64_t N, int64_t K, uint32_t kt) CU_HIDDEN;
/* Groups: one buffer for members m[0..n) (rows in order); find_group: the
 * copy of exactly these members; add_group: room for it (copies a member
 * had alone are dropped first), or NULL. */
#define CU_WC_GROUP 3
struct cu_wc_member {
	const uint8_t *w;
	int64_t nb1, N;
	uint32_t kt;
};
const __half *cu_wcache_find_group(struct alice_backend_ctx *ctx, const struct cu_wc_member *m, int n,
				   int64_t K) CU_HIDDEN;
__half *cu_wcache_add_group(struct alice_backend_ctx *ctx, const struct alice_tensor *const *t,
			    const struct cu_wc_member *m, int n, int64_t K) CU_HIDDEN;
void cu_wcache_drop(struct alice_backend_ctx *ctx, const uint8_t *lo, uint64_t len) CU_HIDDEN;
bool cu_wcache_release(struct alice_backend_ctx *ctx) CU_HIDDEN;
void cu_wcache_free(struct alice_backend_ctx *ctx) CU_HIDDEN;

/* inputs.cu: cu_inputs_take records a small write (false: write it
 * otherwise); cu_inputs_prepare makes the records ctx->gather, the copy at
 * the head of the next launches; cu_inputs_launch enqueues it;
 * cu_inputs_flush enqueues everything pending (before any other use of the
 * stream or the ring). */
bool cu_inputs_take(struct alice_backend_ctx *ctx, uint8_t *dst, const void *src, uint64_t size) CU_HIDDEN;
void cu_inputs_prepare(struct alice_backend_ctx *ctx) CU_HIDDEN;
enum alice_status cu_inputs_launch(struct alice_backend_ctx *ctx) CU_HIDDEN;
enum alice_status cu_inputs_flush(struct alice_backend_ctx *ctx) CU_HIDDEN;
/* pack.cu: the vtable's tensor_pack */
enum alice_status cu_tensor_pack(struct alice_backend_ctx *ctx, struct alice_tensor *t) CU_HIDDEN;

/* A failed CUDA call fails the enclosing function with a message naming it. */
#define CUDA_CHECK(ctx, call)                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			return cu_fail((ctx), ALICE_ERR_BACKEND, "%s failed: %s (%s:%d)", #call,   \
				       cudaGetErrorString(e_), __FILE__, __LINE__);                \
	} while (0)

/* After a kernel launch: a launch error (bad config, sticky fault) fails the call. */
#define CUDA_LAUNCH_CHECK(ctx, what) CUDA_CHECK(ctx, cudaGetLastError())

#define CU_FLAG_ROW_ID 1
#define CU_FLAG_RANGE 2
#define CU_FLAG_CELL 4
#define CU_FLAG_SEQ 8 /* SSM_CONV / GATED_DELTA_NET sequence id outside the state */

/* ---- node arguments ---- */

static inline uint8_t *tdata(const struct alice_tensor *t)
{
	return t->buf->dev + t->offset;
}

/* A weight's kernel type: its alice_type, or the packed form tensor_pack
 * rewrote it to (pack.cu). Templates and dispatchers take the kernel type;
 * checks on the logical type (activation rounding, sizes) keep t->type. */
#define T_Q8_0P 1001 /* Q8_0, per 256 values: the 8 blocks' quants, then their 8 fp16 scales */
#define T_Q6_KP 1002 /* Q6_K, per 2048 values: 8 x 192 quant bytes, 8 x 16 scales, 8 d's */
static inline uint32_t cu_ktype(const struct alice_tensor *t)
{
	if (!(t->flags & ALICE_TENSOR_PACKED))
		return t->type;
	return t->type == ALICE_TYPE_Q8_0 ? T_Q8_0P : t->type == ALICE_TYPE_Q6_K ? T_Q6_KP : t->type;
}

/* A packed tensor read through a view must still be whole, aligned runs
 * (the packers only pack such tensors; views of part of a run are refused,
 * never read wrong). */
static inline bool cu_packed_view_ok(const struct alice_tensor *t)
{
	const uint32_t kt = cu_ktype(t);
	const int64_t run = kt == T_Q8_0P ? 256 : kt == T_Q6_KP ? 2048 : 0;
	return !run || (t->ne[0] % run == 0 && t->nb[1] % 16 == 0 && ((uintptr_t)(t->buf->dev + t->offset) & 15) == 0);
}

static inline const char *cu_ktype_name(uint32_t kt)
{
	return kt == T_Q8_0P ? "Q8_0 (packed)" : kt == T_Q6_KP ? "Q6_K (packed)" : alice_type_name(kt);
}

static inline int64_t tnelem(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static inline bool tcontig(const struct alice_tensor *t, int64_t esize)
{
	return t->nb[0] == esize && t->nb[1] == t->nb[0] * t->ne[0] && t->nb[2] == t->nb[1] * t->ne[1] &&
	       t->nb[3] == t->nb[2] * t->ne[2];
}

/* Shape and strides of a 4-D strided tensor passed to kernels by value. */
struct cu_view {
	int64_t ne[4];
	int64_t nb[4];
};

static inline struct cu_view cu_view_of(const struct alice_tensor *t)
{
	struct cu_view v;
	for (int i = 0; i < 4; i++) {
		v.ne[i] = t->ne[i];
		v.nb[i] = t->nb[i];
	}
	return v;
}

/* ATTENTION's block table (backend.h 1.4, src4): virtual cell c lives in
 * physical cell tbl[c >> sh] << sh | (c & (2^sh - 1)); tbl NULL = the
 * identity (no src4). n_blk: physical blocks (n_cells >> sh). */
struct cu_pages {
	const int32_t *tbl;
	int sh;
	int32_t n_blk;
};

/* The physical cell of virtual cell c, which a token's range covers: an
 * entry outside the pool raises CU_FLAG_RANGE (the step fails) and reads
 * block 0, so no access leaves the cache. */
__device__ static inline int64_t cu_pcell(const struct cu_pages &pg, int64_t c, int *flag)
{
	if (!pg.tbl)
		return c;
	int32_t b = pg.tbl[c >> pg.sh];
	if (b < 0 || b >= pg.n_blk) {
		atomicOr(flag, CU_FLAG_RANGE);
		b = 0;
	}
	return ((int64_t)b << pg.sh) | (c & (((int64_t)1 << pg.sh) - 1));
}

/* The same for a cell a kernel reads only to fill a tile (maybe outside
 * every range, so maybe in a block no table maps): -1 when unmapped. */
__device__ static inline int64_t cu_pcell_or_none(const struct cu_pages &pg, int64_t c)
{
	if (!pg.tbl)
		return c;
	int32_t b = pg.tbl[c >> pg.sh];
	if (b < 0 || b >= pg.n_blk)
		return -1;
	return ((int64_t)b << pg.sh) | (c & (((int64_t)1 << pg.sh) - 1));
}

/* Byte offset of flat element index i (dim 0 fastest) in a view. */
__device__ static inline int64_t view_off(const struct cu_view &v, int64_t i)
{
	int64_t i0 = i % v.ne[0];
	i /= v.ne[0];
	int64_t i1 = i % v.ne[1];
	i /= v.ne[1];
	int64_t i2 = i % v.ne[2];
	int64_t i3 = i / v.ne[2];
	return i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

static inline unsigned cu_blocks(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;
	return (unsigned)(b > 0x7fffffff ? 0x7fffffff : (b < 1 ? 1 : b));
}

/* Scratch bytes each op needs (0 for most); computed before any launch so
 * the scratch region is stable while a graph is captured. */
size_t cu_mul_mat_scratch(const struct alice_op_args *a) CU_HIDDEN;
size_t cu_mul_mat_staged(const struct alice_op_args *a) CU_HIDDEN;
size_t cu_attention_scratch(const struct alice_op_args *a) CU_HIDDEN;
/* tokens of flash-attention regime bytes an ATTENTION needs (ctx->fa_reg) */
size_t cu_attention_regime(const struct alice_op_args *a) CU_HIDDEN;
size_t cu_topk_scratch(const struct alice_op_args *a) CU_HIDDEN;
size_t cu_sample_temp_scratch(const struct alice_op_args *a) CU_HIDDEN;
/* zeroed unsigned counters ATTENTION needs (ctx->cnt) */
size_t cu_attention_counters(const struct alice_op_args *a) CU_HIDDEN;

/* ---- op launchers (one per op family file) ---- */
enum alice_status cu_op_mul_mat(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_get_rows(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_rms_norm(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_l2_norm(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_rope(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_attention(const struct alice_op_args *a) CU_HIDDEN;
/* ATTENTION a whose output the quantized mat-vec mm (cu_mul_mat_xq: qk)
 * reads next: the decode kernel stages that rounding where it can
 * (*rounded); else as cu_op_attention */
enum alice_status cu_attention_xq(const struct alice_op_args *a, const struct alice_op_args *mm, int qk,
				  bool *rounded) CU_HIDDEN;
enum alice_status cu_op_kv_write(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_binary(const struct alice_op_args *a) CU_HIDDEN; /* ADD, MUL */
enum alice_status cu_op_scale(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_softcap(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_glu(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_unary(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_copy(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_ssm_conv(const struct alice_op_args *a) CU_HIDDEN;        /* ssm.cu */
enum alice_status cu_op_gated_delta_net(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_topk(const struct alice_op_args *a) CU_HIDDEN;             /* topk.cu */
enum alice_status cu_op_sample_temp(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_logit_adjust(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_feed(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_logsumexp(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_op_token_mask(const struct alice_op_args *a) CU_HIDDEN;
size_t cu_logsumexp_scratch(const struct alice_op_args *a) CU_HIDDEN;
void cu_stage_claim(struct alice_backend_ctx *ctx) CU_HIDDEN;

/* How many of the n MUL_MAT nodes a[0..n) can run as one mat-vec launch
 * (>= 1); group: as one group, the decode's mat-vecs (fuse: launch fusion
 * on) or a prefill's products of one input (one GEMM per run of rows);
 * multi runs them, with the GLU after a gate/up pair where it can
 * (*glu_done). */
int cu_mul_mat_fusable(const struct alice_op_args *a, int n) CU_HIDDEN;
int cu_mul_mat_group(const struct alice_op_args *a, int n, bool fuse) CU_HIDDEN;
size_t cu_mul_mat_group_scratch(const struct alice_op_args *a, int64_t sumN) CU_HIDDEN;
enum alice_status cu_mul_mat_multi(const struct alice_op_args *a, int n, const struct alice_op_args *glu,
				   bool *glu_done) CU_HIDDEN;
bool cu_mul_mat_glu_fusable(const struct alice_op_args *a, const struct alice_op_args *g) CU_HIDDEN;
/* 256 / 32: this MUL_MAT runs as a quantized mat-vec with Q8_K / Q8_0
 * rounded activations; 0: anything else */
int cu_mul_mat_xq(const struct alice_op_args *a) CU_HIDDEN;
/* The launch of a[0..n) (n >= 2) first copies its activations to scratch
 * (int8 quants, F16, or rounded F32), so its outputs may overlap them. */
bool cu_mul_mat_stages_x(const struct alice_op_args *a, int n) CU_HIDDEN;

/* staged quantized activations (see alice_backend_ctx.xq): int8 quants
 * [M][K], then F32 scales [M][K/32] 256 bytes on */
static inline int8_t *cu_xq_q(struct alice_backend_ctx *ctx)
{
	return (int8_t *)(ctx->scratch + ctx->xq_off);
}

/* Quantized activations hold M rounded up to 32 columns: the tensor-core
 * mat-vec (mmvq_tc.cu) takes whole 32-column tiles and stores only the
 * first M (a column's result depends on its own column alone). */
static inline int64_t cu_xq_cols(int64_t M)
{
	return (M + 31) & ~(int64_t)31;
}

static inline float *cu_xq_d(struct alice_backend_ctx *ctx, int64_t K, int64_t M)
{
	return (float *)(ctx->scratch + ctx->xq_off + (((size_t)(K * cu_xq_cols(M)) + 255) & ~(size_t)255));
}

static inline bool cu_xq_has(const struct alice_backend_ctx *ctx, const uint8_t *x, int64_t nb0, int64_t nb1,
			     int64_t K, int64_t M, int qk)
{
	const struct cu_xq *c = &ctx->xq;
	return c->x && c->x == x && c->nb0 == nb0 && c->nb1 == nb1 && c->K == K && c->M == M && c->qk == qk;
}

static inline void cu_xq_set(struct alice_backend_ctx *ctx, const uint8_t *x, int64_t nb0, int64_t nb1, int64_t K,
			     int64_t M, int qk, int32_t tid)
{
	struct cu_xq c = { x, nb0, nb1, K, M, qk, tid };
	ctx->xq = c;
}

/* The staged F16 GEMM operand's codes (cu_xq qk): activations rounded as
 * Q8_0 / Q8_K blocks, then to F16 (matmul.cu's act_round + 1000). */
#define CU_XH_Q8_0 1003
#define CU_XH_Q8_K 1004
/* CU_XH_*: this MUL_MAT runs as one F16 GEMM (or group) that takes its
 * activations rounded so, from the staged region when there; 0: not */
int cu_mul_mat_xh(const struct alice_op_args *a) CU_HIDDEN;
/* GLU whose result the next node multiplies as an F16 GEMM (xh: its
 * cu_mul_mat_xh): written out and staged rounded in one pass. */
bool cu_glu_round_ok(const struct alice_op_args *glu) CU_HIDDEN;
enum alice_status cu_glu_round(const struct alice_op_args *glu, int xh) CU_HIDDEN;

/* ADD whose result feeds the next node, an RMS_NORM: one pass. */
bool cu_add_rms_fusable(const struct alice_op_args *add, const struct alice_op_args *norm) CU_HIDDEN;
/* The fused pass stays right when its outputs alias its inputs row for row
 * (the graph placer reuses dead inputs' memory): each row is read by one
 * block, completely, before that block writes it. */
bool cu_add_rms_alias_ok(const struct alice_op_args *add, const struct alice_op_args *norm) CU_HIDDEN;
/* qk 256 / 32: also writes the normalized rows quantized (Q8_K / Q8_0
 * rounding) where the next mat-vec looks for them (ctx->xq); -CU_XH_*: the
 * rounded rows as F16 where the next GEMM looks for them; 0: neither */
enum alice_status cu_add_rms_norm(const struct alice_op_args *add, const struct alice_op_args *norm, int qk) CU_HIDDEN;

/* Two consecutive ROPEs (q, k) or KV_WRITEs (K, V) as one launch. */
bool cu_rope_pairable(const struct alice_op_args *a, const struct alice_op_args *b) CU_HIDDEN;
enum alice_status cu_rope_multi(const struct alice_op_args *a, int n) CU_HIDDEN;
bool cu_kv_pairable(const struct alice_op_args *a, const struct alice_op_args *b) CU_HIDDEN;
/* ROPE q, ROPE k, KV_WRITE K (of the rotated k), KV_WRITE V: one launch. */
bool cu_rope_kv_fusable(const struct alice_op_args *a) CU_HIDDEN;
enum alice_status cu_rope_kv(const struct alice_op_args *a) CU_HIDDEN;
/* ROPE q, ROPE k and both KV_WRITEs (r[0..4), as cu_rope_kv takes them) of
 * one token can ride in the writer lanes of the Q/K/V mat-vec mm[0..3);
 * fills *out */
bool cu_rope_mv_fusable(const struct alice_op_args *mm, const struct alice_op_args *r, struct mmv_rope *out) CU_HIDDEN;
enum alice_status cu_kv_write_multi(const struct alice_op_args *a, int n) CU_HIDDEN;

/* Up to MMV_MAX_SET weight matrices multiplied with the same activations in
 * one mat-vec launch (Q/K/V, gate/up): blocks [bstart[m], bstart[m+1])
 * belong to matrix m. */
#define MMV_MAX_SET 3
/* decode: MUL_MATs with at most this many activation columns are mat-vecs */
#define MMV_MAX_M 8
/* A MUL_MAT whose columns all run as mat-vecs: at most MMV_MAX_M of them,
 * or a batched decode step where no sequence has more than MMV_MAX_M rows
 * (ip[0] with src2, backend.h), so every column gets the kernel it gets
 * alone. Decided on the host, without reading src2 back. */
static inline bool cu_mm_decode(const struct alice_node *n, int64_t M)
{
	return M <= MMV_MAX_M || (n->src[2] >= 0 && n->ip[0] >= 1 && n->ip[0] <= MMV_MAX_M);
}

/* ROPE's parameters (rope.cu, rope.cuh) */
struct rope_params {
	int n_dims, mode;
	int sect[4];
	float base, scale;
	int64_t n_tokens;
};

/* Decode Q/K/V mat-vec with ROPE (NORMAL pairs) and both KV_WRITEs in its
 * writer lanes (one token; mmv_set.rope): members 0 (q) and 1 (k) are
 * rotated into qd / kd ([head_dim, heads] with byte strides nb0, nb1), k
 * also into the K cache cell, member 2 (v) into the V cache cell. */
struct mmv_rope {
	uint8_t *qd, *kd, *kc, *vc;
	int64_t qnb0, qnb1, knb0, knb1;
	int64_t kcnb0, kcnb1, kcnb2, vcnb0, vcnb1, vcnb2;
	uint32_t kt, vt;
	int64_t hd, hdv; /* rows per head of q / k and of v */
	const int32_t *pos, *ids;
	const float *ff;
	int64_t fnb0, n_cells;
	int *flag;
	struct rope_params p;
	uint8_t on;
};

struct mmv_set {
	const uint8_t *w[MMV_MAX_SET];
	int64_t wnb1[MMV_MAX_SET];
	float *d[MMV_MAX_SET];
	int64_t drs[MMV_MAX_SET], N[MMV_MAX_SET];
	unsigned bstart[MMV_MAX_SET + 1];
	uint8_t split[MMV_MAX_SET]; /* mmvq.cu: warps per row of matrix m */
	uint8_t prefetch;           /* mmvq.cu: weights to L2 before waiting on the previous kernel */
	uint8_t ldna;               /* mmvq.cu: 16-byte weight loads bypass L1 */
	uint8_t mix;                /* one-column Q4_K launch: members [mix, n) are mix_type (0: one type) */
	uint32_t mix_type;          /* Q6_K or its packed form (cu_mmvq_mixable) */
	/* GLU launches: h [N, M] = act(d[0]) * d[1] */
	float *h;
	int64_t hrs, hcs;
	int act;
	/* a one-column Q/K/V launch may also rotate q / k and fill the KV
	 * cache cells (rope.on; rope.cuh); the launch that does sets
	 * *rope_taken (host) */
	struct mmv_rope rope;
	bool *rope_taken;
};

/* mmvq.cu: the decode mat-vec for Q4_K / Q6_K / Q8_0 (activations quantized
 * once per tensor to int8 blocks, __dp4a dot products) and F16 (16-byte
 * weight loads, activations rounded to F16 in registers). One to four warps
 * per weight row. cu_mmvq_ok: this path takes the n matrices of set (type,
 * K, alignment); cu_mmvq_scratch: scratch bytes for M columns; cu_mmvq:
 * the launches (x: F32 [K, M] view with strides nb0/nb1 bytes). */
bool cu_mmvq_ok(uint32_t type, int64_t K, const struct mmv_set *set, int n) CU_HIDDEN;
/* one-column products of types t0 then t1 can share a launch (set.mix) */
bool cu_mmvq_mixable(uint32_t t0, uint32_t t1, int64_t M) CU_HIDDEN;
/* mmvq_tc.cu: the first M / 16 * 16 columns of a batched Q4_K / Q6_K launch
 * on tensor cores (set.split[] filled as the mat-vec fills it; x, xd the
 * quantized activations); returns the columns it took, 0 if none. */
int64_t cu_mmvq_tc(cudaStream_t s, struct mmv_set set, int n, uint32_t type, const int8_t *x, const float *xd,
		   int64_t dcs, int64_t K, int64_t M, bool glu) CU_HIDDEN;
size_t cu_mmvq_scratch(uint32_t type, int64_t K, int64_t M) CU_HIDDEN;
enum alice_status cu_mmvq(struct alice_backend_ctx *ctx, struct mmv_set set, int n, uint32_t type, const uint8_t *x,
			  int64_t xnb0, int64_t xnb1, int64_t dcs, int64_t K, int64_t M, bool glu, bool stage) CU_HIDDEN;
/* x (F32 [K, M] view) quantized into the staged region (cu_xq_q / cu_xq_d)
 * as Q8_K (qk 256), Q8_0 (qk 32) or Q8_1 (qk 33: Q8_0's quants and d, then
 * the block sums s at d + K/32 * cu_xq_cols(M)) blocks, unless it already
 * is there */
enum alice_status cu_xq_quant(struct alice_backend_ctx *ctx, const uint8_t *x, int64_t xnb0, int64_t xnb1, int64_t K,
			      int64_t M, int qk, int8_t **q, float **d) CU_HIDDEN;
/* mmq.cu: prefill MUL_MAT (dst rows contiguous, column stride dcs) of
 * quantized weights on integer tensor cores; cu_mmq_ok: it takes w's type,
 * K and alignment, and a run of M columns (M == 0: some run) */
bool cu_mmq_ok(const struct alice_tensor *w, const uint8_t *wb, int64_t M) CU_HIDDEN;
/* scratch cu_mmq takes at ctx->scratch (its splits' sums) */
size_t cu_mmq_scratch(const struct alice_backend_ctx *ctx, int64_t N, int64_t K, int64_t M) CU_HIDDEN;
enum alice_status cu_mmq(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const uint8_t *wb,
			 const uint8_t *x, int64_t xnb0, int64_t xnb1, float *dst, int64_t dcs, int64_t M) CU_HIDDEN;
/* quantized types always copy x to scratch (int8) first; F16 does (as
 * halves) when stage is set: a fused launch whose outputs overlap x */

/* attention.cu: ATTENTION's block table (src4) checked, as kernels take
 * it; *n_vcells: the cells its ranges index (K's without a table). */
enum alice_status cu_attention_pages(const struct alice_op_args *a, struct cu_pages *pg, int64_t *n_vcells);

/* fattn.cu: tensor-core ATTENTION for prefill batches (F16 cache, head
 * dims 64/128, no softcap); ALICE_CUDA_FATTN=0 turns it off. */
bool cu_fattn_ok(const struct alice_op_args *a) CU_HIDDEN;
/* flash attention for the tokens of runs of >= 16 (their flags, one byte
 * per token, are written to tiled); the others are left to the caller */
enum alice_status cu_fattn(const struct alice_op_args *a, uint8_t *tiled) CU_HIDDEN;

/* prof.cu: ALICE_CUDA_PROFILE=1 times every launch group with events
 * (graphs off) and prints a per-op table when the context is freed. */
struct cu_prof;
struct cu_prof *cu_prof_new(void) CU_HIDDEN;
void cu_prof_graph(struct alice_backend_ctx *ctx, const struct alice_graph *g) CU_HIDDEN;
/* an event before node `node`'s launch group (node < 0: after the last) */
void cu_prof_mark(struct alice_backend_ctx *ctx, const struct alice_graph *g, int64_t node) CU_HIDDEN;
void cu_prof_collect(struct alice_backend_ctx *ctx) CU_HIDDEN;
void cu_prof_free(struct cu_prof *p) CU_HIDDEN;
/* ALICE_CUDA_PROFILE=2: wall time of replayed decode steps, split */
struct cu_steps;
struct cu_steps *cu_steps_new(void) CU_HIDDEN;
void cu_steps_entry(struct cu_steps *s) CU_HIDDEN;
void cu_steps_launch(struct cu_steps *s, cudaStream_t st, bool begin, bool plain) CU_HIDDEN;
void cu_steps_done(struct cu_steps *s) CU_HIDDEN;
void cu_steps_blas(struct cu_steps *s, double us) CU_HIDDEN;
double cu_now_us(void) CU_HIDDEN;
void cu_steps_free(struct cu_steps *s) CU_HIDDEN;


/* ---- programmatic dependent launch (PDL) ----
 * Decode is a chain of ~200 small dependent kernels; with PDL the next
 * kernel's blocks are launched while the previous kernel finishes, hiding
 * most of the launch gap (also inside captured CUDA graphs). Every kernel
 * launched through cu_launch() must call pdl_wait() before it touches global
 * memory (it returns once the previous grid has completed and its writes are
 * visible; a no-op for a normal launch); pdl_trigger() then lets the next
 * kernel's launch begin. ALICE_CUDA_PDL=0 turns it off. */
__device__ static inline void pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ static inline void pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* An ALICE_CUDA_* switch: whether the variable is set and starts with c,
 * read once per call site (its own static cache). */
static inline bool cu_env_is(const char *name, char c, int *cache)
{
	if (*cache < 0) {
		const char *e = getenv(name);
		*cache = e && e[0] == c;
	}
	return *cache;
}

static inline bool cu_pdl_on(void)
{
	static int off = -1;
	return !cu_env_is("ALICE_CUDA_PDL", '0', &off);
}

template <typename... KArgs, typename... Args>
static inline void cu_launch_smem(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
				  Args... args)
{
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = s;
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = cu_pdl_on() ? 1 : 0;
	cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
}

template <typename... KArgs, typename... Args>
static inline void cu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, cudaStream_t s, Args... args)
{
	cu_launch_smem(k, grid, block, 0, s, args...);
}

/* Element conversions for F32/F16/BF16 tensors. */
__device__ static inline float ld_float(const uint8_t *p, uint32_t type)
{
	if (type == ALICE_TYPE_F32)
		return *(const float *)p;
	if (type == ALICE_TYPE_F16)
		return __half2float(*(const __half *)p);
	return __bfloat162float(*(const __nv_bfloat16 *)p);
}

__device__ static inline void st_float(uint8_t *p, uint32_t type, float v)
{
	if (type == ALICE_TYPE_F32)
		*(float *)p = v;
	else if (type == ALICE_TYPE_F16)
		*(__half *)p = __float2half_rn(v);
	else
		*(__nv_bfloat16 *)p = __float2bfloat16_rn(v);
}

__device__ static inline float act_apply(int act, float x)
{
	switch (act) {
	case ALICE_ACT_SILU: return x / (1.f + expf(-x));
	case ALICE_ACT_GELU_TANH: {
		const float c = 0.7978845608028654f; /* sqrt(2/pi) */
		return 0.5f * x * (1.f + tanhf(c * (x + 0.044715f * x * x * x)));
	}
	case ALICE_ACT_SIGMOID: return 1.f / (1.f + expf(-x));
	case ALICE_ACT_SOFTPLUS: return x > 20.f ? x : log1pf(expf(x));
	case ALICE_ACT_EXP: return expf(x);
	case ALICE_ACT_NEG: return -x;
	case ALICE_ACT_RELU: return x > 0.f ? x : 0.f;
	case ALICE_ACT_GELU_ERF: return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
	default: return x;
	}
}

__device__ static inline float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ static inline float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

#endif
