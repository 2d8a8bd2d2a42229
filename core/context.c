/* context.c — a model context: the paged F16 KV cache of n_seq sequences,
 * the compute buffer, and forward steps (batch validation, splitting into
 * n_batch chunks, graph build via the arch, logits of the rows that asked).
 *
 * Cache layout: a virtual cell space where sequence s owns cells
 * [s*stride, (s+1)*stride) (stride = n_ctx rounded up to whole blocks of
 * ALICE_KV_BLOCK cells); the token at position p of s is virtual cell
 * s*stride + p. Each token attends the virtual cells [s*stride, s*stride +
 * p + 1), which carries causality and sequence separation into the
 * ATTENTION op; an encoder's token attends every cell of its sequence in the
 * step instead (bidirectional). The physical cache is a pool of blocks
 * (kv_pool.c) shared by all sequences: a sequence takes blocks as its
 * positions grow, and the block table (ATTENTION's src4, backend.h) maps
 * virtual block s*max_blk + p/BS to its physical block. KV_WRITE gets
 * physical cells. Sequences may share whole blocks of a common prefix
 * (alice_context_seq_share); a shared block is never written again: only
 * full blocks are shared and a sequence only appends, or truncates to a
 * position outside its shared blocks (alice_context_seq_keep).
 * An embeddings context reads the hidden states of the output rows
 * instead of logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/log.h"
#include "alice/model.h"
#include "alice/quant.h"
#include "alice/sampling.h"
#include "kv_pool.h"
#include "model_internal.h"
#include "recurrent.h"

#define KV_TYPE ALICE_TYPE_F16 /* llama.cpp's default cache type */

static enum alice_status alice_context_sync_blocks(struct alice_context *c, struct alice_error *err);

void alice_context_params_default(struct alice_context_params *p)
{
	memset(p, 0, sizeof(*p));
}

/* LOGIT_ADJUST records: per row (alice_sampler_adjustments' cap, engine)
 * and per chunk; a row whose records do not fit is read whole */
#define ADJ_STEP_MAX 16384

static int32_t adj_cap(int32_t n_out)
{
	int64_t c = (int64_t)n_out * ALICE_ADJ_ROW_MAX;
	return (int32_t)(c < ADJ_STEP_MAX ? c : ADJ_STEP_MAX);
}

static uint64_t align256(uint64_t x)
{
	return (x + 255) / 256 * 256;
}

/* The sampling ops of a step: TOPK with k entries (0: none), LOGIT_ADJUST,
 * SAMPLE_TEMP. */
struct step_ops {
	int32_t k;
	bool adj, draw, feed; /* feed: some tokens are the previous step's picks (FEED) */
	bool lse;             /* a row's logprobs are made from the device (LOGSUMEXP) */
	bool mask;            /* a row has a grammar's mask (TOKEN_MASK) */
};

/* The pick buffer as TOPK's output [2, k, n_out], SAMPLE_TEMP's [2, n_out]. */
static struct alice_tensor pick_view(const struct alice_context *c, int64_t ne0, int64_t ne1, int64_t ne2,
				     int64_t elem)
{
	struct alice_tensor t = c->pick_all_t;
	t.ne[0] = ne0;
	t.ne[1] = ne1;
	t.ne[2] = ne2;
	t.ne[3] = 1;
	t.nb[0] = 4;
	t.nb[1] = 4 * ne0;
	t.nb[2] = t.nb[1] * ne1;
	t.nb[3] = t.nb[2] * ne2;
	t.offset += (uint64_t)elem * 4;
	return t;
}

/* Build the graph of one chunk of n tokens with n_out logits rows into c->gb.
 * Input tensor indices go to *st; returns the logits tensor or -1. */
static int32_t build_step(struct alice_context *c, int32_t n, int32_t n_out, struct step_ops so,
			  struct alice_step *st)
{
	struct alice_model *m = c->m;
	struct alice_gb *gb = &c->gb;
	alice_gb_reset(gb);
	memset(st, 0, sizeof(*st));
	st->hp = &m->hp;
	st->w = &m->w;
	st->k_cache = c->k_cache;
	st->v_cache = c->v_cache;
	st->n_tokens = n;
	st->n_out = n_out;
	st->embd = c->embd;
	st->inp_tokens = c->gb_tok_in = alice_gb_input(gb, ALICE_TYPE_I32, n, 1);
	c->gb_feed_in = -1;
	c->gb_feed_f = so.feed;
	if (so.feed) { /* the tokens the previous step picked, on the device */
		c->gb_feed_in = alice_gb_input(gb, ALICE_TYPE_I32, n, 1);
		st->inp_tokens = alice_gb_feed(gb, c->gb_tok_in, c->gb_feed_in, alice_gb_external(gb, &c->pick_all_t));
	}
	st->inp_pos = alice_gb_input(gb, ALICE_TYPE_I32, m->hp.rope_mode == ALICE_ROPE_IMROPE ? 4 * n : n, 1);
	st->inp_ranges = alice_gb_input(gb, ALICE_TYPE_I32, 2, n);
	st->inp_cells = alice_gb_input(gb, ALICE_TYPE_I32, n, 1);
	st->inp_out = alice_gb_input(gb, ALICE_TYPE_I32, n_out, 1);
	st->inp_seq = alice_gb_input(gb, ALICE_TYPE_I32, n, 1);
	st->inp_ranges_swa = m->hp.n_swa ? alice_gb_input(gb, ALICE_TYPE_I32, 2, n) : -1;
	alice_gb_set_kv_pages(gb, alice_gb_external(gb, &c->tbl_t), ALICE_KV_BLOCK);
	alice_gb_row_regime(gb, 0, n);     /* MUL_MAT src2 (written by run_chunk) */
	alice_gb_row_regime(gb, 1, n_out);
	st->state = c->rs;
	int32_t logits = m->arch->build(gb, st);
	if (logits < 0 && !alice_gb_failed(gb))
		alice_gb_error(gb, "architecture %s: graph build failed", m->arch->name);
	if (logits >= 0) {
		const struct alice_tensor *t = alice_gb_tensor(gb, logits);
		if (t->ne[0] != c->out_width || t->ne[1] != n_out)
			logits = alice_gb_error(gb, "architecture %s: %s have shape [%lld, %lld], expected [%u, %d]",
						m->arch->name, c->embd ? "embeddings" : "logits", (long long)t->ne[0],
						(long long)t->ne[1], c->out_width, n_out);
	}
	alice_gb_set_output(gb, logits);
	c->gb_k = so.k;
	c->gb_adj_f = so.adj;
	c->gb_draw_f = so.draw;
	c->gb_adj = -1;
	if (logits >= 0 && so.adj) {
		c->gb_adj = alice_gb_input(gb, ALICE_TYPE_I32, 6, 1 + adj_cap(n_out));
		if (alice_gb_logit_adjust(gb, logits, c->gb_adj) < 0)
			return -1;
	}
	c->gb_mask_in = -1;
	c->gb_mask_f = so.mask;
	if (logits >= 0 && so.mask) {
		c->gb_mask_in = alice_gb_input(gb, ALICE_TYPE_I32, 1 + (m->hp.n_vocab + 31) / 32, 1 + n_out);
		if (alice_gb_token_mask(gb, logits, c->gb_mask_in) < 0)
			return -1;
	}
	c->gb_top = -1;
	if (logits >= 0 && so.k > 0) {
		struct alice_tensor pt = pick_view(c, 2, so.k, n_out, 0);
		c->gb_top = alice_gb_topk(gb, logits, so.k, c->pick_buf ? alice_gb_external(gb, &pt) : -1);
		if (c->gb_top < 0)
			return -1;
		alice_gb_set_output(gb, c->gb_top);
	}
	c->gb_draw_in = c->gb_draw = -1;
	if (logits >= 0 && so.draw) {
		c->gb_draw_in = alice_gb_input(gb, ALICE_TYPE_I32, 4, n_out);
		struct alice_tensor pt = pick_view(c, 2, n_out, 1, c->pick_draw_off);
		c->gb_draw = alice_gb_sample_temp(gb, logits, c->gb_draw_in, c->pick_buf ? alice_gb_external(gb, &pt) : -1);
		if (c->gb_draw < 0)
			return -1;
		alice_gb_set_output(gb, c->gb_draw);
	}
	c->gb_lse = -1;
	c->gb_lse_f = so.lse;
	if (logits >= 0 && so.lse) {
		c->gb_lse = alice_gb_logsumexp(gb, logits, c->gb_draw);
		if (c->gb_lse < 0)
			return -1;
		alice_gb_set_output(gb, c->gb_lse);
	}
	return logits;
}

static void settle(struct alice_context *c);

