/* engine.c — request queue + continuous-batching loop (see engine.h):
 * the queue, admission, slots and the public API; engine_step.c builds,
 * launches and takes the decode steps.
 *
 * Locking: `mu` guards the queue, the slots' request pointers (so cancel can
 * find a request) and the stats. Everything else in a slot belongs to the
 * engine thread. Callbacks are called without holding `mu`. */
#include "engine_internal.h"

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* p50 and p95 (nearest rank) of what the ring holds; tmp: the window's size */
static void lat_pct(const struct lat_ring *r, float *tmp, double *p50, double *p95)
{
	size_t n = r->n < ALICE_ENGINE_LAT_WINDOW ? (size_t)r->n : ALICE_ENGINE_LAT_WINDOW;
	*p50 = *p95 = 0;
	if (!n)
		return;
	memcpy(tmp, r->v, n * sizeof(float));
	qsort(tmp, n, sizeof(float), cmp_float);
	*p50 = tmp[(n - 1) / 2];
	*p95 = tmp[(size_t)((double)(n - 1) * 0.95 + 0.5)];
}


const char *alice_engine_finish_name(enum alice_engine_finish f)
{
	switch (f) {
	case ALICE_ENGINE_FINISH_NONE: return "none";
	case ALICE_ENGINE_FINISH_STOP: return "stop";
	case ALICE_ENGINE_FINISH_LENGTH: return "length";
	case ALICE_ENGINE_FINISH_CANCELLED: return "cancelled";
	case ALICE_ENGINE_FINISH_ERROR: return "error";
	}
	return "?";
}

void alice_engine_params_default(struct alice_engine_params *p)
{
	memset(p, 0, sizeof(*p));
	p->n_slots = 4;
	p->n_ctx = 0;
	p->n_batch = 512;
	p->max_queue = 64;
	p->pooling = ALICE_POOLING_UNSPECIFIED;
}

void eng_req_free(struct eng_req *r)
{
	if (!r)
		return;
	alice_grammar_constraint_free(r->grammar);
	for (size_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->stop);
	free(r->stop_len);
	free(r->stop_src);
	free(r->bias);
	free(r->prompt);
	free(r);
}

/* ---- events ---- */

void eng_emit_done(struct eng_req *r, enum alice_engine_finish f, const char *text, size_t len,
		      int32_t n_completion, const struct eng_slot *sl, const char *error,
		      enum alice_status error_status)
{
	struct alice_engine_event ev = {0};
	ev.id = r->id;
	ev.type = ALICE_ENGINE_EVENT_DONE;
	ev.text = text ? text : "";
	ev.text_len = text ? len : 0;
	ev.finish = f;
	ev.n_prompt = r->n_prompt;
	ev.n_completion = n_completion;
	ev.n_drafted = sl ? sl->n_drafted : 0;
	ev.n_accepted = sl ? sl->n_accepted : 0;
	ev.error = error;
	ev.error_status = f == ALICE_ENGINE_FINISH_ERROR ? error_status : ALICE_OK;
	ev.stop_index = f == ALICE_ENGINE_FINISH_STOP ? r->stop_hit : -1;
	if (sl) {
		ev.n_cached = sl->n_reused;
		ev.queue_ms = sl->t_start - r->t_submit;
		if (sl->t_first > 0) {
			ev.prefill_ms = sl->t_first - sl->t_start;
			ev.decode_ms = sl->t_last - sl->t_first;
		} else {
			ev.prefill_ms = now_ms() - sl->t_start;
		}
	} else {
		ev.queue_ms = now_ms() - r->t_submit;
	}
	r->on_event(&ev, r->user);
}

/* ---- slots ---- */

/* KV positions held (busy slots: so far; idle: cached). Called with mu held
 * by the engine thread, which owns n_past / n_cached. */
