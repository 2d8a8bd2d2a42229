/* engine_step.c — the engine thread's decode steps: each busy slot's rows
 * built into one batch, launched (pipelined: the next step may be launched
 * before the last is taken, its tokens fed on the device), taken (picks,
 * stop strings, events) and the loop that runs them (see engine.c). */
#include "engine_internal.h"

/* A constrained slot's next-token mask as bits for the device (batch.mask),
 * when the context applies masks there; false (the row is then read whole
 * and slot_pick masks it, reporting any grammar error) otherwise. */
static bool slot_mask_bits(struct alice_engine *e, struct eng_slot *sl)
{
	if (!alice_context_mask_ok(e->ctx))
		return false;
	const int32_t W = (e->n_vocab + 31) / 32;
	if (!sl->mask && !(sl->mask = malloc((size_t)e->n_vocab)))
		return false;
	if (!sl->mask_bits && !(sl->mask_bits = malloc((size_t)W * sizeof(uint32_t))))
		return false;
	struct alice_error err = {{0}};
	if (alice_grammar_constraint_mask(sl->r->grammar, sl->mask, e->n_vocab, &err) != ALICE_OK)
		return false;
	memset(sl->mask_bits, 0, (size_t)W * sizeof(uint32_t));
	for (int32_t t = 0; t < e->n_vocab; t++)
		sl->mask_bits[t / 32] |= (uint32_t)(sl->mask[t] != 0) << (t % 32);
	return true;
}

/* Batch row n is the slot's next-token row: whether the backend decides it
 * (its best entries, alice_context_top, or a draw, alice_context_drawn) so
 * the whole row stays on the device, with the slot's logit bias and
 * penalties applied there first (sl->adj); first: the row follows every
 * accepted token (a verify row after drafted tokens does not, so it takes
 * no edits: such a row is read whole when the sampler has any); ahead:
 * draws of the slot still in flight before this row's. True when the row
 * carries the slot's edits. */
static bool slot_row(struct alice_engine *e, struct eng_slot *sl, int32_t n, bool first, int32_t ahead)
{
	int32_t k = alice_context_top_k(e->ctx), n_adj = 0;
	e->b_draw[n] = (struct alice_draw){0, 0};
	e->b_top[n] = false;
	e->b_adj[n] = NULL;
	e->b_n_adj[n] = 0;
	e->b_topn[n] = 0;
	e->b_lp[n] = false;
	e->b_mask[n] = NULL;
	if (k <= 0 || (sl->r->grammar && !(first && slot_mask_bits(e, sl))))
		return false;
	if (first && (alice_sampler_top_ok(sl->sampler, k, true) || alice_sampler_temp_ok(sl->sampler, true))) {
		if (!sl->adj)
			sl->adj = malloc(ALICE_ADJ_ROW_MAX * sizeof(*sl->adj));
		n_adj = sl->adj ? alice_sampler_adjustments(sl->sampler, sl->adj, ALICE_ADJ_ROW_MAX) : -1;
	}
	/* the edits (maybe none this step) are made on the device */
	bool adjusted = first && n_adj >= 0;
	if (n_adj < 0 || (!first && !alice_sampler_top_ok(sl->sampler, k, false)))
		return false;
	/* drawn on the device only where the backend draws (SAMPLE_TEMP; not
	 * Vulkan): else such a row is read whole and drawn on the host */
	if (first && alice_context_draw_ok(e->ctx) && alice_sampler_temp_ok(sl->sampler, adjusted))
		alice_sampler_temp_params(sl->sampler, ahead, &e->b_draw[n].t, &e->b_draw[n].r);
	e->b_top[n] = e->b_draw[n].t > 0 || alice_sampler_top_ok(sl->sampler, k, adjusted);
	e->b_lp[n] = sl->lp_dev && e->b_top[n];
	e->b_topn[n] = !e->b_lp[n] && alice_sampler_top_ok(sl->sampler, 1, adjusted) ? 1 : 0;
	/* a constrained row picked on the device is masked there */
	e->b_mask[n] = e->b_top[n] && sl->r->grammar ? sl->mask_bits : NULL;
	if (!e->b_top[n] || !adjusted)
		return false;
	e->b_adj[n] = n_adj ? sl->adj : NULL;
	e->b_n_adj[n] = n_adj;
	return true;
}