static enum alice_status ensure_compute(struct alice_context *c, uint64_t size, struct alice_error *err)
{
	if (size <= c->compute_size && c->compute_buf)
		return ALICE_OK;
	settle(c); /* no step in flight uses the buffer freed */
	const struct alice_backend_vtable *vt = c->m->be->vt;
	if (c->compute_buf)
		vt->buffer_free(c->m->bctx, c->compute_buf);
	c->compute_buf = NULL;
	c->compute_size = 0;
	if (vt->buffer_alloc(c->m->bctx, size, ALICE_BUFFER_COMPUTE, &c->compute_buf) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: cannot allocate %llu bytes of compute buffer: %s",
				  c->m->be->name, (unsigned long long)size, vt->last_error(c->m->bctx));
	c->compute_size = size;
	return ALICE_OK;
}

static void describe_node(const struct alice_gb *gb, const struct alice_node *nd, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%s", alice_op_name(nd->op));
	for (int s = 0; s < ALICE_MAX_SRC && off < len; s++) {
		const struct alice_tensor *t = alice_gb_tensor(gb, nd->src[s]);
		if (!t)
			continue;
		off += (size_t)snprintf(buf + off, len - off, " src%d %s [%lld,%lld,%lld]", s, alice_type_name(t->type),
					(long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2]);
	}
}

enum alice_status alice_context_create(struct alice_model *m, const struct alice_context_params *p,
				       struct alice_context **out, struct alice_error *err)
{
	*out = NULL;
	struct alice_context_params def;
	if (!p) {
		alice_context_params_default(&def);
		p = &def;
	}
	const struct alice_hparams *hp = &m->hp;
	const struct alice_backend_vtable *vt = m->be->vt;
	struct alice_context *c = calloc(1, sizeof(*c));
	if (!c)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	enum alice_status st = ALICE_OK;
	c->m = m;
	alice_gb_init(&c->gb);
	c->n_ctx = p->n_ctx ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
	c->n_seq = p->n_seq ? p->n_seq : 1;
	c->n_batch = p->n_batch ? p->n_batch : 512;
	c->embd = p->embeddings;
	c->out_width = c->embd ? hp->n_embd : hp->n_vocab;
	/* ALICE_TOPK=0: every row read whole, for comparisons */
	const char *tk = getenv("ALICE_TOPK");
	bool no_top = c->embd || (tk && !strcmp(tk, "0"));
	c->topk = no_top ? 0 : (int32_t)(p->topk < ALICE_TOPK_MAX ? p->topk : ALICE_TOPK_MAX);
	if (c->topk > (int32_t)hp->n_vocab)
		c->topk = (int32_t)hp->n_vocab;
	c->draw_on = c->topk > 0;
	c->adj_on = c->topk > 0;
	if (m->arch->encoder && c->n_ctx > hp->n_ctx_train) { /* absolute position embeddings end there */
		st = alice_fail(err, ALICE_ERR_RANGE, "%s: a %s model has positions for %u tokens; n_ctx %u is more",
				alice_gguf_path(m->gguf), m->arch->name, hp->n_ctx_train, c->n_ctx);
		goto fail;
	}
	if (m->arch->encoder && !c->embd) {
		st = alice_fail(err, ALICE_ERR_UNSUPPORTED,
				"%s: a %s model is an encoder without a language-model head: it only computes embeddings",
				alice_gguf_path(m->gguf), m->arch->name);
		goto fail;
	}
	if (c->n_ctx == 0 || c->n_ctx > (1u << 24) || c->n_seq > 4096 || c->n_batch > (1u << 20)) {
		st = alice_fail(err, ALICE_ERR_RANGE, "context: n_ctx %u / n_seq %u / n_batch %u out of range", c->n_ctx,
				c->n_seq, c->n_batch);
		goto fail;
	}
	if (vt->abi_minor < 4) { /* ATTENTION's block table is 1.4 */
		st = alice_fail(err, ALICE_ERR_UNSUPPORTED,
				"backend %s: ABI %u.%u has no paged attention (1.4): rebuild the backend", m->be->name,
				vt->abi_major, vt->abi_minor);
		goto fail;
	}
	c->stride = (c->n_ctx + ALICE_KV_BLOCK - 1) / ALICE_KV_BLOCK * ALICE_KV_BLOCK;
	c->max_blk = c->stride / ALICE_KV_BLOCK;
	if ((uint64_t)c->stride * c->n_seq > INT32_MAX) {
		st = alice_fail(err, ALICE_ERR_RANGE, "context: %u sequences of %u cells is too many", c->n_seq, c->n_ctx);
		goto fail;
	}
	c->n_cells = p->n_kv_cells ? ((uint64_t)p->n_kv_cells + ALICE_KV_BLOCK - 1) / ALICE_KV_BLOCK * ALICE_KV_BLOCK
				   : (uint64_t)c->stride * c->n_seq;
	if (c->n_cells < c->stride) {
		st = alice_fail(err, ALICE_ERR_RANGE,
				"context: a KV pool of %u cells cannot hold one full context of %u positions",
				p->n_kv_cells, c->n_ctx);
		goto fail;
	}
	if (c->n_cells > (uint64_t)c->stride * c->n_seq) /* more than every sequence can use */
		c->n_cells = (uint64_t)c->stride * c->n_seq;
	c->pool = alice_kv_pool_create((uint32_t)(c->n_cells / ALICE_KV_BLOCK), c->n_seq, c->max_blk);
	if (!c->pool) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory for the KV block tables");
		goto fail;
	}
	c->seq_len = calloc(c->n_seq, sizeof(*c->seq_len));
	c->seq_end = calloc(c->n_seq, sizeof(*c->seq_end));
	c->k_cache = calloc(hp->n_layer, sizeof(*c->k_cache));
	c->v_cache = calloc(hp->n_layer, sizeof(*c->v_cache));
	c->in_tok = malloc(c->n_batch * sizeof(int32_t));
	c->in_pos = malloc(4 * c->n_batch * sizeof(int32_t)); /* IMROPE: 4 per token */
	c->in_ranges = malloc(2 * c->n_batch * sizeof(int32_t));
	c->in_cells = malloc(c->n_batch * sizeof(int32_t));
	c->draw_in = malloc(4 * (size_t)c->n_batch * sizeof(int32_t));
	c->adj_in = calloc(6 * (size_t)(1 + ADJ_STEP_MAX), sizeof(int32_t)); /* written in whole buckets */
	c->adj_ok = malloc(c->n_batch * sizeof(bool));
	c->in_out = malloc(c->n_batch * sizeof(int32_t));
	c->in_seq = malloc(c->n_batch * sizeof(int32_t));
	c->in_solo = calloc(c->n_batch, sizeof(bool));
	c->in_swa = malloc(2 * c->n_batch * sizeof(int32_t));
	if (!c->seq_len || !c->seq_end || !c->k_cache || !c->v_cache || !c->in_tok || !c->in_pos || !c->in_ranges ||
	    !c->in_cells || !c->draw_in || !c->adj_in || !c->adj_ok || !c->in_out || !c->in_seq || !c->in_solo ||
	    !c->in_swa) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto fail;
	}

	/* The cache's size must not overflow (hostile head dims x many cells). */
	uint64_t cell_bytes = 2 * (uint64_t)hp->n_head_kv * ((uint64_t)hp->head_dim_k + hp->head_dim_v);
	if (cell_bytes > (UINT64_MAX / 4) / c->n_cells / hp->n_layer) {
		st = alice_fail(err, ALICE_ERR_RANGE, "context: a KV cache of %llu cells is too large for this model",
				(unsigned long long)c->n_cells);
		goto fail;
	}
	/* KV cache: per layer K [hd_k, n_head_kv, n_cells] then V, F16. */
	uint64_t off = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		if (m->arch->layer_has_kv && !m->arch->layer_has_kv(hp, (int)il))
			continue; /* e.g. a recurrent layer: no cache (buf stays NULL) */
		struct alice_tensor *kv[2] = {&c->k_cache[il], &c->v_cache[il]};
		uint32_t hd[2] = {hp->head_dim_k, hp->head_dim_v};
		for (int j = 0; j < 2; j++) {
			struct alice_tensor *t = kv[j];
			t->type = KV_TYPE;
			t->ne[0] = hd[j];
			t->ne[1] = hp->n_head_kv;
			t->ne[2] = (int64_t)c->n_cells;
			t->ne[3] = 1;
			t->nb[0] = 2;
			t->nb[1] = 2 * t->ne[0];
			t->nb[2] = t->nb[1] * t->ne[1];
			t->nb[3] = t->nb[2] * t->ne[2];
			t->offset = off;
			off = align256(off + (uint64_t)t->nb[3]);
		}
	}
	if (vt->buffer_alloc(m->bctx, off ? off : 256, ALICE_BUFFER_CACHE, &c->kv_buf) != ALICE_OK) {
		st = alice_fail(err, ALICE_ERR_BACKEND, "backend %s: cannot allocate the KV cache (%llu bytes): %s",
				m->be->name, (unsigned long long)off, vt->last_error(m->bctx));
		goto fail;
	}
	if (vt->buffer_clear(m->bctx, c->kv_buf, 0, off ? off : 256) != ALICE_OK) {
		st = alice_fail(err, ALICE_ERR_BACKEND, "backend %s: clearing the KV cache failed: %s", m->be->name,
				vt->last_error(m->bctx));
		goto fail;
	}
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		if (c->k_cache[il].ne[0] == 0)
			continue;
		c->k_cache[il].buf = c->kv_buf;
		c->v_cache[il].buf = c->kv_buf;
	}
	/* the block table, on the device: ATTENTION's src4 */
	uint64_t tbytes = (uint64_t)c->n_seq * c->max_blk * sizeof(int32_t);
	if (vt->buffer_alloc(m->bctx, tbytes, ALICE_BUFFER_CACHE, &c->tbl_buf) != ALICE_OK) {
		st = alice_fail(err, ALICE_ERR_BACKEND, "backend %s: cannot allocate the KV block table: %s", m->be->name,
				vt->last_error(m->bctx));
		goto fail;
	}
	c->tbl_t.type = ALICE_TYPE_I32;
	c->tbl_t.ne[0] = (int64_t)c->n_seq * c->max_blk;
	c->tbl_t.ne[1] = c->tbl_t.ne[2] = c->tbl_t.ne[3] = 1;
	c->tbl_t.nb[0] = 4;
	c->tbl_t.nb[1] = c->tbl_t.nb[2] = c->tbl_t.nb[3] = (int64_t)tbytes;
	c->tbl_t.buf = c->tbl_buf;
	if ((st = alice_context_sync_blocks(c, err)) != ALICE_OK)
		goto fail;
	if ((st = alice_rs_create(c, err)) != ALICE_OK) /* recurrent state, if the arch has any */
		goto fail;

	/* the picks (TOPK, SAMPLE_TEMP outputs), kept on the device for FEED;
	 * not with a recurrent state, which a step cannot take back (a step
	 * launched past a request's end would leave its token in the state) */
	if (c->topk > 0 || c->draw_on) {
		c->pick_draw_off = 2 * (int64_t)(c->topk > 0 ? c->topk : 1) * c->n_batch;
		c->pick_n = c->pick_draw_off + 2 * (int64_t)c->n_batch;
		if (vt->buffer_alloc(m->bctx, (uint64_t)c->pick_n * 4, ALICE_BUFFER_CACHE, &c->pick_buf) != ALICE_OK) {
			st = alice_fail(err, ALICE_ERR_BACKEND, "backend %s: cannot allocate the picks buffer: %s",
					m->be->name, vt->last_error(m->bctx));
			goto fail;
		}
		c->pick_all_t.type = ALICE_TYPE_I32;
		c->pick_all_t.ne[0] = c->pick_n;
		c->pick_all_t.ne[1] = c->pick_all_t.ne[2] = c->pick_all_t.ne[3] = 1;
		c->pick_all_t.nb[0] = 4;
		c->pick_all_t.nb[1] = c->pick_all_t.nb[2] = c->pick_all_t.nb[3] = c->pick_n * 4;
		c->pick_all_t.buf = c->pick_buf;
		c->feed_on = !c->rs && !c->embd;
		c->lse_on = c->topk > 0 && !c->embd;
		c->mask_on = !c->embd;
	}
	c->in_feed = malloc(c->n_batch * sizeof(int32_t));
	for (int i = 0; i < 2; i++) {
		c->out[i].reads = malloc((c->n_batch + 2) * sizeof(struct alice_read));
		if (!c->out[i].reads || !c->in_feed) {
			st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
			goto fail;
		}
	}

	/* Worst-case step (a full batch, one logits row): size the compute
	 * buffer and ask the backend whether it can run every node. */
	struct alice_step stp;
	c->gb_reuse = false;