void eng_kv_stats_update(struct alice_engine *e)
{
	uint64_t kv = 0;
	for (uint32_t i = 0; i < e->n_slots; i++) {
		kv += (uint64_t)(e->slots[i].r ? e->slots[i].n_past : e->slots[i].n_cached);
		e->active[i] = e->slots[i].r != NULL;
	}
	e->stats.kv_cells_used = kv;
	struct alice_kv_usage u;
	alice_context_kv_usage(e->ctx, e->active, &u);
	e->stats.kv_block_cells = u.block_cells;
	e->stats.kv_blocks_total = u.blocks_total;
	e->stats.kv_blocks_used = u.blocks_used;
	e->stats.kv_blocks_shared = u.blocks_shared;
	e->stats.kv_blocks_cached = u.blocks_idle;
	e->stats.kv_blocks_available = u.blocks_available;
}

/* Free the slot for the next request and update the stats; returns the
 * request, which the caller frees after its DONE event. The stats change
 * before that event goes out, so a client that reads /metrics right after
 * its answer sees it counted and the slot free. */
struct eng_req *eng_slot_release(struct alice_engine *e, struct eng_slot *sl)
{
	alice_sampler_free(sl->sampler);
	sl->sampler = NULL;
	sl->started = false;
	alice_detok_stream_free(sl->detok);
	sl->detok = NULL;
	sl->pending.n = 0;
	sl->pending.oom = false;
	/* a step launched before the request ended computed a position past
	 * its end (the pipelined engine): take it back */
	if (alice_context_seq_len(e->ctx, sl->seq) > sl->n_past && sl->n_past > 0)
		alice_context_seq_truncate(e->ctx, sl->seq, sl->n_past);
	/* the blocks it did not take go back; those it holds stay cached */
	alice_context_seq_reserve(e->ctx, sl->seq, 0);
	/* keep the KV for the next request unless it may be inconsistent */
	if (e->prefix_cache && sl->n_past > 0 && sl->toks) {
		sl->n_cached = sl->n_past;
	} else {
		alice_context_seq_clear(e->ctx, sl->seq);
		sl->n_past = sl->n_cached = 0;
	}
	struct eng_req *r = sl->r;
	pthread_mutex_lock(&e->mu);
	sl->r = NULL;
	e->stats.slots_busy--;
	e->stats.requests_done++;
	e->stats.tokens_generated += (uint64_t)sl->n_generated;
	eng_kv_stats_update(e);
	pthread_mutex_unlock(&e->mu);
	return r;
}

/* Finish the slot's request: emit DONE (with `text` as the last delta) and free the slot. */
void eng_slot_finish_status(struct alice_engine *e, struct eng_slot *sl, enum alice_engine_finish f,
			       const char *text, size_t len, const char *error, enum alice_status est)
{
	if (sl->t_first > 0 && sl->t_last <= 0)
		sl->t_last = sl->t_first;
	if (f == ALICE_ENGINE_FINISH_ERROR)
		sl->n_past = 0; /* a failed decode may leave the KV half written: do not reuse */
	int32_t n_generated = sl->n_generated;
	struct eng_req *r = eng_slot_release(e, sl);
	eng_emit_done(r, f, text, len, n_generated, sl, error, est);
	eng_req_free(r);
}

void eng_slot_finish(struct alice_engine *e, struct eng_slot *sl, enum alice_engine_finish f,
			const char *text, size_t len, const char *error)
{
	eng_slot_finish_status(e, sl, f, text, len, error, ALICE_ERR_BACKEND);
}

/* First occurrence of any stop string in the pending text: its offset, or -1
 * (*which: the request's index of that stop string). */
ptrdiff_t eng_find_stop(const struct eng_slot *sl, const struct eng_req *r, int32_t *which)
{
	ptrdiff_t best = -1;
	for (size_t i = 0; i < r->n_stop; i++) {
		size_t n = r->stop_len[i];
		if (n > sl->pending.n)
			continue;
		for (size_t at = 0; at + n <= sl->pending.n; at++) {
			if ((best >= 0 && (ptrdiff_t)at >= best))
				break;
			if (memcmp(sl->pending.p + at, r->stop[i], n) == 0) {
				best = (ptrdiff_t)at;
				*which = r->stop_src[i];
				break;
			}
		}
	}
	return best;
}

