/* graph.h — builds one forward step as a struct alice_graph (backend.h) and
 * places its intermediate tensors in one compute buffer.
 *
 * Private to the core. An architecture's builder calls the op helpers below;
 * each returns a tensor index (>= 0) or -1. A helper given -1 returns -1, so a
 * builder checks only once, at the end (alice_gb_failed / err). Shapes are
 * checked by every helper: a mismatch is an error naming the op, never a
 * silent garbage result.
 *
 * Tensor kinds: EXTERNAL (weights, KV cache: buffer and offset already set),
 * INPUT (placed in the compute buffer, live for the whole step, written by the
 * caller before graph_compute), COMPUTE (placed by alice_gb_plan reusing
 * memory by liveness), VIEW (a window on another tensor: same memory).
 * The builder owns its arrays; alice_gb_free releases them. */
#ifndef ALICE_CORE_GRAPH_H
#define ALICE_CORE_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "alice/backend.h"
#include "alice/status.h"

enum alice_gb_kind {
	ALICE_GB_EXTERNAL = 0,
	ALICE_GB_INPUT = 1,
	ALICE_GB_COMPUTE = 2,
	ALICE_GB_VIEW = 3,
};

struct alice_gb_meta {
	uint8_t kind;     /* enum alice_gb_kind */
	bool output;      /* keep alive to the end of the step */
	int32_t view_of;  /* base tensor for VIEW (never itself a view), else -1 */
	uint64_t view_offs; /* byte offset of a VIEW inside its base */
	uint64_t nbytes;  /* bytes to place (INPUT/COMPUTE) */
};

/* MUL_MAT row regime (backend.h, ALICE_OP_MUL_MAT src2): an I32 [2, rows]
 * step input (per activation row: its sequence's row count, its index). */
struct alice_gb_row_hint {
	int32_t rows;   /* 0 = unset */
	int32_t tensor; /* the INPUT tensor */
};

struct alice_gb {
	struct alice_tensor *tensors;
	struct alice_gb_meta *meta;
	uint32_t n_tensors, cap_tensors;
	struct alice_node *nodes;
	uint32_t n_nodes, cap_nodes;
	bool failed;
	struct alice_error err;
	/* [0]: token rows, [1]: output rows (after the last layer's row
	 * selection); set by the context per step and given as src2 to each
	 * MUL_MAT whose activations have that many rows (both agree when equal) */
	struct alice_gb_row_hint row_hint[2];
	/* paged KV cache: the block table tensor given to every ATTENTION as
	 * src4 (backend.h), -1 = none; kv_bs its block size */
	int32_t kv_table;
	int32_t kv_bs;
};

#define ALICE_GB_ALIGN 256u