worst_case:;
	struct step_ops all = {c->topk, c->adj_on, c->draw_on, c->feed_on, c->lse_on, c->mask_on};
	int32_t logits = build_step(c, (int32_t)c->n_batch, 1, all, &stp);
	uint64_t size = 0;
	if (logits < 0) {
		st = alice_fail(err, ALICE_ERR_INVALID, "%s", c->gb.err.msg);
		goto fail;
	}
	if ((st = alice_gb_plan(&c->gb, &size, err)) != ALICE_OK)
		goto fail;
	if ((st = ensure_compute(c, size, err)) != ALICE_OK)
		goto fail;
	alice_gb_bind(&c->gb, c->compute_buf);
	struct alice_graph g = alice_gb_graph(&c->gb);
	for (uint32_t i = 0; i < g.n_nodes; i++) {
		if (!vt->supports_op(m->bctx, &g, &g.nodes[i])) {
			if (g.nodes[i].op == ALICE_OP_TOKEN_MASK) { /* optional: constrained rows are read whole */
				alice_log(ALICE_LOG_INFO, "context: backend %s: no grammar masks on the device", m->be->name);
				c->mask_on = false;
				goto worst_case;
			}
			if (g.nodes[i].op == ALICE_OP_LOGSUMEXP) { /* optional: logprobs rows are read whole */
				alice_log(ALICE_LOG_INFO, "context: backend %s: no logprobs on the device", m->be->name);
				c->lse_on = false;
				goto worst_case;
			}
			if (g.nodes[i].op == ALICE_OP_FEED) { /* optional: no step launched before the last is read */
				alice_log(ALICE_LOG_INFO, "context: backend %s: no pipelined steps (FEED)", m->be->name);
				c->feed_on = false;
				goto worst_case;
			}
			if (g.nodes[i].op == ALICE_OP_LOGIT_ADJUST) { /* optional: such rows are read whole */
				alice_log(ALICE_LOG_INFO, "context: backend %s: no logit bias / penalties on the device",
					  m->be->name);
				c->adj_on = false;
				goto worst_case;
			}
			if (g.nodes[i].op == ALICE_OP_TOPK || g.nodes[i].op == ALICE_OP_SAMPLE_TEMP) {
				/* optional: those rows are read whole instead */
				bool top = g.nodes[i].op == ALICE_OP_TOPK;
				alice_log(ALICE_LOG_INFO, "context: backend %s: no %s on the device", m->be->name,
					  top ? "top-k (TOPK)" : "temperature draw (SAMPLE_TEMP)");
				c->draw_on = false;
				if (top)
					c->topk = 0;
				c->adj_on = c->adj_on && c->topk > 0;
				goto worst_case;
			}
			char what[512];
			describe_node(&c->gb, &g.nodes[i], what, sizeof(what));
			st = alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: backend %s cannot run %s",
					alice_gguf_path(m->gguf), m->be->name, what);
			goto fail;
		}
	}
	alice_log(ALICE_LOG_INFO,
		  "context: n_ctx %u x %u seq, n_batch %u, KV cache %.1f MB (F16, %llu cells in blocks of %d), "
		  "compute %.1f MB",
		  c->n_ctx, c->n_seq, c->n_batch, (double)off / 1e6, (unsigned long long)c->n_cells, ALICE_KV_BLOCK,
		  (double)size / 1e6);
	*out = c;
	return ALICE_OK;
fail:
	alice_context_free(c);
	return st;
}

/* Host memory the backend's reads fill fastest (host_alloc), else malloc. */
static void *host_buf(struct alice_context *c, size_t bytes, bool *pinned)
{
	const struct alice_backend_vtable *vt = c->m->be->vt;
	void *p = NULL;
	if (ALICE_VT_HAS(vt, host_alloc) && ALICE_VT_HAS(vt, host_free))
		p = vt->host_alloc(c->m->bctx, bytes);
	*pinned = p != NULL;
	return p ? p : malloc(bytes);
}

static void host_buf_free(struct alice_context *c, void *p, bool pinned)
{
	if (pinned)
		c->m->be->vt->host_free(c->m->bctx, p);
	else
		free(p);
}