/* Bytes at the end of the pending text that could begin a stop string. */
size_t eng_stop_prefix_tail(const struct eng_slot *sl, const struct eng_req *r)
{
	size_t keep = 0;
	for (size_t i = 0; i < r->n_stop; i++) {
		size_t n = r->stop_len[i];
		size_t max = n - 1 < sl->pending.n ? n - 1 : sl->pending.n;
		for (size_t k = max; k > keep; k--) {
			if (memcmp(sl->pending.p + sl->pending.n - k, r->stop[i], k) == 0) {
				keep = k;
				break;
			}
		}
	}
	return keep;
}

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
	int32_t n = na < nb ? na : nb, i = 0;
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

enum alice_status eng_slot_start(struct alice_engine *e, struct eng_slot *sl, struct alice_error *err)
{
	enum alice_status st;
	struct eng_req *r = sl->r;
	/* the KV it reuses was set up at admission (sl->n_past = n_reused) */
	int32_t keep = sl->n_reused;
	if (e->drafter) /* the draft recomputes what the target does, in the same steps */
		alice_spec_drafter_keep(e->drafter, sl->seq, keep);
	pthread_mutex_lock(&e->mu);
	e->stats.prompt_tokens += (uint64_t)r->n_prompt;
	e->stats.prompt_tokens_cached += (uint64_t)keep;
	pthread_mutex_unlock(&e->mu);
	sl->generating = false;
	sl->n_generated = 0;
	sl->row = -1;
	sl->pending.n = 0;
	sl->pending.oom = false;
	sl->t_start = now_ms();
	sl->t_first = sl->t_last = 0;
	sl->n_draft = sl->misses = sl->cool = 0;
	sl->n_drafted = sl->n_accepted = 0;
	sl->spec_k = (int32_t)e->spec.n_max;
	sl->started = true;
	if (e->embd) /* nothing to sample or detokenize */
		return ALICE_OK;
	if ((st = alice_sampler_create(&r->sp, e->n_vocab, &sl->sampler, err)) != ALICE_OK)
		return st;
	/* logprobs from the device's best entries and LOGSUMEXP, where it can */
	sl->lp_dev = !r->grammar && alice_context_lse_ok(e->ctx) &&
		     alice_sampler_device_logprobs(sl->sampler, alice_context_top_k(e->ctx));
	return alice_detok_stream_create(e->tok, r->render_special, &sl->detok, err);
}

/* ---- the step ---- */

/* KV positions a request may fill: its prompt and max_tokens generated
 * tokens (the last one is never fed back, and drafted rows stay within
 * max_tokens: slot_draft), at most a full context. */
static int32_t req_kv_tokens(const struct alice_engine *e, const struct eng_req *r)
{
	int64_t n = e->embd ? r->n_prompt : r->max_tokens >= 0 ? (int64_t)r->n_prompt + r->max_tokens : e->n_ctx;
	return n < (int64_t)e->n_ctx ? (int32_t)n : (int32_t)e->n_ctx;
}

/* The KV of a slot's tokens (busy slots: those computed so far). */
static int32_t slot_held(const struct eng_slot *c)
{
	return c->r ? c->n_past : c->n_cached;
}

/* Pick the slot for request r and set its KV up: the reused prefix (kept
 * in place or shared from another slot), then the reservation of every
 * block it may need, evicting idle slots' caches (least recently used
 * first) when the pool is short. Returns the slot (its n_past = n_reused =
 * the reused positions), or NULL when r must wait: no idle slot, or the
 * blocks are held by running requests (the slot picked then keeps what it
 * reused as its cache). Under mu, on the engine thread. */