void alice_gb_init(struct alice_gb *gb);
void alice_gb_reset(struct alice_gb *gb); /* empty, keeps capacity */
void alice_gb_free(struct alice_gb *gb);
bool alice_gb_failed(const struct alice_gb *gb);
/* Records the first error; returns -1 for `return alice_gb_error(...)`. */
int32_t alice_gb_error(struct alice_gb *gb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Create the I32 [2, rows] row-regime input that MUL_MATs built next with
 * `rows` activation rows take as src2 (which = 0: the step's token rows,
 * 1: its output rows); the caller writes it (per row: how many such rows
 * its sequence has, and the row's index among them). Returns the tensor,
 * or -1. Cleared by alice_gb_reset. */
int32_t alice_gb_row_regime(struct alice_gb *gb, int which, int32_t rows);
/* Set ip[0] of the MUL_MATs reading regime `which` to the step's largest
 * per-sequence row count (backend.h); called per step, the graph may be reused. */
void alice_gb_set_row_max(struct alice_gb *gb, int which, int32_t max_rows);
/* ATTENTION's hint ip[1] on every ATTENTION node: the most tokens one
 * sequence has in the step (backend.h). */
void alice_gb_set_attn_seq_max(struct alice_gb *gb, int32_t max_tokens);

/* The graph as the backend sees it (borrowed from gb). */
struct alice_graph alice_gb_graph(const struct alice_gb *gb);
const struct alice_tensor *alice_gb_tensor(const struct alice_gb *gb, int32_t t);

/* ---- tensors ---- */
int32_t alice_gb_external(struct alice_gb *gb, const struct alice_tensor *t);
/* Every ATTENTION built after this reads its K/V through the block table t
 * (an EXTERNAL I32 tensor) of bs cells per block (backend.h, src4). */
void alice_gb_set_kv_pages(struct alice_gb *gb, int32_t t, int32_t bs);
/* Contiguous new tensor of up to 4 dims (unused = 1). */
int32_t alice_gb_new(struct alice_gb *gb, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* A new F32 COMPUTE tensor of x's shape (-1 if x is not valid). */
int32_t alice_gb_new_like(struct alice_gb *gb, int32_t x);
int32_t alice_gb_input(struct alice_gb *gb, uint32_t type, int64_t ne0, int64_t ne1);
void alice_gb_set_output(struct alice_gb *gb, int32_t t);
/* A strided window: ne/nb given, `offset` bytes from src's start. */
int32_t alice_gb_view(struct alice_gb *gb, int32_t src, const int64_t ne[4], const int64_t nb[4],
		      uint64_t offset);
/* Reinterpret a contiguous tensor with a new shape (same element count). */
int32_t alice_gb_reshape(struct alice_gb *gb, int32_t src, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
bool alice_gb_is_contiguous(const struct alice_gb *gb, int32_t t);

/* For op helpers outside graph.c: gb has not failed and each ts[i] is one of its tensors. */
bool alice_gb_valid(const struct alice_gb *gb, const int32_t *ts, int n);

/* ---- ops (dst is a new contiguous F32 tensor unless stated) ---- */
int32_t alice_gb_get_rows(struct alice_gb *gb, int32_t src, int32_t ids);
int32_t alice_gb_mul_mat(struct alice_gb *gb, int32_t w, int32_t x);
int32_t alice_gb_add(struct alice_gb *gb, int32_t a, int32_t b);
int32_t alice_gb_mul(struct alice_gb *gb, int32_t a, int32_t b);
int32_t alice_gb_scale(struct alice_gb *gb, int32_t a, float s, float bias);
int32_t alice_gb_rms_norm(struct alice_gb *gb, int32_t x, int32_t w /* -1 = none */, float eps);
/* LayerNorm over dim 0, then * w and + b (each -1 = none; F32 [ne0 of x]). */
int32_t alice_gb_layer_norm(struct alice_gb *gb, int32_t x, int32_t w, int32_t b, float eps);
int32_t alice_gb_rope(struct alice_gb *gb, int32_t x, int32_t pos, int32_t freq_factors, int n_dims,
		      int mode, float freq_base, float freq_scale);
int32_t alice_gb_attention(struct alice_gb *gb, int32_t q, int32_t k, int32_t v, int32_t ranges,
			   float scale, float softcap);
/* In place into `cache`; returns `cache` (so later readers depend on it). */
int32_t alice_gb_kv_write(struct alice_gb *gb, int32_t cache, int32_t rows, int32_t cells);
int32_t alice_gb_glu(struct alice_gb *gb, int32_t a, int32_t b, int act);
int32_t alice_gb_unary(struct alice_gb *gb, int32_t a, int act);
int32_t alice_gb_copy(struct alice_gb *gb, int32_t src, uint32_t type);
/* TOPK: I32 [2, k, rows] (index, value bits) pairs of each row of x, best
 * first; into (>= 0): that tensor of this shape (an external one) holds them */
int32_t alice_gb_topk(struct alice_gb *gb, int32_t x, int32_t k, int32_t into);
/* SAMPLE_TEMP: I32 [2, rows] (token, used) per row of x; params I32 [4, rows];
 * into as for alice_gb_topk */
int32_t alice_gb_sample_temp(struct alice_gb *gb, int32_t x, int32_t params, int32_t into);
/* TOKEN_MASK (backend.h) in place on logits x with records recs; returns x */
int32_t alice_gb_token_mask(struct alice_gb *gb, int32_t x, int32_t recs);
/* LOGSUMEXP (backend.h): I32 [4, rows] of logits x; tokens: SAMPLE_TEMP's
 * output or -1 */
int32_t alice_gb_logsumexp(struct alice_gb *gb, int32_t x, int32_t tokens);
/* FEED (backend.h): I32 [n] token ids, host[i] or picks[idx[i]] */
int32_t alice_gb_feed(struct alice_gb *gb, int32_t host, int32_t idx, int32_t picks);
/* LOGIT_ADJUST (backend.h) in place on logits x with records recs (I32
 * [6, L]); returns x. */
int32_t alice_gb_logit_adjust(struct alice_gb *gb, int32_t x, int32_t recs);
/* Append a node with dst and up to ALICE_MAX_SRC sources (-1 = none), for op
 * helpers outside this file (an arch/ file's own ops); the caller checks shapes first
 * and sets ip/fp on the returned node. NULL if gb has failed or an index is
 * bad. */
struct alice_node *alice_gb_node(struct alice_gb *gb, uint32_t op, int32_t dst, const int32_t *src, int n_src);

/* ---- placement ----
 * Assign offsets to INPUT/COMPUTE tensors in one buffer, reusing the memory
 * of tensors whose last reader has run. Returns the bytes needed in *size.
 * Call alice_gb_bind(buf) afterwards to set buffer pointers (offsets are
 * relative to the buffer's start). */
enum alice_status alice_gb_plan(struct alice_gb *gb, uint64_t *size, struct alice_error *err);
void alice_gb_bind(struct alice_gb *gb, struct alice_buffer *compute_buf);

const char *alice_op_name(uint32_t op);

#endif