/* The rows of o (its reads stay) */
static void out_free(struct alice_context *c, struct ctx_out *o)
{
	host_buf_free(c, o->logits, o->logits_pinned);
	host_buf_free(c, o->top, o->top_pinned);
	host_buf_free(c, o->drawn, o->drawn_pinned);
	free(o->row_full);
	free(o->pick_at);
	free(o->is_drawn);
	free(o->has_top);
	free(o->has_lse);
	host_buf_free(c, o->lse, o->lse_pinned);
	o->logits = NULL;
	o->top = o->drawn = o->pick_at = o->lse = NULL;
	o->row_full = o->is_drawn = o->has_top = o->has_lse = NULL;
	o->logits_pinned = o->top_pinned = o->drawn_pinned = o->lse_pinned = false;
	o->cap = 0;
	o->n_logits = 0;
}

/* o holds at least rows rows (its contents are rewritten by every step) */
static enum alice_status out_reserve(struct alice_context *c, struct ctx_out *o, size_t rows,
				     struct alice_error *err)
{
	if (rows <= o->cap)
		return ALICE_OK;
	out_free(c, o);
	o->logits = host_buf(c, rows * (size_t)c->out_width * sizeof(float), &o->logits_pinned);
	o->row_full = malloc(rows * sizeof(*o->row_full));
	o->pick_at = malloc(rows * sizeof(*o->pick_at));
	o->is_drawn = malloc(rows * sizeof(*o->is_drawn));
	o->has_top = malloc(rows * sizeof(*o->has_top));
	o->has_lse = malloc(rows * sizeof(*o->has_lse));
	/* page-locked like every read's dst: a read into other memory is made
	 * after the wait, when the next step (pipelined) may have overwritten
	 * its source */
	o->lse = host_buf(c, rows * 4 * sizeof(*o->lse), &o->lse_pinned);
	o->top = c->topk ? host_buf(c, rows * 2 * (size_t)c->topk * sizeof(*o->top), &o->top_pinned) : NULL;
	o->drawn = c->draw_on ? host_buf(c, rows * 2 * sizeof(*o->drawn), &o->drawn_pinned) : NULL;
	if (!o->logits || !o->row_full || !o->pick_at || !o->is_drawn || !o->has_top || !o->has_lse || !o->lse ||
	    (c->topk && !o->top) ||
	    (c->draw_on && !o->drawn)) {
		out_free(c, o);
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory for %zu logits rows", rows);
	}
	o->cap = rows;
	return ALICE_OK;
}


void alice_context_free(struct alice_context *c)
{
	if (!c)
		return;
	settle(c); /* nothing in flight over the buffers freed below */
	const struct alice_backend_vtable *vt = c->m->be->vt;
	if (c->pick_buf)
		vt->buffer_free(c->m->bctx, c->pick_buf);
	if (c->compute_buf)
		vt->buffer_free(c->m->bctx, c->compute_buf);
	if (c->kv_buf)
		vt->buffer_free(c->m->bctx, c->kv_buf);
	if (c->tbl_buf)
		vt->buffer_free(c->m->bctx, c->tbl_buf);
	alice_kv_pool_free(c->pool);
	alice_rs_free(c);
	alice_gb_free(&c->gb);
	free(c->seq_len);
	free(c->seq_end);
	free(c->k_cache);
	free(c->v_cache);
	free(c->in_tok);
	free(c->in_pos);
	free(c->in_ranges);
	free(c->in_cells);
	free(c->draw_in);
	free(c->adj_in);
	free(c->adj_ok);
	free(c->in_feed);
	free(c->mask_in);
	free(c->in_out);
	free(c->in_seq);
	free(c->in_solo);
	free(c->in_swa);
	for (int i = 0; i < 2; i++) {
		out_free(c, &c->out[i]);
		free(c->out[i].reads);
	}
	free(c);
}

uint32_t alice_context_n_ctx(const struct alice_context *c) { return c->n_ctx; }
uint32_t alice_context_n_seq(const struct alice_context *c) { return c->n_seq; }
uint32_t alice_context_n_batch(const struct alice_context *c) { return c->n_batch; }

static bool wants_logits(const struct alice_batch *b, int32_t i)
{
	return b->logits ? b->logits[i] : i == b->n_tokens - 1;
}

/* The first `bytes` of input tensor t (0: all of it). */
static enum alice_status write_input_n(struct alice_context *c, int32_t t, const void *data, uint64_t bytes,
				       struct alice_error *err)
{
	const struct alice_tensor *tt = alice_gb_tensor(&c->gb, t);
	uint64_t all = (uint64_t)tt->nb[3] * (uint64_t)tt->ne[3];
	bytes = bytes && bytes < all ? bytes : all;
	const struct alice_backend_vtable *vt = c->m->be->vt;
	if (vt->buffer_write(c->m->bctx, c->compute_buf, tt->offset, data, bytes) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: writing step inputs failed: %s", c->m->be->name,
				  vt->last_error(c->m->bctx));
	return ALICE_OK;
}

static enum alice_status write_input(struct alice_context *c, int32_t t, const void *data, struct alice_error *err)
{
	return write_input_n(c, t, data, 0, err);
}

/* The MUL_MAT row regimes (backend.h, MUL_MAT src2) of a step: per token
 * row the number of tokens of its sequence in the step and the row's index
 * among them, the same over output rows; so each sequence is computed as
 * llama.cpp computes it alone (one sequence per decode), whatever shares
 * the step. */
static enum alice_status write_row_regimes(struct alice_context *c, int32_t n, int32_t n_out,
					   struct alice_error *err)
{
	enum alice_status st = ALICE_OK;
	int32_t *cnt = calloc(4 * (size_t)c->n_seq, sizeof(*cnt)); /* counts, then running indices */
	int32_t *rg = malloc(2 * (size_t)(n > n_out ? n : n_out) * sizeof(*rg));
	if (!cnt || !rg) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto out;
	}
	int32_t *tok_n = cnt, *out_n = cnt + c->n_seq, *tok_i = cnt + 2 * c->n_seq, *out_i = cnt + 3 * c->n_seq;
	for (int32_t i = 0; i < n; i++)
		if (!c->in_solo[i])
			tok_n[c->in_seq[i]]++;
	for (int32_t j = 0; j < n_out; j++)
		if (!c->in_solo[c->in_out[j]])
			out_n[c->in_seq[c->in_out[j]]]++;
	int32_t max_tok = 0, max_out = 0, max_seq = 0;
	for (int32_t i = 0; i < n; i++) { /* the attention hint counts solo rows too */
		int32_t s = c->in_seq[i];
		if (++out_i[s] > max_seq)
			max_seq = out_i[s];
	}
	memset(out_i, 0, c->n_seq * sizeof(*out_i));
	alice_gb_set_attn_seq_max(&c->gb, max_seq);
	for (int32_t i = 0; i < n; i++) {
		int32_t s = c->in_seq[i];
		rg[2 * i] = c->in_solo[i] ? 1 : tok_n[s]; /* a solo row: its own one-row step */
		rg[2 * i + 1] = c->in_solo[i] ? 0 : tok_i[s]++;
		max_tok = rg[2 * i] > max_tok ? rg[2 * i] : max_tok;
	}
	if ((st = write_input(c, c->gb.row_hint[0].tensor, rg, err)) != ALICE_OK)
		goto out;
	for (int32_t j = 0; j < n_out; j++) {
		int32_t s = c->in_seq[c->in_out[j]];
		bool solo = c->in_solo[c->in_out[j]];
		rg[2 * j] = solo ? 1 : out_n[s];
		rg[2 * j + 1] = solo ? 0 : out_i[s]++;
		max_out = rg[2 * j] > max_out ? rg[2 * j] : max_out;
	}
	alice_gb_set_row_max(&c->gb, 0, max_tok);
	alice_gb_set_row_max(&c->gb, 1, max_out);
	st = write_input(c, c->gb.row_hint[1].tensor, rg, err);
out:
	free(cnt);
	free(rg);
	return st;
}

/* SAMPLE_TEMP's parameters for the chunk's output rows (zeros: not drawn) */
static enum alice_status write_draws(struct alice_context *c, const struct alice_batch *b, int32_t start,
				     int32_t n_out, struct alice_error *err)
{
	for (int32_t j = 0; j < n_out; j++) {
		const struct alice_draw *d = b->draw ? &b->draw[start + c->in_out[j]] : NULL;
		int32_t *o = c->draw_in + 4 * j;
		memset(o, 0, 4 * sizeof(*o));
		if (d && d->t > 0 && c->adj_ok[j]) {
			uint64_t r;
			memcpy(&o[0], &d->t, 4);
			memcpy(&r, &d->r, 8);
			o[1] = (int32_t)(uint32_t)r;
			o[2] = (int32_t)(uint32_t)(r >> 32);
		}
	}
	return write_input(c, c->gb_draw_in, c->draw_in, err);
}

