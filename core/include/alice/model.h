/* model.h — load a GGUF model onto a backend and run forward steps.
 *
 * struct alice_model is immutable after load and may be shared by several
 * contexts; it owns the GGUF mapping, the tokenizer, the backend context and
 * the weights. struct alice_context owns the KV cache / recurrent state for
 * n_seq sequences and the scratch memory of one step. One thread at a time
 * per context.
 *
 * Sequences: sequence s owns cache cells [s*n_ctx, (s+1)*n_ctx); the token at
 * position p of sequence s lives in cell s*n_ctx + p. A batch may mix
 * sequences; within a sequence its tokens must have consecutive positions
 * continuing that sequence (prefill = one batch). */
#ifndef ALICE_MODEL_H
#define ALICE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "alice/gguf.h"
#include "alice/status.h"

struct alice_model;
struct alice_context;
struct alice_tokenizer;
struct alice_backend;

struct alice_model_params {
	const char *path;        /* GGUF file */
	const char *backend;     /* "cpu", "cuda", "vulkan", "auto" or a drop-in name; NULL = "auto" */
	const char *backend_dir; /* searched first; NULL = none */
	int32_t n_threads;       /* CPU threads; 0 = physical cores */
	int32_t device;          /* -1 = backend's choice */
};

void alice_model_params_default(struct alice_model_params *p);
enum alice_status alice_model_load(const struct alice_model_params *p, struct alice_model **out,
				   struct alice_error *err);
void alice_model_free(struct alice_model *m); /* NULL is a no-op */

/* Borrowed; live as long as the model. */
const struct alice_gguf *alice_model_gguf(const struct alice_model *m);
const struct alice_tokenizer *alice_model_tokenizer(const struct alice_model *m);
const char *alice_model_arch(const struct alice_model *m);        /* "llama" */
const char *alice_model_name(const struct alice_model *m);        /* general.name or file name */
const char *alice_model_backend_name(const struct alice_model *m);/* "cpu" */
const char *alice_model_device_name(const struct alice_model *m);
int32_t alice_model_n_vocab(const struct alice_model *m);
int32_t alice_model_n_ctx_train(const struct alice_model *m);
int32_t alice_model_n_embd(const struct alice_model *m);
uint64_t alice_model_n_params(const struct alice_model *m);
uint64_t alice_model_weight_bytes(const struct alice_model *m);  /* bytes of weight data held by the backend */
/* The weights are read from the file's mapping (not copied): backends that
 * import host memory, unless they run faster on a copy (the CPU backend;
 * ALICE_MMAP=1 keeps the mapping). */
bool alice_model_weights_in_place(const struct alice_model *m);
bool alice_model_is_recurrent(const struct alice_model *m);      /* has per-sequence recurrent state */
/* An encoder (BERT): bidirectional attention, no lm_head, embeddings only. */
bool alice_model_is_encoder(const struct alice_model *m);
/* <arch>.pooling_type of the GGUF (enum alice_pooling, embed.h), or
 * ALICE_POOLING_UNSPECIFIED (-1) when the file has none or a value outside 0..3. */
int alice_model_pooling(const struct alice_model *m);

struct alice_context_params {
	uint32_t n_ctx;   /* positions per sequence; 0 = min(n_ctx_train, 4096) */
	uint32_t n_seq;   /* sequences (server slots); 0 = 1 */
	uint32_t n_batch; /* max tokens per decode call; 0 = 512 */
	/* Rows give the final hidden state (n_embd floats, alice_context_embd)
	 * instead of logits (embed.h). An encoder model (alice_model_is_encoder)
	 * needs it. */
	bool embeddings;
	/* > 0: the backend also picks each logits row's best topk entries
	 * (alice_context_top), and rows marked batch.top_only are never read
	 * whole. Ignored (alice_context_top_k 0) where the backend cannot, and
	 * under ALICE_TOPK=0 (every row read whole, for comparisons). */
	uint32_t topk;
	/* Cells of the paged KV cache, shared by all sequences (rounded up to
	 * whole blocks of ALICE_KV_BLOCK cells); 0 = n_seq * n_ctx (every
	 * sequence can hold a full context at once, today's memory). At least
	 * n_ctx: one sequence can always grow to a full context. */
	uint32_t n_kv_cells;
};

/* Cells per block of the paged KV cache (a power of two; backend.h
 * ATTENTION src4). Sequences take blocks as their positions grow, share
 * whole blocks of a common prefix (alice_context_seq_share), and give them
 * back on clear/truncate. */
#define ALICE_KV_BLOCK 16

void alice_context_params_default(struct alice_context_params *p);
enum alice_status alice_context_create(struct alice_model *m, const struct alice_context_params *p,
				       struct alice_context **out, struct alice_error *err);
