/* model_internal.h — the model and context structs, shared by model.c
 * (loading) and context.c (KV cache, forward steps). Private to the core. */
#ifndef ALICE_CORE_MODEL_INTERNAL_H
#define ALICE_CORE_MODEL_INTERNAL_H

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/gguf.h"
#include "alice/model.h"
#include "arch/arch.h"
#include "graph.h"

struct alice_model {
	struct alice_gguf *gguf;
	struct alice_tokenizer *tok;
	const struct alice_arch *arch;
	struct alice_hparams hp;
	char name[256];

	/* bound weights: tensors[i] comes from src_info[i] */
	struct alice_tensor *tensors;
	const struct alice_gguf_tensor_info **src_info;
	uint32_t n_tensors;
	int32_t (*layers)[ALICE_W_COUNT];
	struct alice_weights w;
	uint64_t n_params, weight_bytes;

	struct alice_backend *be;
	struct alice_backend_ctx *bctx;
	struct alice_device_info dev;
	/* the weights: one buffer (imported, or allocated when the backend
	 * takes them whole), else runs of whole tensors (upload_weights) */
	struct alice_buffer **wbufs;
	uint32_t n_wbufs;
	bool weights_imported;
};

/* One step's results, as read back. A context has two: a step's are read
 * while the next one runs (alice_context_launch). */
struct ctx_out {
	float *logits; /* [n_logits * out_width] rows read whole */
	int32_t *top;  /* [cap * 2 * topk] */
	int32_t *drawn; /* [cap * 2] (token, used) per row */
	bool *row_full; /* [cap] the row's whole logits were read */
	int32_t *pick_at; /* [cap] FEED's element of the row's pick in the pick buffer, -1: none */
	bool *is_drawn;   /* [cap] the row was drawn (else its drawn entry reads -1) */
	bool *has_top;    /* [cap] the row's best entries were read */
	bool *has_lse;    /* [cap] the row's LOGSUMEXP entry was read */
	int32_t *lse;     /* [cap * 4] LOGSUMEXP's rows */
	size_t cap;       /* rows */
	bool logits_pinned, top_pinned, drawn_pinned, lse_pinned; /* from the backend's host_alloc */
	int32_t n_logits;
	int32_t k; /* TOPK's entries per row in the step (0: none) */
	struct alice_read *reads; /* [n_batch + 2] */
	uint32_t n_reads;
	bool waited;            /* finished on the backend (or computed in place) */
	enum alice_status st;   /* of the wait */
	struct alice_error err;
};

struct alice_context {
	struct alice_model *m;
	uint32_t n_ctx, n_seq, n_batch;
	uint64_t n_cells; /* physical KV cells (the pool) */
	bool embd;          /* rows are hidden states (embed.h), not logits */
	uint32_t out_width; /* floats per output row: n_embd or n_vocab */
	int32_t *seq_end;   /* [n_seq] an encoder chunk's end position per sequence */
	struct alice_buffer *kv_buf;
	struct alice_tensor *k_cache, *v_cache; /* [n_layer]: [hd, n_head_kv, n_cells] physical cells */
	/* paged KV cache: sequence s, position p is virtual cell s * stride + p
	 * (stride = n_ctx rounded up to whole blocks); its physical cell is
	 * tbl[s * max_blk + p / BS] * BS + p % BS (pool->tbl, mirrored on the
	 * device in tbl_buf: ATTENTION's src4, updated when a table changes) */
	uint32_t stride, max_blk;
	struct alice_kv_pool *pool;
	struct alice_buffer *tbl_buf;
	struct alice_tensor tbl_t;
	struct alice_buffer *compute_buf;
	uint64_t compute_size;
	struct alice_gb gb;
	/* gb as last built, planned and bound by run_chunk: a step of the same
	 * token and output counts has the same graph (everything else a step
	 * changes is input data), so it is reused as is */
	bool gb_reuse;
	int32_t gb_n, gb_n_out, gb_logits, gb_top, gb_draw_in, gb_draw, gb_adj;
	/* the sampling ops gb holds (a step builds only those its rows use):
	 * TOPK's k (0: none), LOGIT_ADJUST, SAMPLE_TEMP */
	int32_t gb_k;
	bool gb_adj_f, gb_draw_f, gb_lse_f;
	int32_t gb_lse;
	bool lse_on; /* the backend has LOGSUMEXP */
	bool mask_on, gb_mask_f; /* the backend has TOKEN_MASK; gb holds one */
	int32_t gb_mask_in;
	int32_t *mask_in; /* [(1 + W) * mask_cap] one chunk's TOKEN_MASK records */
	size_t mask_cap;
	struct alice_step gb_step;
	int32_t *seq_len; /* [n_seq] */
	/* host staging of one chunk's inputs */
	int32_t *in_tok, *in_pos, *in_ranges, *in_cells, *in_out;
	int32_t *in_seq, *in_swa;
	bool *in_solo; /* batch.solo of the chunk's rows */
	/* recurrent state (recurrent.c): NULL when the arch has none */
	struct alice_buffer *rs_buf;
	struct alice_tensor *rs; /* [n_layer * ALICE_LAYER_STATES] */
	/* results: out[out_cur] is the last finished step's (the accessors'),
	 * out[out_head] the next launch's; n_flight steps are launched and not
	 * finished (the oldest is out[out_head ^ n_flight & 1]... see ctx_oldest) */
	struct ctx_out out[2];
	int32_t out_cur, out_head, n_flight;
	int32_t topk;      /* the most entries per row TOPK gives (0 = no TOPK) */
	bool draw_on;      /* the backend draws rows at a temperature (SAMPLE_TEMP) */
	int32_t *draw_in;  /* [n_batch * 4] one chunk's SAMPLE_TEMP parameters */
	bool adj_on;       /* the backend edits rows (LOGIT_ADJUST): bias and penalties */
	int32_t *adj_in;   /* [6 * (1 + ALICE_ADJ_STEP_MAX)] one chunk's records */
	bool *adj_ok;      /* [n_batch] per output row of the chunk: its records fit */
	/* the picks on the device (TOPK's pairs from element 0, SAMPLE_TEMP's
	 * from pick_draw_off): a persistent buffer, so the next step's FEED
	 * reads them (batch.feed) */
	bool feed_on;
	bool feed_ok; /* the last launch succeeded: its picks are there to feed */
	struct alice_buffer *pick_buf;
	int64_t pick_n, pick_draw_off; /* elements */
	struct alice_tensor pick_top_t, pick_draw_t, pick_all_t;
	int32_t *in_feed; /* [n_batch] FEED's indices */
	int32_t gb_feed_in, gb_tok_in;
	bool gb_feed_f;
};

#endif
