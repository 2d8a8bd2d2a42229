/* backend.h — the plugin ABI between the core and a backend .so.
 *
 * This is the alice header a backend includes (with quant.h for the type
 * table, and the header-only backend_check.h — the checks of the contract
 * below: op names, arity, type and shape rules, tensor extents — and
 * backend_log.h — logging through the host table, `*_fail`). A backend is
 * `libalice-backend-<name>.so` exporting:
 *
 *   const struct alice_backend_vtable *alice_backend_entry(const struct alice_backend_host *host);
 *   int alice_backend_score(void);      (optional; 0 = cannot run here)
 *
 * The vtable starts with the ABI version and its own size and only grows by
 * appending members: the core refuses a .so whose major differs or whose
 * vtable is smaller than the members it needs (the SQLite / ggml pattern).
 * Nothing here knows about architectures, tokenizers or HTTP: a backend sees
 * buffers and graphs of ops.
 *
 * Threading: the core calls one backend context from one thread at a time. */
#ifndef ALICE_BACKEND_H
#define ALICE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/status.h"

#define ALICE_BACKEND_ABI_MAJOR 1
#define ALICE_BACKEND_ABI_MINOR 7 /* 1.1: SSM_CONV, GATED_DELTA_NET; 1.2: host_alloc/host_free; 1.3: NORM;
                                   1.4: ATTENTION's block table (src4), TOPK, SAMPLE_TEMP;
                                   1.5: LOGIT_ADJUST, ATTENTION's ip[1] hint;
                                   1.6: graph_launch/graph_wait with the step's reads;
                                   1.7: tensor_pack, ALICE_TENSOR_PACKED */
#define ALICE_BACKEND_ENTRY_SYMBOL "alice_backend_entry"
#define ALICE_BACKEND_SCORE_SYMBOL "alice_backend_score"

#if defined(__GNUC__)
#define ALICE_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define ALICE_BACKEND_EXPORT
#endif

/* ---- the ops ------------------------------------------------------------
 * Tensors are up to 4-D: ne[0] is the innermost (contiguous-ish) dim, nb[i]
 * the byte stride of dim i (ggml's convention: for block-quantized types
 * nb[0] = type_size and dim 0 is packed, so nb[1] = row bytes).
 * Unless stated otherwise inputs and outputs are F32, may be strided views,
 * and dst never aliases a source (except KV_WRITE / STATE ops, in place). */