/* Whether output row j of the chunk at start is read back whole. */
static bool row_read_whole(const struct alice_context *c, const struct alice_batch *b, int32_t start, int32_t j)
{
	const int32_t bi = start + c->in_out[j];
	return !c->topk || !b->top_only || !b->top_only[bi] || !c->adj_ok[j] || (b->mask && b->mask[bi] && !c->mask_on);
}

/* Whether batch row bi's logprobs come from its entries and LOGSUMEXP. */
static bool row_lp(const struct alice_batch *b, int32_t bi)
{
	return b->logprobs && b->logprobs[bi] && b->top_only && b->top_only[bi];
}

/* Whether output row j was drawn by the backend. */
static bool row_drawn(const struct alice_context *c, const struct alice_batch *b, int32_t start, int32_t j)
{
	return c->gb_draw >= 0 && b->draw && b->draw[start + c->in_out[j]].t > 0 && c->adj_ok[j];
}

/* The sampling ops the chunk's output rows (in_out[0, n_out)) use: TOPK
 * when a row is read through its entries and not drawn, with k = 1 when
 * every such row reads only its best entry (batch.top_n 1: a greedy step's
 * argmax is much cheaper than the best 128); LOGIT_ADJUST when a row has
 * records; SAMPLE_TEMP when a row is drawn. */
static struct step_ops step_ops_of(const struct alice_context *c, const struct alice_batch *b, int32_t start,
				   int32_t n_out)
{
	struct step_ops so = {0, false, false, false, false, false};
	for (int32_t j = 0; j < n_out; j++) {
		int32_t bi = start + c->in_out[j];
		bool drawn = c->draw_on && b->draw && b->draw[bi].t > 0;
		bool lp = c->lse_on && row_lp(b, bi);
		so.draw = so.draw || drawn;
		so.adj = so.adj || (c->adj_on && b->adj && b->n_adj && b->adj[bi] && b->n_adj[bi] > 0);
		so.lse = so.lse || lp;
		so.mask = so.mask || (c->mask_on && b->mask && b->mask[bi]);
		if (c->topk > 0 && b->top_only && b->top_only[bi] && (!drawn || lp)) {
			int32_t want = b->top_n && b->top_n[bi] == 1 && !lp ? 1 : c->topk;
			so.k = want > so.k ? want : so.k;
		}
	}
	/* a drawn row whose records do not fit is read whole; one that fits
	 * but is not drawn does not exist, so k need not cover drawn rows */
	return so;
}

/* The chunk's LOGIT_ADJUST records (the output rows' edits, in row order
 * while they fit; adj_ok[j] false for a row whose edits do not, which is
 * then read whole and not drawn), or with no such op, adj_ok[j] false for
 * every row that has edits. */
static enum alice_status write_adjust(struct alice_context *c, const struct alice_batch *b, int32_t start,
				      int32_t n_out, struct alice_error *err)
{
	int32_t cap = c->adj_on ? adj_cap(n_out) : 0, n = 0;
	for (int32_t j = 0; j < n_out; j++) {
		int32_t bi = start + c->in_out[j];
		int32_t k = b->adj && b->n_adj && b->adj[bi] ? b->n_adj[bi] : 0;
		c->adj_ok[j] = k <= 0 || (c->adj_on && k <= cap - n);
		if (k <= 0 || !c->adj_ok[j])
			continue;
		for (int32_t i = 0; i < k; i++) {
			const struct alice_logit_adj *a = &b->adj[bi][i];
			int32_t *o = c->adj_in + 6 * (1 + n + i);
			o[0] = j;
			o[1] = a->token;
			o[2] = (int32_t)a->flags;
			memcpy(&o[3], &a->bias, 4);
			memcpy(&o[4], &a->rp, 4);
			memcpy(&o[5], &a->pen, 4);
		}
		n += k;
	}
	if (c->gb_adj < 0) /* no records this step: no op */
		return ALICE_OK;
	memset(c->adj_in, 0, 6 * sizeof(int32_t));
	c->adj_in[0] = n;
	/* the op reads no further than the count: write the records in use,
	 * rounded up to a power of two of at least 64, so that the write's size
	 * (part of a captured CUDA graph's inputs) takes few values */
	uint64_t recs = 64;
	while (recs < (uint64_t)(1 + n))
		recs *= 2;
	return write_input_n(c, c->gb_adj, c->adj_in, recs * 6 * sizeof(int32_t), err);
}

/* The chunk's TOKEN_MASK records: one per output row with a mask, the
 * count first; written in power-of-two buckets (a captured CUDA graph's
 * input size takes few values). */
static enum alice_status write_masks(struct alice_context *c, const struct alice_batch *b, int32_t start,
				     int32_t n_out, struct alice_error *err)
{
	const int64_t W = 1 + (c->m->hp.n_vocab + 31) / 32;
	if ((size_t)(1 + n_out) > c->mask_cap) {
		int32_t *nm = realloc(c->mask_in, (size_t)(1 + n_out) * (size_t)W * sizeof(int32_t));
		if (!nm)
			return alice_fail(err, ALICE_ERR_NOMEM, "out of memory for %d grammar masks", n_out);
		c->mask_in = nm;
		c->mask_cap = (size_t)(1 + n_out);
	}
	int32_t cnt = 0;
	for (int32_t j = 0; j < n_out; j++) {
		const int32_t bi = start + c->in_out[j];
		if (!b->mask || !b->mask[bi] || row_read_whole(c, b, start, j)) /* a row read whole stays unmasked */
			continue;
		int32_t *e = c->mask_in + (size_t)W * (size_t)(1 + cnt++);
		e[0] = j;
		memcpy(&e[1], b->mask[bi], (size_t)(W - 1) * sizeof(int32_t));
	}
	memset(c->mask_in, 0, (size_t)W * sizeof(int32_t));
	c->mask_in[0] = cnt;
	uint64_t recs = 1;
	while (recs < (uint64_t)cnt)
		recs *= 2;
	return write_input_n(c, c->gb_mask_in, c->mask_in, (1 + recs) * (uint64_t)W * sizeof(int32_t), err);
}

/* The copies of the step's n_out output rows back, into o->reads: the
 * top-k pairs (a step with TOPK, when a row not drawn needs them), the
 * drawn tokens (when a row was drawn), and the whole rows not marked
 * top_only, in runs of adjacent rows; and where each row's pick lies in
 * the pick buffer (o->pick_at, for the next step's FEED: its draw, else
 * its best entry; only the last chunk's, the earlier ones' are gone). */
static void plan_reads(struct alice_context *c, struct ctx_out *o, const struct alice_batch *b, int32_t start,
		       int32_t n_out, int32_t logits, bool last_chunk)
{
	const struct alice_tensor *lt = alice_gb_tensor(&c->gb, logits);
	uint32_t n = 0;
	const int32_t base = o->n_logits;
	/* skip what no row of the chunk uses (the entries of a drawn row, the
	 * draws of a chunk with none) */
	bool any_draw = false, any_top = false, any_lse = false;
	for (int32_t j = 0; j < n_out; j++) {
		bool drawn = row_drawn(c, b, start, j), whole = row_read_whole(c, b, start, j);
		bool lp = c->gb_lse >= 0 && !whole && row_lp(b, start + c->in_out[j]);
		o->is_drawn[base + j] = drawn;
		o->has_top[base + j] = c->gb_top >= 0 && (!drawn || lp);
		o->has_lse[base + j] = lp;
		any_draw = any_draw || drawn;
		any_top = any_top || o->has_top[base + j];
		any_lse = any_lse || lp;
		/* a row's pick is on the device when it was drawn, or when its
		 * caller reads only its best entry (greedy) and it took its edits */
		const int32_t bi = start + c->in_out[j];
		const bool best = c->gb_k > 0 && !row_read_whole(c, b, start, j) && b->top_n && b->top_n[bi] == 1;
		o->pick_at[base + j] = !last_chunk || !c->pick_buf ? -1
				       : drawn			    ? (int32_t)(c->pick_draw_off + 2 * j)
				       : best			    ? 2 * c->gb_k * j
								    : -1;
	}
	if (c->gb_top >= 0 && any_top) {
		const struct alice_tensor *tt = alice_gb_tensor(&c->gb, c->gb_top);
		o->reads[n++] = (struct alice_read){tt->buf, tt->offset, (uint64_t)n_out * 2 * c->gb_k * sizeof(int32_t),
						    o->top + (size_t)base * 2 * c->topk};
	}
	if (any_draw) {
		const struct alice_tensor *dt = alice_gb_tensor(&c->gb, c->gb_draw);
		o->reads[n++] = (struct alice_read){dt->buf, dt->offset, (uint64_t)n_out * 2 * sizeof(int32_t),
						    o->drawn + (size_t)base * 2};
	}
	if (any_lse) {
		const struct alice_tensor *lt2 = alice_gb_tensor(&c->gb, c->gb_lse);
		o->reads[n++] = (struct alice_read){lt2->buf, lt2->offset, (uint64_t)n_out * 4 * sizeof(int32_t),
						    o->lse + (size_t)base * 4};
	}
	for (int32_t j = 0; j < n_out;) {
		bool full = row_read_whole(c, b, start, j);
		int32_t e = j + 1;
		while (e < n_out && full == row_read_whole(c, b, start, e))
			e++;
		for (int32_t r = j; r < e; r++)
			o->row_full[base + r] = full;
		if (full) {
			uint64_t row = (uint64_t)c->out_width * sizeof(float);
			o->reads[n++] = (struct alice_read){lt->buf, lt->offset + j * row, (e - j) * row,
							    o->logits + (size_t)(base + j) * c->out_width};
		}
		j = e;
	}
	o->n_reads = n;
	o->k = c->gb_k;
}