/* Mask and sample the slot's next token from its logits row into sl->res
 * (sl->pick_st / pick_msg on failure). Touches only this slot and its
 * request, so a step's rows are picked in parallel. */
static void slot_pick(struct alice_engine *e, struct eng_slot *sl)
{
	struct eng_req *r = sl->r;
	struct alice_error err = {{0}};
	const uint8_t *mask = NULL;
	enum alice_status st;
	sl->pick_st = ALICE_OK;
	int32_t tok;
	bool used;
	const bool drawn = alice_context_drawn(e->ctx, sl->row, &tok, &used);
	const float *logits = drawn ? NULL : alice_context_logits(e->ctx, sl->row);
	__atomic_fetch_add(logits ? &e->picks_host : &e->picks_device, 1, __ATOMIC_RELAXED);
	const int32_t k = alice_context_top_k(e->ctx);
	const int32_t *top = logits ? NULL : alice_context_top(e->ctx, sl->row);
	if (drawn) /* the backend drew it */
		st = alice_sampler_temp_done(sl->sampler, tok, used, &sl->res, &err);
	else if (top) /* the backend picked the row's best entries (after its edits) */
		st = alice_sampler_sample_top(sl->sampler, top, k, sl->adj_row == sl->row, &sl->res, &err);
	if ((drawn || top) && st == ALICE_OK && r->sp.logprobs) {
		/* the chosen token's value: its draw's, else among the entries */
		float mx, chosen = 0.0f;
		double sum;
		if (!top || !alice_context_lse(e->ctx, sl->row, &mx, &sum, &chosen)) {
			st = ALICE_ERR_BACKEND;
			snprintf(err.msg, sizeof(err.msg), "logprobs: the step gave no normaliser for this row");
		} else {
			for (int32_t i = 0; i < k && !drawn; i++)
				if (top[2 * i] == sl->res.token) {
					memcpy(&chosen, &top[2 * i + 1], sizeof(chosen));
					break;
				}
			st = alice_sampler_logprobs_top(sl->sampler, top, k, mx, sum, chosen, &sl->res, &err);
		}
	}
	if (drawn || top) {
		if (st != ALICE_OK) {
			sl->pick_st = st;
			snprintf(sl->pick_msg, sizeof(sl->pick_msg), "%s", err.msg);
		}
		return;
	}
	if (!logits) {
		sl->pick_st = ALICE_ERR_BACKEND;
		snprintf(sl->pick_msg, sizeof(sl->pick_msg), "decode returned no logits");
		return;
	}
	if (r->grammar) {
		if (!sl->mask && !(sl->mask = malloc((size_t)e->n_vocab))) {
			sl->pick_st = ALICE_ERR_NOMEM;
			snprintf(sl->pick_msg, sizeof(sl->pick_msg), "constraint: out of memory");
			return;
		}
		if ((st = alice_grammar_constraint_mask(r->grammar, sl->mask, e->n_vocab, &err)) != ALICE_OK) {
			sl->pick_st = st;
			snprintf(sl->pick_msg, sizeof(sl->pick_msg), "constraint: %s", err.msg);
			return;
		}
		mask = sl->mask;
	}
	if ((st = alice_sampler_sample(sl->sampler, logits, mask, &sl->res, &err)) != ALICE_OK) {
		sl->pick_st = st;
		snprintf(sl->pick_msg, sizeof(sl->pick_msg), "%s", err.msg);
	}
}

static void pick_item(void *arg, int32_t i)
{
	struct alice_engine *e = arg;
	slot_pick(e, e->picks[i]);
}

/* Report the token slot_pick chose (or its failure): accept, stop checks,
 * detokenize, events. On the engine thread, in slot order. */