enum alice_op {
	ALICE_OP_NONE = 0,
	/* dst[:, i] = dequant(src0[:, ids[i]]).  src0: any type [ne0, n_rows]
	 * (F32 too, to pick rows of activations); src1: I32 ids [n];
	 * dst: F32 [ne0, n].  (src1 may be [n, a, b]: dst is then [ne0, n, a, b].) */
	ALICE_OP_GET_ROWS = 1,
	/* dst[n, m] = sum_k src0[k, n] * src1[k, m].  src0: weight of any type,
	 * rows contiguous [K, N]; src1: F32 [K, M] (M = 1 decode, many prefill);
	 * dst: F32 [N, M].  Dims 2,3 of src1/dst are batch dims; src0 broadcasts
	 * over them when its ne[2]=ne[3]=1.  Like llama.cpp, a backend may round
	 * src1 to the weight's partner format before the dot (F16 for F16, BF16
	 * for BF16, Q8_0 blocks for 32-blocks, Q8_K for K-quants): tests allow it.
	 * src2 (optional): I32 [2, M], per row: the number of rows its sequence
	 * has in this op (>= 1), and the row's index among them (0-based, in
	 * row order). llama.cpp runs one sequence per op and picks its kernel,
	 * and so its summation order, by the op's row count and a row's place
	 * (e.g. its repacked gemm takes rows in groups of 4, the rest go to a
	 * mat-vec); the cpu backend picks it per row from src2 (from M and m
	 * when src2 is absent), so a sequence's results do not depend on what
	 * shares its step. Other backends may ignore it. ip[0] (with src2):
	 * the largest count in src2 (the most rows one sequence has in this
	 * op), so a backend can choose its kernels on the host without reading
	 * src2 back; 0 = not given. */
	ALICE_OP_MUL_MAT = 2,
	/* dst = src0 + src1; src1 broadcasts over any dim where its ne is 1. */
	ALICE_OP_ADD = 3,
	/* dst = src0 * src1; same broadcast. */
	ALICE_OP_MUL = 4,
	/* dst = src0 * fp[0] + fp[1]. */
	ALICE_OP_SCALE = 5,
	/* Over dim 0: dst = x / sqrt(mean(x^2) + fp[0]), then * src1 if present
	 * (src1 F32 [ne0], broadcast over the other dims). */
	ALICE_OP_RMS_NORM = 6,
	/* Over dim 0: dst = x / max(sqrt(sum(x^2)), fp[0]). */
	ALICE_OP_L2_NORM = 7,
	/* Rotary embedding. src0: [head_dim, n_head, n_tokens]; src1: I32
	 * positions [n_tokens] (mode IMROPE: [4 * n_tokens], sections t,h,w,e);
	 * src2: optional F32 frequency factors [ip[0]/2] (theta_i is divided by them).
	 * ip[0] n_dims rotated (<= head_dim; the rest is copied), ip[1] mode
	 * (ALICE_ROPE_*), ip[2..5] IMROPE sections. fp[0] freq_base, fp[1]
	 * freq_scale (linear scaling: positions are multiplied by it).
	 * theta_i = pos * freq_scale * base^(-2i/n_dims) / factor[i]. */
	ALICE_OP_ROPE = 8,
	/* Fused attention over a KV cache.  src0 q: F32 [d_k, n_head, n_tokens];
	 * src1 K: [d_k, n_head_kv, n_cells] (F16 or F32); src2 V: [d_v,
	 * n_head_kv, n_cells]; src3 I32 [2, n_tokens]: token t attends the cells
	 * [src3[0,t], src3[1,t]) (this carries causality, sequences and sliding
	 * windows).  GQA: query head h uses kv head h / (n_head / n_head_kv).
	 * fp[0] scale on q.k, fp[1] soft-cap (0 = none: s = cap*tanh(s/cap)).
	 * dst: F32 [d_v, n_head, n_tokens].  Softmax in F32.  K and V rows are
	 * contiguous in dim 0; an empty range [c, c) gives zeros.
	 * 1.4, optional src4: a block table (paged KV cache). src4 I32 [n_blk]
	 * contiguous, ip[0] = BS, the block size in cells (a power of two,
	 * 1..65536, dividing n_cells). The ranges of src3 are then in a
	 * virtual cell space of n_blk * BS cells, and virtual cell c lives in
	 * the physical cell src4[c / BS] * BS + c % BS of K and V (each entry
	 * read < n_cells / BS). Only the address changes: the cells are visited
	 * and summed in the same (virtual) order, with the same tiles and
	 * splits as an unpaged cache of n_blk * BS cells, so a paged layout
	 * gives bit-identical results to the contiguous one holding the same
	 * rows. Entries of blocks that no range touches are never used (a
	 * backend that reads whole tiles reads such cells as zeros). Without
	 * src4: the identity (today's layout). A backend of ABI < 1.4 answers
	 * supports_op false for an ATTENTION node with src4.
	 * ip[1], a hint (0 = none; a backend may ignore it): no sequence has
	 * more than ip[1] of the op's tokens, so no run of tokens whose ranges
	 * continue each other is longer; a backend may skip work meant only
	 * for longer runs (the results must not change). */
	ALICE_OP_ATTENTION = 9,
	/* In place: dst is the cache [row..., n_cells] (F16 or F32); src0 F32
	 * rows [.., n] with the same elements per cell; src1 I32 cell index [n].
	 * Writes row i of src0 into cell src1[i] of dst (converting type).
	 * With E = elements(src0) / n, a tensor's cell dim is its first dim of
	 * size > 1 whose lower dims hold E elements (so [d, h, n] and [d*h, n]
	 * rows both fit a [d, h, n_cells] cache); indices must be < n_cells. */
	ALICE_OP_KV_WRITE = 10,
	/* dst = act(src0) * src1, act = ip[0] (ALICE_ACT_*). */
	ALICE_OP_GLU = 11,
	/* dst = act(src0), act = ip[0] (ALICE_ACT_*). */
	ALICE_OP_UNARY = 12,
	/* dst = fp[0] * tanh(src0 / fp[0]). */
	ALICE_OP_SOFTCAP = 13,
	/* dst = src0, element by element (any strides; F32/F16 either side). */
	ALICE_OP_COPY = 14,
	ALICE_OP_COUNT_V1_0,