static struct eng_slot *kv_admit(struct alice_engine *e, struct eng_req *r)
{
	/* the slot, idle or running, whose tokens share the longest prefix
	 * (prefill at least the prompt's last token: its logits start the
	 * generation), and the least recently used idle slot */
	struct eng_slot *src = NULL, *lru = NULL;
	int32_t best = 0;
	for (uint32_t i = 0; i < e->n_slots; i++) {
		struct eng_slot *c = &e->slots[i];
		int32_t held = slot_held(c);
		if (e->prefix_cache && c->toks && held > 0) {
			int32_t k = common_prefix(r->prompt, r->n_prompt - 1, c->toks, held);
			if (k > best || (k == best && k > 0 && !c->r && src && src->r)) { /* ties: an idle one */
				best = k;
				src = c;
			}
		}
		if (!c->r && (!lru || c->last_used < lru->last_used))
			lru = c;
	}
	if (!lru)
		return NULL;
	/* in place when that slot is idle and the prefix is at least half the
	 * prompt; else the LRU idle slot, sharing the prefix's whole blocks,
	 * so a mere shared BOS or system line does not evict another
	 * conversation's history */
	struct eng_slot *sl;
	int32_t keep = 0;
	if (src && !src->r && (2 * (int64_t)best >= (int64_t)r->n_prompt || src == lru)) {
		sl = src;
		keep = alice_context_seq_keep(e->ctx, sl->seq, best);
	} else {
		sl = lru;
		keep = src && best >= ALICE_KV_BLOCK ? alice_context_seq_share(e->ctx, sl->seq, src->seq, best) : -1;
		if (keep < 0) { /* nothing shared (recurrent model, short prefix) */
			alice_context_seq_clear(e->ctx, sl->seq);
			keep = 0;
		} else if (keep > 0) {
			memcpy(sl->toks, r->prompt, (size_t)keep * sizeof(*sl->toks));
		}
	}
	if (keep < 0)
		keep = 0;
	sl->n_cached = keep;
	int32_t need = req_kv_tokens(e, r);
	bool ok = alice_context_seq_reserve(e->ctx, sl->seq, need);
	if (!ok) {
		/* evict only when that would be enough: the blocks it still
		 * needs against those free plus those only other idle slots hold */
		for (uint32_t i = 0; i < e->n_slots; i++)
			e->active[i] = e->slots[i].r != NULL || &e->slots[i] == sl;
		struct alice_kv_usage u;
		alice_context_kv_usage(e->ctx, e->active, &u);
		uint32_t want = (uint32_t)((need + ALICE_KV_BLOCK - 1) / ALICE_KV_BLOCK),
			 held = alice_context_seq_blocks(e->ctx, sl->seq);
		want = want > held ? want - held : 0;
		if (want > u.blocks_available + u.blocks_idle)
			goto wait;
	}
	while (!ok) { /* evict idle caches, least recently used first */
		struct eng_slot *v = NULL;
		for (uint32_t i = 0; i < e->n_slots; i++) {
			struct eng_slot *c = &e->slots[i];
			if (c != sl && !c->r && alice_context_seq_blocks(e->ctx, c->seq) > 0 &&
			    (!v || c->last_used < v->last_used))
				v = c;
		}
		if (!v)
			break;
		alice_context_seq_clear(e->ctx, v->seq);
		v->n_cached = v->n_past = 0;
		ok = alice_context_seq_reserve(e->ctx, sl->seq, need);
	}
	if (!ok) {
wait:
		if (!r->kv_waited) {
			r->kv_waited = true;
			e->stats.requests_kv_waited++;
		}
		return NULL;
	}
	sl->n_past = sl->n_reused = keep;
	sl->n_cached = 0;
	return sl;
}