static void slot_sample(struct alice_engine *e, struct eng_slot *sl)
{
	struct eng_req *r = sl->r;
	struct alice_error err = {{0}};
	char msg[ALICE_ERROR_MSG_MAX + 64];
	enum alice_status st;
	if (sl->pick_st != ALICE_OK) {
		enum alice_engine_finish f = ALICE_ENGINE_FINISH_ERROR;
		eng_slot_finish_status(e, sl, f, NULL, 0, sl->pick_msg, sl->pick_st);
		return;
	}
	struct alice_sample_result res = sl->res;
	double t = now_ms();
	pthread_mutex_lock(&e->mu);
	if (sl->t_first <= 0)
		lat_add(&e->ttft, t - r->t_submit);
	else
		lat_add(&e->itl, t - sl->t_last);
	pthread_mutex_unlock(&e->mu);
	if (sl->t_first <= 0)
		sl->t_first = t;
	sl->t_last = t;
	sl->n_generated++;
	alice_sampler_accept(sl->sampler, res.token, NULL);

	/* ignore_eos: an end-of-generation token is an ordinary token, except
	 * under a grammar, where it is the grammar's end */
	if (alice_tokenizer_is_eog(e->tok, res.token) && (!r->ignore_eos || r->grammar)) {
		const char *rest;
		size_t rest_len;
		alice_detok_stream_flush(sl->detok, &rest, &rest_len);
		alice_sb_addn(&sl->pending, rest, rest_len);
		eng_slot_finish(e, sl, ALICE_ENGINE_FINISH_STOP, sl->pending.p, sl->pending.n, NULL);
		return;
	}
	bool must_end = false;
	if (r->grammar && (st = alice_grammar_constraint_accept(r->grammar, res.token, &must_end, &err)) != ALICE_OK) {
		snprintf(msg, sizeof(msg), "constraint: %s", err.msg);
		eng_slot_finish_status(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg, st);
		return;
	}
	const char *piece;
	size_t piece_len;
	if (alice_detok_stream_push(sl->detok, res.token, &piece, &piece_len, &err) != ALICE_OK ||
	    !alice_sb_addn(&sl->pending, piece, piece_len)) {
		snprintf(msg, sizeof(msg), "detokenize: %s", err.msg[0] ? err.msg : "out of memory");
		eng_slot_finish(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg);
		return;
	}

	struct alice_engine_event ev = {0};
	ev.id = r->id;
	ev.type = ALICE_ENGINE_EVENT_TOKEN;
	ev.token.token = res.token;
	ev.token.logprob = res.logprob;
	ev.top = res.top;
	ev.n_top = r->sp.logprobs ? res.n_top : 0;

	ptrdiff_t stop_at = eng_find_stop(sl, r, &r->stop_hit);
	if (stop_at >= 0) {
		ev.text = sl->pending.p;
		ev.text_len = (size_t)stop_at;
		r->on_event(&ev, r->user);
		eng_slot_finish(e, sl, ALICE_ENGINE_FINISH_STOP, NULL, 0, NULL);
		return;
	}
	size_t keep = eng_stop_prefix_tail(sl, r);
	ev.text = sl->pending.p;
	ev.text_len = sl->pending.n - keep;
	r->on_event(&ev, r->user);
	memmove(sl->pending.p, sl->pending.p + ev.text_len, keep);
	sl->pending.n = keep;
	sl->pending.p[keep] = '\0';

	sl->last_token = res.token;
	bool at_max = r->max_tokens >= 0 && sl->n_generated >= r->max_tokens;
	bool ctx_full = sl->n_past >= (int32_t)e->n_ctx;
	if (must_end || at_max || ctx_full) {
		const char *rest;
		size_t rest_len;
		alice_detok_stream_flush(sl->detok, &rest, &rest_len);
		alice_sb_addn(&sl->pending, rest, rest_len);
		eng_slot_finish(e, sl, must_end ? ALICE_ENGINE_FINISH_STOP : ALICE_ENGINE_FINISH_LENGTH,
			    sl->pending.p, sl->pending.n, NULL);
	}
}

/* An embeddings request's rows are in: pool, normalise, report, free the
 * slot (its KV is not kept: an encoder must start from an empty sequence,
 * and nothing reuses it). */