	/* ---- 1.1: recurrent layers (Qwen 3.5's gated DeltaNet) ----
	 * A backend without them answers supports_op false (a 1.0 backend does
 * so for every op >= ALICE_OP_COUNT_V1_0); the context then fails to
 * create, naming the op.
	 * Both keep a per-sequence state that they update IN PLACE: the state
	 * is a source, not dst, and a backend must treat it as written by the
	 * node (like KV_WRITE's cache). Tokens are processed in batch order; a
	 * batch may mix sequences, and the tokens of one sequence appear in
	 * position order (not necessarily adjacent). seq: I32 [T], each < n_seq. */

	/* Causal depthwise 1-D convolution with state.  src0 x: F32 [C, T]
	 * (dim 0 contiguous, dim 1 may be strided); src1 w: F32 [K, C] contiguous
	 * (K taps per channel, the oldest input's tap first); src2 state: F32
	 * [K-1, C, n_seq] contiguous, in place (the previous K-1 inputs of each
	 * channel, oldest first; zeros for a new sequence); src3 seq I32 [T].
	 * For each token t in order, with s = seq[t] and each channel c:
	 *   win = (state[0, c, s], ..., state[K-2, c, s], x[c, t])
	 *   dst[c, t] = sum over k = 0..K-1, in that order, of w[k, c] * win[k]
	 *   state[0..K-2, c, s] = win[1..K-1]
	 * dst: F32 [C, T] contiguous. */
	ALICE_OP_SSM_CONV = ALICE_OP_COUNT_V1_0,
	/* Gated delta rule (linear attention with a matrix state per head).
	 * src0 qk: F32 [S, 2*H_k, T] (dim 0 contiguous): heads 0..H_k-1 are the
	 * queries, heads H_k..2*H_k-1 the keys (one L2-normalised block);
	 * src1 v: F32 [S, H_v, T] (dim 0 contiguous); src2 g: F32 [H_v, T] log
	 * decay (<= 0); src3 beta: F32 [H_v, T]; src4 state: F32 [S, S, H_v,
	 * n_seq] contiguous, in place: M = state[:, :, h, s], M[j][i] at
	 * i + S*j (row j = value dim j over the key dims i); src5 seq I32 [T].
	 * H_v must be a multiple of H_k; value head h uses query/key head
	 * h % H_k (ggml's broadcast). For each token t in order, s = seq[t],
	 * and each value head h with its q, k (S each) and v (S):
	 *   M *= exp(g[h, t])
	 *   for each j: d[j] = (v[j] - dot(M[j], k)) * beta[h, t]; M[j] += d[j] * k
	 *   dst[j, h, t] = fp[0] * dot(M[j], q)       (fp[0]: output scale)
	 * dst: F32 [S, H_v, T] contiguous. */
	ALICE_OP_GATED_DELTA_NET,
	ALICE_OP_COUNT_V1_1,

	/* ---- 1.3: encoders (BERT) ----
	 * A backend without it answers supports_op false, like for 1.1. */

	/* LayerNorm over dim 0: with m = mean(x) and v = mean((x - m)^2), both
	 * summed in double, dst = (x - m) / sqrt(v + fp[0]) (the scale
	 * 1/sqrtf(float(v) + eps) rounded to float, as ggml_norm), then
	 * * src1 and + src2 where present (F32 [ne0], broadcast like RMS_NORM's
	 * weight), each rounded to float in that order. */
	ALICE_OP_NORM = ALICE_OP_COUNT_V1_1,
	ALICE_OP_COUNT_V1_3,

	/* ---- 1.4: sampling on the device ----
	 * A backend without them answers supports_op false (the core then
	 * reads whole logits rows instead).
	 * The best K = ip[0] entries of each row of src0 (F32 [n, rows], dim 0
	 * contiguous; 1 <= K <= min(n, ALICE_TOPK_MAX)), best first: the higher
	 * value first, ties to the lower index. Values are cleaned first as the
	 * sampler does: NaN -> -inf, +inf -> FLT_MAX. dst: I32 [2, K, rows]
	 * contiguous, (index, the cleaned value's bits) pairs. */
	ALICE_OP_TOPK = ALICE_OP_COUNT_V1_3,
	/* A draw from each whole row of src0 (F32 [n, rows], dim 0 contiguous,
	 * n <= ALICE_SAMPLE_TEMP_MAX) at temperature T with no truncation, by
	 * the rule of alice/temp_sample.h on the cleaned row (as TOPK cleans),
	 * bit for bit. src1 I32 [4, rows] contiguous, per row: T's float bits
	 * (T <= 0: the row is skipped, dst (-1, 0)); r, a double in [0, 1), as
	 * its low then high 32-bit words; one unused word. dst I32 [2, rows]:
	 * the token (-1 when every value is NaN or -inf), and 1 when the draw
	 * used r (more than one live token), else 0. */
	ALICE_OP_SAMPLE_TEMP,
	ALICE_OP_COUNT_V1_4,