/* After the reads of o's rows [base, base + n_out): the top-k rows spread
 * to topk entries each, rows not drawn marked so (alice_context_drawn). */
static void finish_reads(struct alice_context *c, struct ctx_out *o, int32_t base, int32_t n_out)
{
	const int32_t k = o->k;
	int32_t *top = o->top ? o->top + (size_t)base * 2 * c->topk : NULL;
	for (int32_t j = n_out - 1; top && k > 0 && j > 0 && k < c->topk; j--) /* rows of k entries to rows of topk */
		memmove(top + (size_t)j * 2 * c->topk, top + (size_t)j * 2 * k, 2 * (size_t)k * sizeof(*top));
	if (o->drawn)
		for (int32_t j = 0; j < n_out; j++) /* a row not drawn reads back (-1, 0): mark it */
			if (!o->is_drawn[base + j])
				o->drawn[2 * (base + j) + 1] = -1;
}

static bool can_launch(const struct alice_context *c)
{
	const struct alice_backend_vtable *vt = c->m->be->vt;
	return ALICE_VT_HAS(vt, graph_launch) && ALICE_VT_HAS(vt, graph_wait);
}

/* Run the chunk's graph and its reads (o->reads): launched and left in
 * flight when async (the backend can), else finished here. */
static enum alice_status compute_chunk(struct alice_context *c, struct ctx_out *o, bool async,
				       struct alice_error *err)
{
	struct alice_model *m = c->m;
	const struct alice_backend_vtable *vt = m->be->vt;
	struct alice_graph g = alice_gb_graph(&c->gb);
	if (can_launch(c)) {
		if (vt->graph_launch(m->bctx, &g, o->reads, o->n_reads) != ALICE_OK)
			return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: step failed: %s", m->be->name,
					  vt->last_error(m->bctx));
		if (async)
			return ALICE_OK;
		if (vt->graph_wait(m->bctx) != ALICE_OK)
			return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: step failed: %s", m->be->name,
					  vt->last_error(m->bctx));
		return ALICE_OK;
	}
	if (vt->graph_compute(m->bctx, &g) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: step failed: %s", m->be->name,
				  vt->last_error(m->bctx));
	for (uint32_t i = 0; i < o->n_reads; i++) {
		const struct alice_read *r = &o->reads[i];
		if (vt->buffer_read(m->bctx, r->buf, r->offset, r->dst, r->size) != ALICE_OK)
			return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: reading the step's results failed: %s",
					  m->be->name, vt->last_error(m->bctx));
	}
	return ALICE_OK;
}

/* The oldest step in flight: out[ctx_oldest(c)] */
static int32_t ctx_oldest(const struct alice_context *c)
{
	return (c->out_head + 2 - c->n_flight) & 1;
}

/* Wait for o's step on the backend (the oldest not waited for), keeping
 * its status for alice_context_finish. */
static void out_wait(struct alice_context *c, struct ctx_out *o)
{
	if (o->waited)
		return;
	const struct alice_backend_vtable *vt = c->m->be->vt;
	o->waited = true;
	o->st = vt->graph_wait(c->m->bctx);
	if (o->st != ALICE_OK)
		alice_fail(&o->err, ALICE_ERR_BACKEND, "backend %s: step failed: %s", c->m->be->name,
			   vt->last_error(c->m->bctx));
	else
		finish_reads(c, o, 0, o->n_logits);
}

/* Wait for every step in flight on the backend (their results are kept
 * for alice_context_finish), so the compute buffer can change. */
static void settle(struct alice_context *c)
{
	for (int32_t i = 0; i < c->n_flight; i++)
		out_wait(c, &c->out[(ctx_oldest(c) + i) & 1]);
}

/* Tokens [start, start+n) of the batch: one graph, its reads into o (from
 * row o->n_logits on); left in flight when async. */
static enum alice_status run_chunk(struct alice_context *c, struct ctx_out *o, const struct alice_batch *b,
				   int32_t start, int32_t n, bool async, struct alice_error *err)
{
	struct alice_model *m = c->m;
	int32_t n_out = 0;
	bool fed = false;
	const struct ctx_out *prev = &c->out[c->out_head ^ 1]; /* the step launched last */
	if (m->arch->encoder) /* bidirectional: each token sees its sequence's whole chunk */
		for (int32_t i = 0; i < n; i++) {
			int32_t s = b->seq ? b->seq[start + i] : 0;
			c->seq_end[s] = b->pos[start + i] + 1;
		}
	for (int32_t i = 0; i < n; i++) {
		int32_t bi = start + i;
		int32_t s = b->seq ? b->seq[bi] : 0;
		int64_t cell0 = (int64_t)s * c->stride; /* virtual */
		int32_t blk = c->pool->tbl[(size_t)s * c->max_blk + (uint32_t)b->pos[bi] / ALICE_KV_BLOCK];
		bool f = b->feed && b->feed[bi] >= 0;
		c->in_tok[i] = f ? 0 : b->token[bi];
		c->in_feed[i] = f ? prev->pick_at[b->feed[bi]] : -1;
		fed = fed || f;
		c->in_pos[i] = b->pos[bi];
		c->in_cells[i] = blk * ALICE_KV_BLOCK + b->pos[bi] % ALICE_KV_BLOCK; /* physical */
		c->in_ranges[2 * i] = (int32_t)cell0;
		c->in_ranges[2 * i + 1] = (int32_t)(cell0 + (m->arch->encoder ? c->seq_end[s] : b->pos[bi] + 1));
		c->in_seq[i] = s;
		c->in_solo[i] = b->solo && b->solo[bi];
		if (m->hp.n_swa) { /* window: positions > pos - n_swa */
			int64_t lo = (int64_t)b->pos[bi] - m->hp.n_swa + 1;
			c->in_swa[2 * i] = (int32_t)(cell0 + (lo > 0 ? lo : 0));
			c->in_swa[2 * i + 1] = c->in_ranges[2 * i + 1];
		}
		if (wants_logits(b, bi))
			c->in_out[n_out++] = i;
	}
	if (m->hp.rope_mode == ALICE_ROPE_IMROPE) /* text: t = h = w = position, e = 0 */
		for (int32_t i = 0; i < n; i++) {
			c->in_pos[n + i] = c->in_pos[2 * n + i] = c->in_pos[i];
			c->in_pos[3 * n + i] = 0;
		}
	bool discard = n_out == 0; /* still run the step to fill the cache */
	if (discard)
		c->in_out[n_out++] = n - 1;
	struct step_ops so = step_ops_of(c, b, start, n_out);
	if (discard)
		so = (struct step_ops){0, false, false, false, false, false};
	so.feed = fed;
	struct alice_step stp;
	int32_t logits;
	enum alice_status st;
	if (c->gb_reuse && c->gb_n == n && c->gb_n_out == n_out && c->gb_k == so.k && c->gb_adj_f == so.adj &&
	    c->gb_draw_f == so.draw && c->gb_feed_f == so.feed && c->gb_lse_f == so.lse && c->gb_mask_f == so.mask) {
		stp = c->gb_step;
		logits = c->gb_logits;
	} else {
		c->gb_reuse = false;
		logits = build_step(c, n, n_out, so, &stp);
		if (logits < 0)
			return alice_fail(err, ALICE_ERR_INVALID, "%s", c->gb.err.msg);
		uint64_t size = 0;
		if ((st = alice_gb_plan(&c->gb, &size, err)) != ALICE_OK)
			return st;
		if ((st = ensure_compute(c, size, err)) != ALICE_OK)
			return st;
		alice_gb_bind(&c->gb, c->compute_buf);
		c->gb_reuse = true;
		c->gb_n = n;
		c->gb_n_out = n_out;
		c->gb_logits = logits;
		c->gb_step = stp;
	}
	if ((st = write_input(c, c->gb_tok_in, c->in_tok, err)) != ALICE_OK ||
	    (c->gb_feed_in >= 0 && (st = write_input(c, c->gb_feed_in, c->in_feed, err)) != ALICE_OK) ||
	    (st = write_input(c, stp.inp_pos, c->in_pos, err)) != ALICE_OK ||
	    (st = write_input(c, stp.inp_ranges, c->in_ranges, err)) != ALICE_OK ||
	    (st = write_input(c, stp.inp_cells, c->in_cells, err)) != ALICE_OK ||
	    (st = write_input(c, stp.inp_out, c->in_out, err)) != ALICE_OK ||
	    (st = write_input(c, stp.inp_seq, c->in_seq, err)) != ALICE_OK ||
	    (stp.inp_ranges_swa >= 0 && (st = write_input(c, stp.inp_ranges_swa, c->in_swa, err)) != ALICE_OK) ||
	    (st = write_row_regimes(c, n, n_out, err)) != ALICE_OK ||
	    (st = write_adjust(c, b, start, n_out, err)) != ALICE_OK ||
	    (c->gb_mask_in >= 0 && (st = write_masks(c, b, start, n_out, err)) != ALICE_OK) ||
	    (c->gb_draw_in >= 0 && (st = write_draws(c, b, start, n_out, err)) != ALICE_OK))
		return st;
	o->n_reads = 0;
	if (!discard)
		plan_reads(c, o, b, start, n_out, logits, start + n == b->n_tokens);
	if ((st = compute_chunk(c, o, async, err)) != ALICE_OK)
		return st;
	if (!discard) {
		if (!async)
			finish_reads(c, o, o->n_logits, n_out);
		o->n_logits += n_out;
	}
	for (int32_t i = 0; i < n; i++) {
		int32_t s = b->seq ? b->seq[start + i] : 0;
		c->seq_len[s] = b->pos[start + i] + 1;
	}
	return ALICE_OK;
}