static void slot_embd_done(struct alice_engine *e, struct eng_slot *sl)
{
	struct eng_req *r = sl->r;
	int32_t n = r->n_prompt, d = e->n_embd, n_vec = e->pooling == ALICE_POOLING_NONE ? n : 1;
	const float *rows = alice_context_embd(e->ctx, sl->row);
	if (!rows || !alice_context_embd(e->ctx, sl->row + n - 1)) {
		eng_slot_finish(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, "decode returned no embeddings");
		return;
	}
	/* the rows of one step are contiguous, in batch order */
	if (e->pooling == ALICE_POOLING_NONE)
		memcpy(e->vec, rows, (size_t)n * (size_t)d * sizeof(float));
	else
		alice_embd_pool(rows, n, d, (enum alice_pooling)e->pooling, e->vec);
	for (int32_t i = 0; i < n_vec; i++)
		alice_embd_normalize(e->vec + (size_t)i * (size_t)d, d);
	sl->t_first = sl->t_last = now_ms();
	sl->n_past = 0;
	struct eng_req *req = eng_slot_release(e, sl);
	struct alice_engine_event ev = {0};
	ev.id = req->id;
	ev.type = ALICE_ENGINE_EVENT_DONE;
	ev.text = "";
	ev.finish = ALICE_ENGINE_FINISH_STOP;
	ev.n_prompt = req->n_prompt;
	ev.queue_ms = sl->t_start - req->t_submit;
	ev.prefill_ms = sl->t_first - sl->t_start;
	ev.embd = e->vec;
	ev.n_vectors = n_vec;
	ev.n_embd = d;
	req->on_event(&ev, req->user);
	eng_req_free(req);
}

/* Drafted tokens for the slot's next step into sl->draft (spec.h); how many. */
static int32_t slot_draft(struct alice_engine *e, struct eng_slot *sl)
{
	struct eng_req *r = sl->r;
	if (e->spec.mode == ALICE_SPEC_NONE || r->no_spec)
		return 0;
	if (sl->cool > 0) { /* its drafts kept failing: a plain step costs less */
		sl->cool--;
		return 0;
	}
	int32_t n_max = (int32_t)e->spec.n_max, n_min = (int32_t)e->spec.n_min;
	if (r->spec_n_max > 0 && r->spec_n_max < n_max)
		n_max = r->spec_n_max;
	if (r->spec_n_min > 0)
		n_min = r->spec_n_min;
	if (n_max > (sl->spec_k > n_min ? sl->spec_k : n_min))
		n_max = sl->spec_k > n_min ? sl->spec_k : n_min;
	/* the verify rows take positions n_past .. n_past + k; the step yields
	 * at most k + 1 tokens, no more than the request still may */
	if (n_max > (int32_t)e->n_ctx - 1 - sl->n_past)
		n_max = (int32_t)e->n_ctx - 1 - sl->n_past;
	if (r->max_tokens >= 0 && n_max > r->max_tokens - sl->n_generated - 1)
		n_max = r->max_tokens - sl->n_generated - 1;
	if (n_max < 1 || n_max < n_min)
		return 0;
	sl->toks[sl->n_past] = sl->last_token; /* the context: every token so far */
	int32_t k;
	if (e->spec.mode == ALICE_SPEC_NGRAM) {
		k = alice_spec_ngram_draft(sl->toks, sl->n_past + 1, (int32_t)e->spec.ngram_n, n_max, sl->draft);
	} else {
		float p_min = r->spec_p_min > 0 ? r->spec_p_min : e->spec.p_min;
		struct alice_error err = {{0}};
		k = alice_spec_drafter_draft(e->drafter, sl->seq, sl->toks, sl->n_past + 1, r->n_prompt, n_max, p_min, sl->draft,
					     &err);
		if (k < 0) { /* the draft failed: this request goes on without it */
			alice_log(ALICE_LOG_WARN, "engine: request %llu: draft model failed, not drafting: %s",
				  (unsigned long long)r->id, err.msg);
			r->no_spec = true;
			k = 0;
		}
	}
	if (k == 0 && e->spec.mode == ALICE_SPEC_DRAFT && ++sl->misses >= 2)
		/* the draft model ran and was never sure enough: pause it too */
		sl->cool = 1 << (sl->misses - 2 < 7 ? sl->misses - 2 : 7);
	return k >= n_min ? k : 0;
}

/* Count drafted and accepted tokens before the events that may end
 * the request, so its DONE and /metrics include them. */
static void slot_spec_count(struct alice_engine *e, struct eng_slot *sl, int32_t drafted, int32_t accepted)
{
	sl->n_drafted += drafted;
	sl->n_accepted += accepted;
	pthread_mutex_lock(&e->mu);
	e->stats.draft_tokens += (uint64_t)drafted;
	e->stats.draft_accepted += (uint64_t)accepted;
	pthread_mutex_unlock(&e->mu);
}

/* After a verify step: adapt the slot's draft length (doubling while
 * everything is accepted; pausing after repeated total misses). */