	/* ---- 1.5: logit bias and penalties on the device ----
	 * Optional like TOPK (the core then reads such rows whole).
	 * In place on dst, F32 logits [n, rows] (dim 0 contiguous): per-token
	 * edits before TOPK / SAMPLE_TEMP read the rows. src0 I32 [6, L]
	 * contiguous: record 0 holds the count c (<= L - 1; the rest of it
	 * unused), records 1..c are (row, token, flags, bias, rp, pen), the last
	 * three float bits, at most one record per (row, token); records out of
	 * range are skipped. Each does, with x the cleaned value (NaN -> -inf,
	 * +inf -> FLT_MAX) and every result cleaned, in this order and with
	 * these float operations (alice/sampling.h's ALICE_ADJ_*): flags & 1
	 * x + bias; flags & 2 -inf; flags & 4 x > 0 ? x / rp : x * rp; flags & 8
	 * x - pen; then writes x back. */
	ALICE_OP_LOGIT_ADJUST = ALICE_OP_COUNT_V1_4,
	ALICE_OP_COUNT_V1_5,

	/* ---- 1.6: a step's tokens from the previous step's picks ----
	 * Optional (the core then decodes a step only after the previous one's
	 * tokens are known). dst I32 [n] contiguous, the step's token ids;
	 * src0 I32 [n] contiguous, the tokens the host gives; src1 I32 [n]
	 * contiguous, per token -1 (take src0's) or an element index into src2,
	 * I32 [m] contiguous (a buffer the previous step's TOPK / SAMPLE_TEMP
	 * wrote): dst[i] = src1[i] < 0 ? src0[i] : src2[src1[i]]. An index >= m
	 * is bad input data (the call fails, as for GET_ROWS). */
	ALICE_OP_FEED = ALICE_OP_COUNT_V1_5,
	/* Optional (the core then reads logprobs rows whole). Logprobs'
	 * normaliser per row of src0 (F32 logits [n, rows], dim 0 contiguous,
	 * after LOGIT_ADJUST): dst I32 [4, rows]: the max mx of the cleaned
	 * values (float bits); the double sum of alice/temp_sample.h's
	 * alice_ts_lse_sum (low then high word), in its order, bit for bit; and
	 * the cleaned value at the token src1 names (optional src1 I32 [2,
	 * rows], SAMPLE_TEMP's dst: its first word), 0 when there is none or it
	 * is outside the row. A row with no finite value: -inf and 0. */
	ALICE_OP_LOGSUMEXP,
	/* Optional (the core then reads constrained rows whole). In place on
	 * dst, F32 logits [n, rows] (dim 0 contiguous), after LOGIT_ADJUST: src0
	 * I32 [1 + W, L] contiguous, W = ceil(n / 32): record 0's first word is
	 * the count c (<= L - 1, the rest unused); records 1..c are a row, then
	 * W words of bits, bit t % 32 of word t / 32 set when token t may come
	 * next; a record whose row is outside dst is skipped. Each token not
	 * allowed becomes -inf (a grammar's mask). */
	ALICE_OP_TOKEN_MASK,
	ALICE_OP_COUNT_V1_6
};

#define ALICE_TOPK_MAX 128
#define ALICE_SAMPLE_TEMP_MAX 262144

enum alice_rope_mode {
	ALICE_ROPE_NORMAL = 0, /* rotate pairs (2i, 2i+1) */
	ALICE_ROPE_NEOX = 2,   /* rotate pairs (i, i + n_dims/2) */
	ALICE_ROPE_IMROPE = 40,/* interleaved multi-section (Qwen3.5), neox pairing */
};