enum alice_status alice_context_launch(struct alice_context *c, const struct alice_batch *b, struct alice_error *err)
{
	if (c->n_flight >= 2)
		return alice_fail(err, ALICE_ERR_INVALID, "launch: two steps are in flight: finish one first");
	if (!b || b->n_tokens <= 0 || !b->token || !b->pos)
		return alice_fail(err, ALICE_ERR_INVALID, "decode: empty batch");
	int32_t n_vocab = (int32_t)c->m->hp.n_vocab;
	const struct ctx_out *prev = &c->out[c->out_head ^ 1];
	int32_t *next = malloc(c->n_seq * sizeof(*next));
	if (!next)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	memcpy(next, c->seq_len, c->n_seq * sizeof(*next));
	enum alice_status st = ALICE_OK;
	size_t rows = 0;
	for (int32_t i = 0; i < b->n_tokens; i++) {
		int32_t s = b->seq ? b->seq[i] : 0;
		if (s < 0 || (uint32_t)s >= c->n_seq) {
			st = alice_fail(err, ALICE_ERR_RANGE, "decode: token %d: sequence %d out of range (n_seq %u)", i, s,
					c->n_seq);
			goto out;
		}
		if (b->feed && b->feed[i] >= 0) {
			if (!c->feed_on || !c->feed_ok || b->n_tokens > (int32_t)c->n_batch || b->feed[i] >= prev->n_logits ||
			    prev->pick_at[b->feed[i]] < 0) {
				st = alice_fail(err, ALICE_ERR_INVALID,
						"decode: token %d: row %d of the step launched before was not picked on "
						"the device",
						i, b->feed[i]);
				goto out;
			}
		} else if (b->token[i] < 0 || b->token[i] >= n_vocab) {
			st = alice_fail(err, ALICE_ERR_RANGE, "decode: token %d: id %d out of range (n_vocab %d)", i,
					b->token[i], n_vocab);
			goto out;
		}
		if (b->pos[i] != next[s]) {
			st = alice_fail(err, ALICE_ERR_RANGE,
					"decode: token %d: position %d of sequence %d does not continue it (expected %d)",
					i, b->pos[i], s, next[s]);
			goto out;
		}
		if ((uint32_t)b->pos[i] >= c->n_ctx) {
			st = alice_fail(err, ALICE_ERR_RANGE, "decode: sequence %d is full (n_ctx %u)", s, c->n_ctx);
			goto out;
		}
		if (c->m->arch->encoder && (c->seq_len[s] != 0 || b->n_tokens > (int32_t)c->n_batch)) {
			st = alice_fail(err, ALICE_ERR_RANGE,
					"decode: an encoder needs each sequence whole in one batch of at most %u tokens "
					"(sequence %d)",
					c->n_batch, s);
			goto out;
		}
		next[s]++;
		rows += wants_logits(b, i);
	}
	struct ctx_out *o = &c->out[c->out_head];
	if ((st = out_reserve(c, o, rows, err)) != ALICE_OK)
		goto out;
	/* the blocks the new positions need, then the device's table */
	for (uint32_t s = 0; s < c->n_seq; s++) {
		if (next[s] == c->seq_len[s])
			continue;
		uint32_t need = ((uint32_t)next[s] + ALICE_KV_BLOCK - 1) / ALICE_KV_BLOCK;
		if (!alice_kv_pool_seq_grow(c->pool, s, need)) {
			st = alice_fail(err, ALICE_ERR_NOMEM,
					"decode: the KV pool has no free block for sequence %u (%u of %u blocks in use, "
					"%llu reserved)",
					s, alice_kv_pool_used(c->pool), c->pool->n_blocks,
					(unsigned long long)c->pool->outstanding);
			goto out;
		}
	}
	if ((st = alice_context_sync_blocks(c, err)) != ALICE_OK)
		goto out;
	/* one chunk goes in flight where the backend can; more run here, one
	 * after the other, once nothing else is in flight */
	bool async = can_launch(c) && b->n_tokens <= (int32_t)c->n_batch;
	if (!async)
		settle(c);
	o->n_logits = 0;
	o->st = ALICE_OK;
	for (int32_t start = 0; start < b->n_tokens; start += (int32_t)c->n_batch) {
		int32_t n = b->n_tokens - start;
		if (n > (int32_t)c->n_batch)
			n = (int32_t)c->n_batch;
		if ((st = run_chunk(c, o, b, start, n, async, err)) != ALICE_OK) {
			o->n_logits = 0;
			c->feed_ok = false;
			goto out;
		}
	}
	o->waited = !async;
	c->out_head ^= 1;
	c->n_flight++;
	c->feed_ok = true;
out:
	free(next);
	return st;
}

enum alice_status alice_context_finish(struct alice_context *c, struct alice_error *err)
{
	if (c->n_flight <= 0)
		return alice_fail(err, ALICE_ERR_INVALID, "finish: no step is in flight");
	const int32_t i = ctx_oldest(c);
	struct ctx_out *o = &c->out[i];
	out_wait(c, o);
	c->n_flight--;
	c->out_cur = i;
	if (o->st != ALICE_OK) {
		o->n_logits = 0;
		c->feed_ok = false;
		if (err)
			*err = o->err;
		return o->st;
	}
	return ALICE_OK;
}

bool alice_context_lse_ok(const struct alice_context *c)
{
	return c->lse_on;
}

bool alice_context_mask_ok(const struct alice_context *c)
{
	return c->mask_on;
}

bool alice_context_draw_ok(const struct alice_context *c)
{
	return c->draw_on;
}

bool alice_context_lse(const struct alice_context *c, int32_t i, float *mx, double *sum, float *drawn_value)
{
	const struct ctx_out *o = &c->out[c->out_cur];
	if (i < 0 || i >= o->n_logits || !o->has_lse[i])
		return false;
	const int32_t *e = o->lse + (size_t)i * 4;
	uint64_t sb = (uint64_t)(uint32_t)e[1] | ((uint64_t)(uint32_t)e[2] << 32);
	memcpy(mx, &e[0], 4);
	memcpy(sum, &sb, 8);
	memcpy(drawn_value, &e[3], 4);
	return true;
}

bool alice_context_row_fed_ok(const struct alice_context *c, int32_t row)
{
	const struct ctx_out *prev = &c->out[c->out_head ^ 1];
	return c->feed_on && c->feed_ok && row >= 0 && row < prev->n_logits && prev->pick_at[row] >= 0;
}

int32_t alice_context_in_flight(const struct alice_context *c)
{
	return c->n_flight;
}

bool alice_context_can_feed(const struct alice_context *c)
{
	return c->feed_on;
}