void eng_admit(struct alice_engine *e, struct eng_req **cancelled)
{
	/* queued requests that were cancelled leave without a slot */
	struct eng_req **pp = &e->q_head, *last = NULL;
	while (*pp) {
		struct eng_req *r = *pp;
		if (__atomic_load_n(&r->cancel, __ATOMIC_RELAXED)) {
			*pp = r->next;
			e->n_queued--;
			r->next = *cancelled;
			*cancelled = r;
		} else {
			last = r;
			pp = &r->next;
		}
	}
	e->q_tail = last;
	while (e->q_head) {
		struct eng_slot *sl = kv_admit(e, e->q_head);
		if (!sl)
			break; /* no idle slot, or not enough KV blocks yet: it waits */
		sl->last_used = ++e->n_admitted;
		struct eng_req *r = e->q_head;
		e->q_head = r->next;
		if (!e->q_head)
			e->q_tail = NULL;
		e->n_queued--;
		r->next = NULL;
		sl->r = r;
		sl->started = false;
		sl->t_start = sl->t_first = sl->t_last = 0;
		sl->n_generated = 0;
		sl->generating = false;
		e->stats.slots_busy++;
	}
	e->stats.queued = e->n_queued;
}

/* ---- public API ---- */

enum alice_status alice_engine_create(struct alice_model *model, const struct alice_engine_params *p,
				      struct alice_engine **out, struct alice_error *err)
{
	struct alice_engine_params def;
	alice_engine_params_default(&def);
	if (!p)
		p = &def;
	*out = NULL;
	struct alice_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	e->model = model;
	e->tok = alice_model_tokenizer(model);
	e->n_vocab = alice_model_n_vocab(model);
	e->n_slots = p->n_slots ? p->n_slots : def.n_slots;
	e->n_batch = p->n_batch ? p->n_batch : def.n_batch;
	e->max_queue = p->max_queue ? p->max_queue : def.max_queue;
	e->prefix_cache = !p->no_prefix_cache && !p->embeddings;
	e->embd = p->embeddings;
	e->n_embd = alice_model_n_embd(model);
	e->pooling = p->pooling >= ALICE_POOLING_NONE && p->pooling <= ALICE_POOLING_LAST ? p->pooling
											 : alice_model_pooling(model);
	if (e->pooling == ALICE_POOLING_UNSPECIFIED)
		e->pooling = ALICE_POOLING_NONE;
	e->spec = p->spec;
	e->on_round = p->on_round;
	e->round_user = p->round_user;
	if (e->embd) /* nothing is generated, nothing to draft */
		e->spec.mode = ALICE_SPEC_NONE;
	enum alice_status st;
	if (e->spec.mode != ALICE_SPEC_NONE) {
		if ((st = alice_spec_params_check(&e->spec, err)) != ALICE_OK)
			goto fail;
		if (alice_model_is_recurrent(model)) {
			alice_log(ALICE_LOG_WARN, "engine: speculative decoding is off: the model (%s) has recurrent "
				  "state, which cannot be rewound after a rejected draft", alice_model_arch(model));
			e->spec.mode = ALICE_SPEC_NONE;
		}
	}
	/* a step: one decode row per slot (plus its drafted tokens) + up to
	 * n_batch prompt tokens */
	uint32_t per_slot = 1 + (e->spec.mode != ALICE_SPEC_NONE ? e->spec.n_max : 0);
	uint32_t step_max = e->n_batch + e->n_slots * per_slot;
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = p->n_ctx;
	cp.n_seq = e->n_slots;
	cp.n_batch = step_max;
	cp.embeddings = e->embd;
	/* the backend picks each row's best entries, enough for greedy and
	 * top-k <= 128 sampling: only those cross to the host */
	cp.topk = ALICE_TOPK_MAX;
	cp.n_kv_cells = p->n_kv_cells;
	st = alice_context_create(model, &cp, &e->ctx, err);
	if (st != ALICE_OK)
		goto fail;
	e->n_ctx = alice_context_n_ctx(e->ctx);
	if (e->spec.mode == ALICE_SPEC_DRAFT &&
	    (st = alice_spec_drafter_create(e->spec.draft, e->n_slots, e->n_ctx, e->n_batch, &e->drafter, err)) != ALICE_OK)
		goto fail;
	e->slots = calloc(e->n_slots, sizeof(*e->slots));
	e->b_tok = malloc(step_max * sizeof(*e->b_tok));
	e->b_pos = malloc(step_max * sizeof(*e->b_pos));
	e->b_seq = malloc(step_max * sizeof(*e->b_seq));
	e->b_logits = malloc(step_max * sizeof(*e->b_logits));
	e->b_solo = malloc(step_max * sizeof(*e->b_solo));
	e->b_top = malloc(step_max * sizeof(*e->b_top));
	e->b_draw = malloc(step_max * sizeof(*e->b_draw));
	e->b_adj = malloc(step_max * sizeof(*e->b_adj));
	e->b_n_adj = malloc(step_max * sizeof(*e->b_n_adj));
	e->b_topn = malloc(step_max * sizeof(*e->b_topn));
	e->b_feed = malloc(step_max * sizeof(*e->b_feed));
	e->b_lp = malloc(step_max * sizeof(*e->b_lp));
	e->b_mask = malloc(step_max * sizeof(*e->b_mask));
	bool fl_ok = true;
	for (int i = 0; i < 2; i++) {
		struct eng_flight *f = &e->fl[i];
		f->tok = malloc(step_max * sizeof(*f->tok));
		f->seq = malloc(step_max * sizeof(*f->seq));
		f->req = malloc(step_max * sizeof(*f->req));
		f->sreq = calloc(e->n_slots, sizeof(*f->sreq));
		f->row = malloc(e->n_slots * sizeof(*f->row));
		f->adj_row = malloc(e->n_slots * sizeof(*f->adj_row));
		f->n_draft = malloc(e->n_slots * sizeof(*f->n_draft));
		f->ntok = malloc(e->n_slots * sizeof(*f->ntok));
		fl_ok = fl_ok && f->tok && f->seq && f->req && f->sreq && f->row && f->adj_row && f->n_draft && f->ntok;
	}
	/* where the backend computes a step while the host works on the last
	 * (graph_launch); ALICE_PIPELINE=1 also elsewhere (tests), =0 never */
	const char *pe = getenv("ALICE_PIPELINE");
	e->pipeline = alice_context_can_feed(e->ctx) && !e->embd && e->spec.mode == ALICE_SPEC_NONE &&
		      (pe ? pe[0] == '1' : alice_context_async(e->ctx));
	const char *te = getenv("ALICE_ENGINE_TRACE");
	e->trace = te && atoi(te) > 0;
	e->picks = malloc(e->n_slots * sizeof(*e->picks));
	e->active = calloc(e->n_slots, sizeof(*e->active));
	if (e->embd && !(e->vec = malloc((size_t)step_max * (size_t)e->n_embd * sizeof(float)))) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto fail;
	}
	if (!e->slots || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits || !e->b_solo || !e->b_top || !e->b_draw ||
	    !e->b_adj || !e->b_n_adj || !e->b_topn || !e->b_feed || !e->b_lp || !e->b_mask || !fl_ok || !e->picks || !e->active) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto fail;
	}
	for (uint32_t i = 0; i < e->n_slots; i++) {
		e->slots[i].seq = (int32_t)i;
		/* the slot's tokens: for the prefix cache and as drafting context */
		bool toks = e->prefix_cache || e->spec.mode != ALICE_SPEC_NONE;
		if (toks && !(e->slots[i].toks = malloc(e->n_ctx * sizeof(int32_t)))) {
			st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
			goto fail;
		}
	}
	/* sampling a 128k vocabulary costs ~0.1-0.4 ms a row: a step of many
	 * rows spreads it over helper threads, all but one CPU by default (the
	 * step's compute is over by then, on any backend; the HTTP thread keeps
	 * one) */
	if (e->n_slots > 1) {
		int nt = p->n_sample_threads > 0 ? (int)p->n_sample_threads - 1 : alice_workpool_default_threads(31);
		if (nt > (int)e->n_slots - 1)
			nt = (int)e->n_slots - 1;
		if (nt > 0 && !(e->pool = alice_workpool_create(nt))) {
			st = alice_fail(err, ALICE_ERR_NOMEM, "cannot start the sampling threads");
			goto fail;
		}
	}
	e->stats.n_slots = e->n_slots;
	{
		struct alice_kv_usage u;
		alice_context_kv_usage(e->ctx, NULL, &u);
		e->stats.kv_cells_total = (uint64_t)u.blocks_total * u.block_cells;
		eng_kv_stats_update(e);
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	if (pthread_create(&e->thread, NULL, eng_main, e) != 0) {
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
		st = alice_fail(err, ALICE_ERR_NOMEM, "cannot start the engine thread");
		goto fail;
	}
	e->thread_started = true;
	*out = e;
	return ALICE_OK;
fail:
	alice_engine_free(e); /* the thread is not running: frees what was allocated */
	return st;
}