enum alice_act {
	ALICE_ACT_SILU = 0,
	/* 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))); a backend may evaluate it
	 * as llama.cpp's CPU backend does, on the input rounded to F16 with the
	 * result rounded to F16 (its lookup table; the cpu backend does) */
	ALICE_ACT_GELU_TANH = 1,
	ALICE_ACT_SIGMOID = 2,
	ALICE_ACT_SOFTPLUS = 3,
	ALICE_ACT_EXP = 4,
	ALICE_ACT_NEG = 5,
	ALICE_ACT_RELU = 6,
	ALICE_ACT_GELU_ERF = 7,
};

#define ALICE_MAX_DIMS 4
#define ALICE_MAX_SRC 6
#define ALICE_MAX_PARAMS 8

struct alice_buffer; /* backend-owned */

/* The tensor's bytes are in the layout its backend's tensor_pack chose, not
 * the type's block layout; only that backend reads them. Views keep the flag
 * (a view of whole rows of a packed weight stays valid). */
#define ALICE_TENSOR_PACKED (1u << 0)

struct alice_tensor {
	uint32_t type;               /* enum alice_type */
	uint32_t flags;              /* ALICE_TENSOR_*; 0 for the core's own tensors */
	int64_t ne[ALICE_MAX_DIMS];  /* elements per dim, unused = 1 */
	int64_t nb[ALICE_MAX_DIMS];  /* byte strides */
	struct alice_buffer *buf;
	uint64_t offset;             /* bytes from the buffer's start */
};

struct alice_node {
	uint32_t op;                   /* enum alice_op */
	int32_t dst;                   /* tensor index in the graph */
	int32_t src[ALICE_MAX_SRC];    /* tensor indices, -1 = none */
	int32_t ip[ALICE_MAX_PARAMS];  /* integer params (per op) */
	float fp[ALICE_MAX_PARAMS];    /* float params (per op) */
};

/* One forward step: nodes run in order; each reads tensors written by
 * earlier nodes or by buffer_write before the call. */
struct alice_graph {
	uint32_t n_tensors;
	uint32_t n_nodes;
	const struct alice_tensor *tensors;
	const struct alice_node *nodes;
};

/* ---- devices and contexts ------------------------------------------------ */

enum alice_device_flags {
	ALICE_DEVICE_UNIFIED_MEMORY = 1u << 0, /* host and device share memory */
	ALICE_DEVICE_HOST_IMPORT = 1u << 1,    /* buffer_import works */
	/* A software implementation running on the CPU (Mesa's lavapipe): usable
	 * when asked for by name, but `--backend auto` prefers the CPU backend. */
	ALICE_DEVICE_SOFTWARE = 1u << 2,
	/* buffer_import works, but the weights run faster copied into the
	 * backend's own memory (the CPU backend: in a VM, pages of the file's
	 * mapping read 15-40% slower than anonymous memory). The core copies
	 * them where memory allows; ALICE_MMAP=1 keeps them in place. */
	ALICE_DEVICE_PREFER_COPY = 1u << 3,
};

struct alice_device_info {
	char name[128];        /* "NVIDIA H200", "AMD EPYC ... (8 threads)" */
	char description[256]; /* driver, compute capability, ISA... */
	uint64_t mem_total;    /* bytes; 0 if unknown */
	uint64_t mem_free;
	uint32_t flags;        /* enum alice_device_flags */
};

struct alice_backend_options {
	uint32_t size;    /* sizeof(struct alice_backend_options) of the caller */
	int32_t device;   /* device index, -1 = the backend's choice */
	int32_t n_threads;/* CPU threads, 0 = backend default */
};

enum alice_buffer_usage {
	ALICE_BUFFER_WEIGHTS = 0, /* written once, read by every step */
	ALICE_BUFFER_COMPUTE = 1, /* activations, scratch */
	ALICE_BUFFER_CACHE = 2,   /* KV cache / recurrent state, persists */
};

struct alice_backend_ctx; /* backend-owned */

/* 1.6: a copy of size bytes at offset of buf to host memory dst, made
 * after a launched graph (graph_launch) */
struct alice_read {
	struct alice_buffer *buf;
	uint64_t offset, size;
	void *dst;
};

/* Log callback the core hands in so a .so links nothing from the core. */
struct alice_backend_host {
	uint32_t abi_major, abi_minor, size;
	void (*log)(int level /* enum alice_log_level */, const char *msg);
};

