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
	struct alice_buffer *wbuf;
	bool weights_imported;
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
	bool gb_adj_f, gb_draw_f;
	struct alice_step gb_step;
	int32_t *seq_len; /* [n_seq] */
	/* host staging of one chunk's inputs */
	int32_t *in_tok, *in_pos, *in_ranges, *in_cells, *in_out;
	int32_t *in_seq, *in_swa;
	bool *in_solo; /* batch.solo of the chunk's rows */
	/* recurrent state (recurrent.c): NULL when the arch has none */
	struct alice_buffer *rs_buf;
	struct alice_tensor *rs; /* [n_layer * ALICE_LAYER_STATES] */
	float *logits;    /* [n_logits * out_width] */
	bool logits_pinned; /* from the backend's host_alloc */
	int32_t n_logits;
	size_t logits_cap; /* rows */
	int32_t topk;      /* entries per row of top (0 = none) */
	int32_t *top;      /* [logits_cap * 2 * topk] */
	bool *row_full;    /* [logits_cap] the row's whole logits were read */
	bool draw_on;      /* the backend draws rows at a temperature (SAMPLE_TEMP) */
	int32_t *draw_in;  /* [n_batch * 4] one chunk's SAMPLE_TEMP parameters */
	int32_t *drawn;    /* [logits_cap * 2] (token, used) per row */
	bool adj_on;       /* the backend edits rows (LOGIT_ADJUST): bias and penalties */
	int32_t *adj_in;   /* [6 * (1 + ALICE_ADJ_STEP_MAX)] one chunk's records */
	bool *adj_ok;      /* [n_batch] per output row of the chunk: its records fit */
	struct alice_read *reads; /* [n_batch + 2] one chunk's copies back (plan_reads) */
	bool top_pinned, drawn_pinned; /* top, drawn from the backend's host_alloc */
};

#endif