void alice_context_free(struct alice_context *c);
uint32_t alice_context_n_ctx(const struct alice_context *c);
uint32_t alice_context_n_seq(const struct alice_context *c);
uint32_t alice_context_n_batch(const struct alice_context *c);

struct alice_draw {
	float t;
	double r;
};

struct alice_logit_adj;

struct alice_batch {
	int32_t n_tokens;
	const int32_t *token;  /* [n_tokens] */
	const int32_t *pos;    /* [n_tokens] position within its sequence */
	const int32_t *seq;    /* [n_tokens] sequence id < n_seq */
	const bool *logits;    /* [n_tokens] want logits for this row; NULL = last token only */
	/* [n_tokens] or NULL: rows computed as one-token decode steps of their
	 * sequence (MUL_MAT row regime 1 of 1, backend.h), so their logits equal
	 * those of decoding them one at a time, bit for bit (speculative
	 * verification). Up to 63 such rows per sequence keep the attention's
	 * short-batch regime, which is the decode one. */
	const bool *solo;
	/* [n_tokens] or NULL: rows whose logits the caller reads only through
	 * alice_context_top / alice_context_drawn (a topk context then skips
	 * copying the whole row) */
	const bool *top_only;
	/* [n_tokens] or NULL: rows the backend draws from (a topk context):
	 * t > 0 the temperature, r the draw's uniform (alice/temp_sample.h) */
	const struct alice_draw *draw;
	/* [n_tokens] or NULL: a top_only or drawn row's logit bias and
	 * penalties, applied on the device before its entries are taken or
	 * it is drawn: adj[i] holds n_adj[i] records (alice_sampler_adjustments,
	 * at most ALICE_ADJ_ROW_MAX). A row whose records do not fit the step
	 * (or a backend without LOGIT_ADJUST) is read whole, unedited and not
	 * drawn, instead: alice_context_logits gives it. */
	const struct alice_logit_adj *const *adj;
	const int32_t *n_adj;
	/* [n_tokens] or NULL: 1 where the caller reads only the best entry of
	 * a top_only row (a greedy pick); a step whose rows all do takes the
	 * argmax alone on the device. Other values: alice_context_top_k. */
	const int32_t *top_n;
	/* [n_tokens] or NULL: >= 0 where the token is the pick of that output
	 * row of the step launched just before this one (alice_context_launch;
	 * still in flight or finished): its draw, else its best entry (the
	 * caller feeds only rows it picks so); token[i] is then not read. At
	 * most n_batch tokens; needs alice_context_can_feed. */
	const int32_t *feed;
	/* [n_tokens] or NULL: rows (top_only or drawn) whose logprobs the
	 * caller makes from their best entries and alice_context_lse (the
	 * step takes all alice_context_top_k entries of such a row, drawn or
	 * not) */
	const bool *logprobs;
	/* [n_tokens] or NULL: a row's allowed tokens (a grammar's mask:
	 * ceil(n_vocab / 32) words, bit t % 32 of word t / 32 for token t),
	 * applied on the device after its edits (TOKEN_MASK), so the row can
	 * be top_only or drawn; where the backend cannot, the row is read
	 * whole, unmasked (alice_context_mask_ok). */
	const uint32_t *const *mask;
};

/* Run one forward step. Batches larger than n_batch are split internally
 * (an encoder's batch is not: each of its sequences must come whole, from
 * position 0, in one batch of at most n_batch tokens, else ALICE_ERR_RANGE).
 * Errors: ALICE_ERR_RANGE (position beyond n_ctx, seq out of range,
 * non-consecutive positions), ALICE_ERR_BACKEND (the backend failed; the
 * context stays usable, the batch's sequences should be cleared). */
/* A step in two halves, so the host's work on one step's results runs
 * while the next computes: launch starts the step (returns once it is
 * queued where the backend can, else once it ran); finish waits for the
 * oldest launched step and makes its rows what the accessors below give.
 * At most two steps are in flight; decode is launch + finish with none in
 * flight. A launched step's sequence positions count at once (the next
 * launch continues them). */
enum alice_status alice_context_launch(struct alice_context *c, const struct alice_batch *b,
				       struct alice_error *err);
enum alice_status alice_context_finish(struct alice_context *c, struct alice_error *err);
int32_t alice_context_in_flight(const struct alice_context *c);
/* Whether batch.feed works here (the backend has FEED; no recurrent state),
 * and whether output row `row` of the step launched last was picked on the
 * device (drawn, or its best entry with batch.top_n 1), so it can be fed. */
bool alice_context_can_feed(const struct alice_context *c);
bool alice_context_row_fed_ok(const struct alice_context *c, int32_t row);
/* Whether a launched step computes while the host goes on (the backend has
 * graph_launch); else launch returns once the step ran. */
bool alice_context_async(const struct alice_context *c);
/* Whether the backend gives logprobs' normaliser (LOGSUMEXP: batch.logprobs
 * works), and row i's (a batch.logprobs row of the last finished step):
 * the max of its (edited) values, alice_ts_lse_sum, and the value at its
 * drawn token (0 when not drawn). False when the row has none. */