void alice_engine_free(struct alice_engine *e)
{
	if (!e)
		return;
	if (e->thread_started) {
		pthread_mutex_lock(&e->mu);
		e->stopping = true;
		pthread_cond_signal(&e->cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->thread, NULL);
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
	}
	alice_workpool_free(e->pool);
	for (uint32_t i = 0; e->slots && i < e->n_slots; i++) {
		free(e->slots[i].pending.p);
		free(e->slots[i].toks);
		free(e->slots[i].mask);
		free(e->slots[i].mask_bits);
		free(e->slots[i].adj);
	}
	alice_context_free(e->ctx);
	alice_spec_drafter_free(e->drafter);
	free(e->slots);
	free(e->b_tok);
	free(e->b_pos);
	free(e->b_seq);
	free(e->b_logits);
	free(e->b_solo);
	free(e->b_top);
	free(e->b_draw);
	free(e->b_adj);
	free(e->b_n_adj);
	free(e->b_topn);
	free(e->b_feed);
	free(e->b_lp);
	free(e->b_mask);
	for (int i = 0; i < 2; i++) {
		struct eng_flight *f = &e->fl[i];
		free(f->tok);
		free(f->seq);
		free(f->req);
		free(f->sreq);
		free(f->row);
		free(f->adj_row);
		free(f->n_draft);
		free(f->ntok);
	}
	free(e->picks);
	free(e->active);
	free(e->vec);
	free(e);
}