static void slot_spec_adapt(struct alice_engine *e, struct eng_slot *sl, int32_t k, int32_t a)
{
	int32_t cap = (int32_t)e->spec.n_max;
	if (a == 0) {
		sl->misses++;
		sl->spec_k = sl->spec_k > 1 ? sl->spec_k / 2 : 1;
		if (sl->misses >= 2) /* up to 128 plain steps between tries */
			sl->cool = 1 << (sl->misses - 2 < 7 ? sl->misses - 2 : 7);
		return;
	}
	sl->misses = 0;
	sl->spec_k = a == k ? 2 * k : 2 * a;
	if (sl->spec_k > cap)
		sl->spec_k = cap;
}

/* Build the step from the slots' state: one row per generating slot (plus
 * its drafted tokens) and prefill chunks; sets sl->row / adj_row / n_draft.
 * Returns the tokens (0: nothing to do), *n_rows the output rows. */
static int32_t build_step(struct alice_engine *e, int32_t *n_rows_out)
{
	int32_t n = 0, n_rows = 0;
	/* decode tokens first: one per generating slot (plus its drafted
	 * tokens, each a solo row: spec.h), outside the prefill budget */
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		sl->row = -1;
		sl->adj_row = -1;
		sl->n_draft = 0;
		if (!sl->r || !sl->generating)
			continue;
		sl->n_draft = slot_draft(e, sl);
		sl->row = n_rows;
		for (int32_t k = 0; k <= sl->n_draft; k++) {
			e->b_tok[n] = k ? sl->draft[k - 1] : sl->last_token;
			e->b_feed[n] = -1;
			e->b_pos[n] = sl->n_past + k;
			e->b_seq[n] = sl->seq;
			e->b_logits[n] = true;
			e->b_solo[n] = sl->n_draft > 0;
			/* a verify row's uniform and penalties depend on the rows
			 * before it: only the first is drawn or edited by the backend */
			if (slot_row(e, sl, n, k == 0, 0))
				sl->adj_row = n_rows;
			n_rows++;
			n++;
		}
	}
	/* then prefill chunks, up to n_batch tokens. A chunk is never cut to
	 * fit: it is min(rest of the prompt, n_batch) tokens, as when the
	 * request is alone, so its arithmetic (per-sequence kernel regimes)
	 * is the same whatever shares the step; one that does not fit waits
	 * for the next step. */
	uint32_t budget = e->n_batch;
	for (uint32_t i = 0; i < e->n_slots && budget > 0; i++) {
		struct eng_slot *sl = &e->slots[i];
		if (!sl->r || sl->generating)
			continue;
		int32_t left = sl->r->n_prompt - sl->n_past;
		int32_t chunk = left < (int32_t)e->n_batch ? left : (int32_t)e->n_batch;
		if (chunk > (int32_t)budget)
			break;
		for (int32_t k = 0; k < chunk; k++) {
			e->b_tok[n] = sl->r->prompt[sl->n_past + k];
			e->b_feed[n] = -1;
			e->b_pos[n] = sl->n_past + k;
			e->b_seq[n] = sl->seq;
			e->b_logits[n] = false;
			e->b_solo[n] = false;
			e->b_top[n] = false;
			e->b_draw[n] = (struct alice_draw){0, 0};
			e->b_adj[n] = NULL;
			e->b_n_adj[n] = 0;
			e->b_topn[n] = 0;
			e->b_lp[n] = false;
			e->b_mask[n] = NULL;
			n++;
		}
		budget -= (uint32_t)chunk;
		if (e->embd) { /* the whole input (submit made sure it fits): every row */
			for (int32_t k = 0; k < chunk; k++)
				e->b_logits[n - chunk + k] = true;
			sl->row = n_rows;
			n_rows += chunk;
		} else if (chunk == left) {
			e->b_logits[n - 1] = true;
			if (slot_row(e, sl, n - 1, true, 0))
				sl->adj_row = n_rows;
			sl->row = n_rows++;
		}
	}
	*n_rows_out = n_rows;
	return n;
}

/* Whether the next step can be launched before the one in flight (f) is
 * taken: every busy slot has one row in f, picked on the device (its
 * argmax or its draw: FEED takes it from there), and its next row needs
 * nothing f's token changes on the host: no grammar, no penalties (their
 * records would miss that token), no drafting; it may go on (max_tokens,
 * context); none is cancelled, and no request waits for a free slot. */