struct alice_backend_vtable {
	uint32_t abi_major;
	uint32_t abi_minor;
	uint32_t size; /* sizeof(struct alice_backend_vtable) the .so was built with */
	const char *name;

	/* Can this backend run here? Returns the number of usable devices (> 0)
	 * or 0 and a reason ("no CUDA device: cudaGetDeviceCount returned ..."). */
	int (*probe)(char *reason, size_t reason_len);
	enum alice_status (*device_info)(int device, struct alice_device_info *out);

	enum alice_status (*init)(const struct alice_backend_options *opts,
				  struct alice_backend_ctx **out, char *err, size_t err_len);
	void (*free)(struct alice_backend_ctx *ctx);
	/* The last error message of a failed call on ctx (never NULL). */
	const char *(*last_error)(struct alice_backend_ctx *ctx);

	/* Buffers. alloc'd memory is uninitialised. */
	enum alice_status (*buffer_alloc)(struct alice_backend_ctx *ctx, uint64_t size,
					  uint32_t usage, struct alice_buffer **out);
	/* Optional (NULL): wrap host memory (the mmap'd weights) without copying.
	 * The memory must outlive the buffer; it is never written. */
	enum alice_status (*buffer_import)(struct alice_backend_ctx *ctx, const void *host,
					   uint64_t size, struct alice_buffer **out);
	void (*buffer_free)(struct alice_backend_ctx *ctx, struct alice_buffer *buf);
	enum alice_status (*buffer_write)(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
					  uint64_t offset, const void *src, uint64_t size);
	enum alice_status (*buffer_read)(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
					 uint64_t offset, void *dst, uint64_t size);
	/* Fill with zero bytes. */
	enum alice_status (*buffer_clear)(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
					  uint64_t offset, uint64_t size);

	/* Can node (with its tensors' types/shapes) run here? */
	bool (*supports_op)(struct alice_backend_ctx *ctx, const struct alice_graph *g,
			    const struct alice_node *node);
	/* Run the whole graph; returns when results are readable. On failure the
	 * error is in last_error(ctx); the context stays usable. */
	enum alice_status (*graph_compute)(struct alice_backend_ctx *ctx, const struct alice_graph *g);
	/* -- members appended after 1.0 go below this line -- */

	/* 1.2, optional (NULL): host memory that buffer_read fills fastest
	 * (page-locked for a discrete GPU); the core keeps the logits rows
	 * there. NULL on failure. host_free(NULL) is a no-op. */
	void *(*host_alloc)(struct alice_backend_ctx *ctx, uint64_t size);
	void (*host_free)(struct alice_backend_ctx *ctx, void *p);

	/* 1.6, optional (both or neither): graph_compute in two halves, with
	 * the step's results copied back behind the graph, so one wait covers
	 * the step and its reads (each buffer_read is a round trip of its own).
	 * graph_launch enqueues g and then reads[0, n_reads) (dst best from
	 * host_alloc: a read into other memory may cost a wait of its own); a
	 * failure there means nothing is left to wait for. Up to two launches may be in flight; graph_wait waits for
	 * the oldest.
	 * Each successful launch is waited for before its reads or their dst
	 * are touched; graph_wait returns what graph_compute would have, with
	 * every dst of that launch filled on success. */
	enum alice_status (*graph_launch)(struct alice_backend_ctx *ctx, const struct alice_graph *g,
					  const struct alice_read *reads, uint32_t n_reads);
	enum alice_status (*graph_wait)(struct alice_backend_ctx *ctx);

	/* 1.7, optional (NULL): after a weight has been written (buffer_write),
	 * the backend may rewrite its bytes in place into a layout its kernels
	 * read faster (same size, no second copy) and set ALICE_TENSOR_PACKED in
	 * t->flags; ALICE_OK without the flag leaves it as written. Any
	 * other status is a failure (last_error). */
	enum alice_status (*tensor_pack)(struct alice_backend_ctx *ctx, struct alice_tensor *t);
};

/* Does vt (of vt->size bytes) have the appended member m, and is it set? */
#define ALICE_VT_HAS(vt, m) \
	((vt)->size >= offsetof(struct alice_backend_vtable, m) + sizeof((vt)->m) && (vt)->m != NULL)

typedef const struct alice_backend_vtable *(*alice_backend_entry_fn)(const struct alice_backend_host *host);
typedef int (*alice_backend_score_fn)(void);

#endif