enum alice_status alice_engine_submit(struct alice_engine *e, const struct alice_engine_request *q,
				      uint64_t *id, struct alice_error *err)
{
	if (!q->on_event)
		return alice_fail(err, ALICE_ERR_INVALID, "request has no event callback");
	if (q->n_prompt < 1)
		return alice_fail(err, ALICE_ERR_INVALID, "the prompt is empty (0 tokens)");
	if ((uint32_t)q->n_prompt > e->n_ctx)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "the prompt has %d tokens but the context holds %u per request", q->n_prompt,
				  e->n_ctx);
	if (e->embd && (uint32_t)q->n_prompt > alice_engine_max_embd_tokens(e))
		return alice_fail(err, ALICE_ERR_INVALID,
				  "the input has %d tokens but at most %u are embedded in one batch (--batch-size)",
				  q->n_prompt, alice_engine_max_embd_tokens(e));
	for (int32_t i = 0; i < q->n_prompt; i++)
		if (q->prompt[i] < 0 || q->prompt[i] >= e->n_vocab)
			return alice_fail(err, ALICE_ERR_INVALID, "prompt token %d (at %d) is not in [0, %d)",
					  q->prompt[i], i, e->n_vocab);
	struct eng_req *r = calloc(1, sizeof(*r));
	if (!r)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	r->prompt = malloc((size_t)q->n_prompt * sizeof(*r->prompt));
	if (!r->prompt)
		goto nomem;
	memcpy(r->prompt, q->prompt, (size_t)q->n_prompt * sizeof(*r->prompt));
	r->n_prompt = q->n_prompt;
	r->max_tokens = q->max_tokens;
	r->sp = q->sampling;
	if (q->sampling.n_logit_bias) {
		r->bias = malloc(q->sampling.n_logit_bias * sizeof(*r->bias));
		if (!r->bias)
			goto nomem;
		memcpy(r->bias, q->sampling.logit_bias, q->sampling.n_logit_bias * sizeof(*r->bias));
	}
	r->sp.logit_bias = r->bias;
	if (q->n_stop) {
		r->stop = calloc(q->n_stop, sizeof(*r->stop));
		r->stop_len = calloc(q->n_stop, sizeof(*r->stop_len));
		r->stop_src = calloc(q->n_stop, sizeof(*r->stop_src));
		if (!r->stop || !r->stop_len || !r->stop_src)
			goto nomem;
		for (size_t i = 0; i < q->n_stop; i++) {
			size_t n = strlen(q->stop[i]);
			if (n == 0)
				continue;
			r->stop[r->n_stop] = malloc(n + 1);
			if (!r->stop[r->n_stop])
				goto nomem;
			memcpy(r->stop[r->n_stop], q->stop[i], n + 1);
			r->stop_src[r->n_stop] = (int32_t)i;
			r->stop_len[r->n_stop++] = n;
		}
	}
	r->on_event = q->on_event;
	r->user = q->user;
	r->ignore_eos = q->ignore_eos;
	r->stop_hit = -1;
	r->render_special = q->render_special;
	r->no_spec = q->no_spec;
	r->spec_n_max = q->spec_n_max;
	r->spec_n_min = q->spec_n_min;
	r->spec_p_min = q->spec_p_min;
	r->t_submit = now_ms();

	pthread_mutex_lock(&e->mu);
	if (e->stopping) {
		pthread_mutex_unlock(&e->mu);
		eng_req_free(r);
		return alice_fail(err, ALICE_ERR_CANCELLED, "the engine is stopping");
	}
	uint32_t free_slots = 0;
	for (uint32_t i = 0; i < e->n_slots; i++)
		free_slots += e->slots[i].r == NULL;
	if (e->n_queued >= e->max_queue + free_slots) {
		pthread_mutex_unlock(&e->mu);
		eng_req_free(r);
		return alice_fail(err, ALICE_ERR_RANGE, "the queue is full (%u requests waiting)", e->n_queued);
	}
	/* the grammar constraint is ours only once the request is accepted */
	r->grammar = q->grammar;
	r->id = ++e->next_id;
	if (e->q_tail)
		e->q_tail->next = r;
	else
		e->q_head = r;
	e->q_tail = r;
	e->n_queued++;
	e->stats.queued = e->n_queued;
	if (id)
		*id = r->id;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return ALICE_OK;