static bool pipeline_ok(struct alice_engine *e, const struct eng_flight *f)
{
	if (!e->pipeline)
		return false;
	pthread_mutex_lock(&e->mu);
	bool queued = e->q_head != NULL;
	pthread_mutex_unlock(&e->mu);
	int32_t live = 0;
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		struct eng_req *r = sl->r;
		if (!r)
			continue;
		if (r != f->sreq[i] || f->row[i] < 0 || f->n_draft[i] > 0 || r->grammar ||
		    __atomic_load_n(&r->cancel, __ATOMIC_RELAXED) || !alice_context_row_fed_ok(e->ctx, f->row[i]) ||
		    !alice_sampler_pipeline_ok(sl->sampler))
			return false;
		if (r->max_tokens >= 0 && sl->n_generated + 2 > r->max_tokens)
			return false;
		if (sl->n_past + f->ntok[i] + 1 > (int32_t)e->n_ctx)
			return false;
		live++;
	}
	/* a free slot and a request to admit into it: this step first */
	return live > 0 && !(queued && live < (int32_t)e->n_slots);
}

/* The step after f, its tokens fed from f's picks on the device: one row
 * per slot of f, at the position after f's tokens; draws take the uniform
 * one ahead (f's draw takes the one before it). */
static int32_t build_fed(struct alice_engine *e, const struct eng_flight *f, int32_t *n_rows_out)
{
	int32_t n = 0;
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		sl->row = -1;
		sl->adj_row = -1;
		sl->n_draft = 0;
		if (!sl->r)
			continue;
		e->b_tok[n] = 0;
		e->b_feed[n] = f->row[i];
		e->b_pos[n] = sl->n_past + f->ntok[i];
		e->b_seq[n] = sl->seq;
		e->b_logits[n] = true;
		e->b_solo[n] = false;
		if (slot_row(e, sl, n, true, 1))
			sl->adj_row = n;
		sl->row = n++;
	}
	*n_rows_out = n;
	return n;
}

/* Every request with a token in the failed step ends with msg. */
static void fail_step(struct alice_engine *e, const int32_t *seq, struct eng_req *const *req, int32_t n,
		      const char *msg)
{
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		bool in_batch = false;
		for (int32_t k = 0; k < n && !in_batch; k++)
			in_batch = seq[k] == sl->seq && req[k] == sl->r;
		if (sl->r && in_batch)
			eng_slot_finish(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg);
	}
}

/* Launch the built step of n tokens (fed: from the step in flight) and
 * record it in the flight ring. False (its requests failed) on error. */
static bool launch_step(struct alice_engine *e, int32_t n, int32_t n_rows, bool fed)
{
	struct alice_batch b = {n,	    e->b_tok,  e->b_pos, e->b_seq,   e->b_logits,		e->b_solo,
				e->b_top, e->b_draw, e->b_adj, e->b_n_adj, e->b_topn, fed ? e->b_feed : NULL, e->b_lp, e->b_mask};
	struct alice_error err = {{0}};
	struct eng_flight *f = &e->fl[(e->fl_old + e->fl_n) & 1];
	for (int32_t k = 0; k < n; k++) {
		f->tok[k] = fed && e->b_feed[k] >= 0 ? -1 : e->b_tok[k];
		f->seq[k] = e->b_seq[k];
		f->req[k] = e->slots[e->b_seq[k]].r;
	}
	f->n = n;
	f->n_rows = n_rows;
	f->t_launch = now_ms();
	enum alice_status st = alice_context_launch(e->ctx, &b, &err);
	if (st != ALICE_OK) {
		char msg[ALICE_ERROR_MSG_MAX + 64];
		snprintf(msg, sizeof(msg), "decode failed (%s): %s", alice_status_str(st), err.msg);
		alice_log(ALICE_LOG_ERROR, "engine: %s", msg);
		/* every request in this batch fails; the others never were in it */
		fail_step(e, f->seq, f->req, n, msg);
		return false;
	}
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		f->sreq[i] = sl->r;
		f->row[i] = sl->r ? sl->row : -1;
		f->adj_row[i] = sl->adj_row;
		f->n_draft[i] = sl->r ? sl->n_draft : 0;
		f->ntok[i] = 0;
	}
	for (int32_t k = 0; k < n; k++)
		f->ntok[e->b_seq[k]]++;
	e->fl_n++;
	pthread_mutex_lock(&e->mu);
	e->stats.steps++;
	pthread_mutex_unlock(&e->mu);
	return true;
}