bool alice_context_async(const struct alice_context *c)
{
	return can_launch(c);
}

enum alice_status alice_context_decode(struct alice_context *c, const struct alice_batch *b, struct alice_error *err)
{
	if (c->n_flight > 0)
		return alice_fail(err, ALICE_ERR_INVALID, "decode: a launched step is not finished");
	enum alice_status st = alice_context_launch(c, b, err);
	if (st != ALICE_OK) {
		c->out[c->out_cur].n_logits = 0;
		return st;
	}
	return alice_context_finish(c, err);
}

const float *alice_context_logits(const struct alice_context *c, int32_t i)
{
	const struct ctx_out *o = &c->out[c->out_cur];
	if (c->embd || i < 0 || i >= o->n_logits || !o->row_full[i])
		return NULL;
	return o->logits + (size_t)i * c->out_width;
}

const float *alice_context_embd(const struct alice_context *c, int32_t i)
{
	const struct ctx_out *o = &c->out[c->out_cur];
	if (!c->embd || i < 0 || i >= o->n_logits)
		return NULL;
	return o->logits + (size_t)i * c->out_width;
}

int32_t alice_context_n_logits(const struct alice_context *c)
{
	return c->out[c->out_cur].n_logits;
}

const int32_t *alice_context_top(const struct alice_context *c, int32_t i)
{
	const struct ctx_out *o = &c->out[c->out_cur];
	if (!c->topk || i < 0 || i >= o->n_logits || !o->has_top[i])
		return NULL; /* a drawn row's entries are not read back (but for its logprobs) */
	return o->top + (size_t)i * 2 * c->topk;
}

int32_t alice_context_top_k(const struct alice_context *c)
{
	return c->topk;
}

bool alice_context_drawn(const struct alice_context *c, int32_t i, int32_t *token, bool *used)
{
	const struct ctx_out *o = &c->out[c->out_cur];
	if (!c->draw_on || i < 0 || i >= o->n_logits || o->drawn[2 * i + 1] < 0)
		return false;
	*token = o->drawn[2 * i];
	*used = o->drawn[2 * i + 1] != 0;
	return true;
}

void alice_context_seq_clear(struct alice_context *c, int32_t seq)
{
	if (seq >= 0 && (uint32_t)seq < c->n_seq) {
		c->seq_len[seq] = 0;
		alice_kv_pool_seq_shrink(c->pool, (uint32_t)seq, 0);
		alice_rs_clear_seq(c, seq);
	}
}

/* Is the block holding position n of seq (n not at a block start) shared? */
static bool tail_shared(const struct alice_context *c, int32_t seq, int32_t n)
{
	return n % ALICE_KV_BLOCK != 0 && alice_kv_pool_seq_block_shared(c->pool, (uint32_t)seq, (uint32_t)n / ALICE_KV_BLOCK);
}

bool alice_context_seq_truncate(struct alice_context *c, int32_t seq, int32_t n)
{
	if (seq < 0 || (uint32_t)seq >= c->n_seq || n < 0 || n > c->seq_len[seq])
		return false;
	if (c->rs && n != c->seq_len[seq]) { /* a recurrent state cannot be rewound */
		if (n != 0)
			return false;
		alice_rs_clear_seq(c, seq);
	}
	if (n != c->seq_len[seq] && tail_shared(c, seq, n))
		return false; /* the next write would land in another sequence's block */
	c->seq_len[seq] = n; /* cells past n are never attended again */
	alice_kv_pool_seq_shrink(c->pool, (uint32_t)seq, ((uint32_t)n + ALICE_KV_BLOCK - 1) / ALICE_KV_BLOCK);
	return true;
}

int32_t alice_context_seq_keep(struct alice_context *c, int32_t seq, int32_t n)
{
	if (seq < 0 || (uint32_t)seq >= c->n_seq)
		return -1;
	if (n < 0)
		n = 0;
	if (n > c->seq_len[seq])
		n = c->seq_len[seq];
	if (n != c->seq_len[seq] && tail_shared(c, seq, n))
		n = n / ALICE_KV_BLOCK * ALICE_KV_BLOCK; /* recompute that block's part instead */
	if (!alice_context_seq_truncate(c, seq, n)) {
		alice_context_seq_clear(c, seq);
		return 0;
	}
	return n;
}

int32_t alice_context_seq_share(struct alice_context *c, int32_t dst, int32_t src, int32_t n_tokens)
{
	if (dst < 0 || (uint32_t)dst >= c->n_seq || src < 0 || (uint32_t)src >= c->n_seq || dst == src || c->rs ||
	    c->m->arch->encoder)
		return -1;
	alice_context_seq_clear(c, dst);
	if (n_tokens > c->seq_len[src])
		n_tokens = c->seq_len[src];
	uint32_t nb = n_tokens > 0 ? (uint32_t)n_tokens / ALICE_KV_BLOCK : 0;
	if (!alice_kv_pool_seq_share(c->pool, (uint32_t)dst, (uint32_t)src, nb))
		return -1;
	c->seq_len[dst] = (int32_t)(nb * ALICE_KV_BLOCK);
	return c->seq_len[dst];
}

/* Copy the changed part of the block table to the device. */
static enum alice_status alice_context_sync_blocks(struct alice_context *c, struct alice_error *err)
{
	struct alice_kv_pool *p = c->pool;
	if (p->dirty_lo >= p->dirty_hi)
		return ALICE_OK;
	const struct alice_backend_vtable *vt = c->m->be->vt;
	/* one write of the changed span while it is small; else the rows of
	 * the sequences that changed (a decode step of many sequences changes
	 * a few rows far apart) */
	uint32_t lo = p->dirty_lo, hi = p->dirty_hi;
	bool whole = (uint64_t)(hi - lo) * sizeof(int32_t) <= ((uint64_t)64 << 10);
	for (uint32_t s = lo / p->max_blk; s < p->n_seq && s * p->max_blk < hi; s++) {
		uint32_t a = whole ? lo : s * p->max_blk, b = whole ? hi : a + p->max_blk;
		if (!whole && !p->seq_dirty[s])
			continue;
		if (vt->buffer_write(c->m->bctx, c->tbl_buf, (uint64_t)a * sizeof(int32_t), p->tbl + a,
				     (uint64_t)(b - a) * sizeof(int32_t)) != ALICE_OK)
			return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: writing the KV block table failed: %s",
					  c->m->be->name, vt->last_error(c->m->bctx));
		if (whole)
			break;
	}
	alice_kv_pool_clean(p);
	return ALICE_OK;
}

void alice_context_kv_usage(const struct alice_context *c, const bool *active, struct alice_kv_usage *out)
{
	const struct alice_kv_pool *p = c->pool;
	memset(out, 0, sizeof(*out));
	out->block_cells = ALICE_KV_BLOCK;
	out->blocks_total = p->n_blocks;
	out->blocks_used = alice_kv_pool_used(p);
	out->blocks_shared = p->n_shared;
	out->blocks_available = alice_kv_pool_available(p);
	if (!active)
		return;
	/* idle: used blocks no active sequence holds */
	uint8_t *held = calloc(p->n_blocks, 1);
	if (!held)
		return;
	for (uint32_t s = 0; s < p->n_seq; s++)
		if (active[s])
			for (uint32_t i = 0; i < p->n_blk[s]; i++)
				held[p->tbl[(size_t)s * p->max_blk + i]] = 1;
	uint32_t n_held = 0;
	for (uint32_t b = 0; b < p->n_blocks; b++)
		n_held += held[b];
	out->blocks_idle = out->blocks_used - n_held;
	free(held);
}

uint32_t alice_context_kv_available(const struct alice_context *c)
{
	return alice_kv_pool_available(c->pool);
}

uint32_t alice_context_seq_blocks(const struct alice_context *c, int32_t seq)
{
	return seq >= 0 && (uint32_t)seq < c->n_seq ? c->pool->n_blk[seq] : 0;
}

bool alice_context_seq_reserve(struct alice_context *c, int32_t seq, int32_t n_tokens)
{
	if (seq < 0 || (uint32_t)seq >= c->n_seq || n_tokens < 0)
		return false;
	uint64_t nb = ((uint64_t)n_tokens + ALICE_KV_BLOCK - 1) / ALICE_KV_BLOCK;
	if (nb > c->max_blk)
		nb = c->max_blk;
	return alice_kv_pool_seq_reserve(c->pool, (uint32_t)seq, (uint32_t)nb);
}

int32_t alice_context_seq_len(const struct alice_context *c, int32_t seq)
{
	if (seq < 0 || (uint32_t)seq >= c->n_seq)
		return -1;
	return c->seq_len[seq];
}