bool alice_context_lse_ok(const struct alice_context *c);
/* Whether batch.mask works here (the backend has TOKEN_MASK), and whether
 * batch.draw does (SAMPLE_TEMP). */
bool alice_context_mask_ok(const struct alice_context *c);
bool alice_context_draw_ok(const struct alice_context *c);
bool alice_context_lse(const struct alice_context *c, int32_t i, float *mx, double *sum, float *drawn_value);
enum alice_status alice_context_decode(struct alice_context *c, const struct alice_batch *b,
				       struct alice_error *err);
/* Logits (n_vocab floats) of the i-th row that asked for logits in the last
 * decode call, in batch order. Borrowed until the next decode. NULL if out of
 * range, in an embeddings context, or a top_only row of a topk context. */
const float *alice_context_logits(const struct alice_context *c, int32_t i);
/* The same for an embeddings context: the hidden state (n_embd floats) of
 * the i-th row that asked for output. NULL if out of range or not an
 * embeddings context. */
const float *alice_context_embd(const struct alice_context *c, int32_t i);
int32_t alice_context_n_logits(const struct alice_context *c);
/* The best alice_context_top_k(c) entries of the i-th logits row, as
 * (id, value bits) pairs, best first (backend.h TOPK); NULL without them
 * (and for a row the backend drew). */
const int32_t *alice_context_top(const struct alice_context *c, int32_t i);
int32_t alice_context_top_k(const struct alice_context *c);
/* The token the backend drew for the i-th logits row (batch.draw) and
 * whether the draw used its uniform; false when the row was not drawn. */
bool alice_context_drawn(const struct alice_context *c, int32_t i, int32_t *token, bool *used);
/* Forget a sequence: its positions restart at 0, recurrent state is zeroed. */
void alice_context_seq_clear(struct alice_context *c, int32_t seq);
/* Keep only positions [0, n) of a sequence (prefix reuse; blocks past n
 * go back to the pool); recurrent models can only keep n == current length
 * or 0 (returns false otherwise), and so does a sequence whose block
 * holding position n is shared (alice_context_seq_keep handles that). */
bool alice_context_seq_truncate(struct alice_context *c, int32_t seq, int32_t n);
int32_t alice_context_seq_len(const struct alice_context *c, int32_t seq);

/* ---- the paged KV cache's blocks (context.c; sizes in blocks of
 * ALICE_KV_BLOCK cells). A decode takes the blocks its positions need; it
 * fails (ALICE_ERR_NOMEM, nothing computed) when the pool cannot give them
 * without taking blocks reserved by other sequences. A sequence that
 * reserved enough blocks for all the positions it will decode never sees
 * that error. */
struct alice_kv_usage {
	uint32_t block_cells;  /* ALICE_KV_BLOCK */
	uint32_t blocks_total;
	uint32_t blocks_used;  /* held by at least one sequence */
	uint32_t blocks_shared;/* held by more than one sequence */
	uint32_t blocks_idle;  /* held only by sequences not marked active (evictable cache) */
	uint32_t blocks_available; /* free and not reserved */
};
/* active: [n_seq] sequences in use (for blocks_idle), or NULL (all active). */
void alice_context_kv_usage(const struct alice_context *c, const bool *active, struct alice_kv_usage *out);
/* Blocks the pool can still promise (free and not reserved). */
uint32_t alice_context_kv_available(const struct alice_context *c);
/* Blocks seq holds. */
uint32_t alice_context_seq_blocks(const struct alice_context *c, int32_t seq);
/* Reserve blocks for positions [0, n_tokens) of seq (n_tokens 0: drop the
 * reservation). False (nothing changed) when the pool cannot promise them. */
bool alice_context_seq_reserve(struct alice_context *c, int32_t seq, int32_t n_tokens);
/* Clear dst, then map the whole blocks among src's first n_tokens positions
 * into it (no copy: the blocks are shared until either side drops them;
 * neither ever writes them again since only whole, full blocks are shared).
 * Returns the positions dst now holds (a multiple of ALICE_KV_BLOCK, maybe
 * 0); -1 when sharing is not possible (a recurrent model: its state is
 * per sequence; a bad id). */
int32_t alice_context_seq_share(struct alice_context *c, int32_t dst, int32_t src, int32_t n_tokens);
/* Keep at most positions [0, n) of seq, fewer when the block holding
 * position n is shared with another sequence (writing it would change the
 * other's cache: the kept length drops to that block's start instead).
 * Returns the positions kept (0 when seq cannot be truncated to n, a
 * recurrent model's: it is then cleared), -1 for a bad id. */
int32_t alice_context_seq_keep(struct alice_context *c, int32_t seq, int32_t n);

#endif