/* Whether a request that had a row in f still runs. */
static bool flight_live(const struct alice_engine *e, const struct eng_flight *f)
{
	for (uint32_t i = 0; i < e->n_slots; i++)
		if (e->slots[i].r && e->slots[i].r == f->sreq[i] && f->row[i] >= 0)
			return true;
	return false;
}

/* Finish the oldest step in flight and act on its rows: positions, picks,
 * tokens out. A slot whose request ended since the launch is skipped (its
 * row was computed past the end; slot_release took that position back). */
static void take_step(struct alice_engine *e)
{
	struct eng_flight *f = &e->fl[e->fl_old];
	struct alice_error err = {{0}};
	double t_dec = now_ms();
	enum alice_status st = alice_context_finish(e->ctx, &err);
	double t_end = now_ms();
	e->fl_old ^= 1;
	e->fl_n--;
	if (st != ALICE_OK) {
		char msg[ALICE_ERROR_MSG_MAX + 64];
		snprintf(msg, sizeof(msg), "decode failed (%s): %s", alice_status_str(st), err.msg);
		alice_log(ALICE_LOG_ERROR, "engine: %s", msg);
		fail_step(e, f->seq, f->req, f->n, msg);
		return;
	}
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		bool mine = sl->r && sl->r == f->sreq[i];
		sl->row = mine ? f->row[i] : -1;
		sl->adj_row = mine ? f->adj_row[i] : -1;
		sl->n_draft = mine ? f->n_draft[i] : 0;
	}
	/* advance positions (a fed token is the one the previous step picked:
	 * the slot's last token by now) */
	for (int32_t k = 0; k < f->n; k++) {
		struct eng_slot *sl = &e->slots[f->seq[k]];
		if (!sl->r || sl->r != f->req[k])
			continue;
		if (sl->toks && sl->n_past < (int32_t)e->n_ctx)
			sl->toks[sl->n_past] = f->tok[k] >= 0 ? f->tok[k] : sl->last_token;
		sl->n_past++;
	}
	for (uint32_t i = 0; i < e->n_slots; i++) /* drafted positions count once accepted */
		e->slots[i].n_past -= e->slots[i].r ? e->slots[i].n_draft : 0;
	if (e->embd) {
		for (uint32_t i = 0; i < e->n_slots; i++)
			if (e->slots[i].r && e->slots[i].row >= 0)
				slot_embd_done(e, &e->slots[i]);
		return;
	}
	int32_t n_pick = 0;
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *sl = &e->slots[i];
		if (sl->r && sl->row >= 0)
			e->picks[n_pick++] = sl;
	}
	/* a pick from a row's best entries or a draw is a few hundred
	 * operations: the pool's threads are worth waking only for whole rows */
	int32_t n_whole = 0;
	for (int32_t i = 0; i < n_pick; i++)
		n_whole += alice_context_logits(e->ctx, e->picks[i]->row) != NULL;
	alice_workpool_run(n_whole > 1 ? e->pool : NULL, pick_item, e, n_pick);
	for (int32_t i = 0; i < n_pick; i++) {
		struct eng_slot *sl = e->picks[i];
		sl->generating = true;
		int32_t k = sl->n_draft, a = 0;
		if (k)
			slot_spec_count(e, sl, k, 0);
		slot_sample(e, sl);
		if (k == 0)
			continue;
		/* verify: drafted token a is accepted when the target samples it
		 * from row a; the next row then yields the following token */
		while (a < k && sl->r && sl->last_token == sl->draft[a]) {
			a++;
			slot_spec_count(e, sl, 0, 1);
			sl->n_past++;
			sl->row++;
			slot_pick(e, sl);
			slot_sample(e, sl);
		}
		slot_spec_adapt(e, sl, k, a);
		/* the KV of rejected positions is dropped (rewritten later) */
		alice_context_seq_truncate(e->ctx, sl->seq, sl->r ? sl->n_past : sl->n_cached);
	}
	if (e->trace) {
		fprintf(stderr, "engine step: %d tokens %d rows launched-to-done %.3f wait %.3f picks+events %.3f ms%s\n",
			f->n, f->n_rows, t_end - f->t_launch, t_end - t_dec, now_ms() - t_end,
			e->fl_n ? " (next in flight)" : "");
	}
}