nomem:
	eng_req_free(r);
	return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
}

void alice_engine_cancel(struct alice_engine *e, uint64_t id)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	for (struct eng_req *r = e->q_head; r; r = r->next)
		if (r->id == id)
			__atomic_store_n(&r->cancel, 1, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < e->n_slots; i++)
		if (e->slots[i].r && e->slots[i].r->id == id)
			__atomic_store_n(&e->slots[i].r->cancel, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

void alice_engine_stats(struct alice_engine *e, struct alice_engine_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!e)
		return;
	float *tmp = malloc(ALICE_ENGINE_LAT_WINDOW * sizeof(float));
	pthread_mutex_lock(&e->mu);
	*out = e->stats;
	if (tmp) {
		lat_pct(&e->ttft, tmp, &out->ttft_p50_ms, &out->ttft_p95_ms);
		lat_pct(&e->itl, tmp, &out->itl_p50_ms, &out->itl_p95_ms);
	}
	out->ttft_samples = e->ttft.n;
	out->itl_samples = e->itl.n;
	out->picks_device = __atomic_load_n(&e->picks_device, __ATOMIC_RELAXED);
	out->picks_host = __atomic_load_n(&e->picks_host, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->mu);
	free(tmp);
}

uint32_t alice_engine_n_ctx(const struct alice_engine *e)
{
	return e ? e->n_ctx : 0;
}

int alice_engine_pooling(const struct alice_engine *e)
{
	return e->embd ? e->pooling : -1;
}

uint32_t alice_engine_max_embd_tokens(const struct alice_engine *e)
{
	return e->n_batch < e->n_ctx ? e->n_batch : e->n_ctx;
}