static void step(struct alice_engine *e)
{
	if (e->fl_n == 0) {
		int32_t n_rows = 0, n = build_step(e, &n_rows);
		if (n == 0 || !launch_step(e, n, n_rows, false))
			return;
	}
	/* one step in flight: queue the next behind it when its tokens can
	 * come from this one's picks on the device, so the host's work on
	 * this one (picks, detokenizing, events) overlaps the next's compute */
	const struct eng_flight *f = &e->fl[e->fl_old];
	if (e->fl_n == 1 && pipeline_ok(e, f)) {
		int32_t n_rows = 0, n = build_fed(e, f, &n_rows);
		if (n > 0 && launch_step(e, n, n_rows, true)) {
			pthread_mutex_lock(&e->mu);
			e->stats.steps_fed++;
			pthread_mutex_unlock(&e->mu);
		}
	}
	take_step(e);
	/* a step in flight whose every request ended is taken now (nothing to
	 * overlap it with; the engine must not sleep over it) */
	if (e->fl_n == 1 && !flight_live(e, &e->fl[e->fl_old]))
		take_step(e);
}

void *eng_main(void *arg)
{
	struct alice_engine *e = arg;
	for (;;) {
		struct eng_req *cancelled = NULL;
		pthread_mutex_lock(&e->mu);
		/* the KV gauges walk every block of the pool: fresh before the
		 * engine sleeps, else at most every 20 ms (not on every step) */
		double now = now_ms();
		bool stale = now - e->t_kv_stats >= 20.0;
		for (;;) {
			bool busy = e->q_head != NULL || e->fl_n > 0;
			for (uint32_t i = 0; i < e->n_slots && !busy; i++)
				busy = e->slots[i].r != NULL;
			if (!busy || stale) {
				eng_kv_stats_update(e);
				e->t_kv_stats = now;
				stale = false;
			}
			if (busy || e->stopping)
				break;
			pthread_cond_wait(&e->cv, &e->mu);
			now = now_ms();
		}
		if (e->stopping) {
			/* everything still here ends as cancelled */
			for (struct eng_req *r = e->q_head; r; r = r->next)
				__atomic_store_n(&r->cancel, 1, __ATOMIC_RELAXED);
			for (uint32_t i = 0; i < e->n_slots; i++)
				if (e->slots[i].r)
					__atomic_store_n(&e->slots[i].r->cancel, 1, __ATOMIC_RELAXED);
		}
		eng_admit(e, &cancelled);
		bool stopping = e->stopping;
		pthread_mutex_unlock(&e->mu);
		if (e->on_round)
			e->on_round(e->round_user, true);

		while (cancelled) {
			struct eng_req *r = cancelled;
			cancelled = r->next;
			eng_emit_done(r, ALICE_ENGINE_FINISH_CANCELLED, NULL, 0, 0, NULL, NULL, ALICE_OK);
			eng_req_free(r);
		}
		for (uint32_t i = 0; i < e->n_slots; i++) {
			struct eng_slot *sl = &e->slots[i];
			if (!sl->r)
				continue;
			if (__atomic_load_n(&sl->r->cancel, __ATOMIC_RELAXED)) {
				if (!sl->started && sl->t_start == 0)
					sl->t_start = now_ms();
				eng_slot_finish(e, sl, ALICE_ENGINE_FINISH_CANCELLED, NULL, 0, NULL);
				continue;
			}
			if (!sl->started) {
				struct alice_error err = {{0}};
				enum alice_status st = eng_slot_start(e, sl, &err);
				if (st != ALICE_OK) {
					char msg[ALICE_ERROR_MSG_MAX + 32];
					snprintf(msg, sizeof(msg), "request setup: %s", err.msg);
					eng_slot_finish_status(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg, st);
				}
			}
		}
		if (!stopping)
			step(e);
		while (stopping && e->fl_n > 0) /* its requests are cancelled: rows skipped */
			take_step(e);
		if (e->on_round)
			e->on_round(e->round_user, false);
		if (stopping)
			break;
	}
	return NULL;
}

