/* engine.c — request queue + continuous-batching loop (see engine.h).
 *
 * Locking: `mu` guards the queue, the slots' request pointers (so cancel can
 * find a request) and the stats. Everything else in a slot belongs to the
 * engine thread. Callbacks are called without holding `mu`. */
#include "alice/engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/backend.h"
#include "alice/embed.h"
#include "alice/grammar.h"
#include "alice/log.h"
#include "alice/sbuf.h"
#include "alice/tokenizer.h"
#include "workpool.h"

struct eng_req {
	struct eng_req *next;
	uint64_t id;
	int32_t *prompt;
	int32_t n_prompt;
	int32_t max_tokens;
	struct alice_sampling_params sp;
	struct alice_logit_bias *bias; /* sp.logit_bias points here */
	char **stop;
	size_t *stop_len;
	int32_t *stop_src; /* each stop's index in the request's list (empty ones are dropped) */
	size_t n_stop;
	int32_t stop_hit;  /* the request's index of the stop string that ended it, -1 none */
	struct alice_grammar_constraint *grammar;
	bool ignore_eos;
	bool render_special;
	bool no_spec;
	int32_t spec_n_max, spec_n_min;
	float spec_p_min;
	alice_engine_event_fn on_event;
	void *user;
	int cancel; /* atomic */
	double t_submit;
	bool kv_waited; /* counted in stats.requests_kv_waited */
};

/* A step launched and not yet taken (alice_context_launch / finish): what
 * taking it needs once the next step is built. Per token: its host token
 * (-1: fed from the step before), sequence and the request its slot served
 * at launch; per slot: the request, its first row (-1 none), LOGIT_ADJUST
 * row, drafted tokens and tokens in the step. */
struct eng_flight {
	int32_t n, n_rows;
	int32_t *tok, *seq;
	struct eng_req **req;
	struct eng_req **sreq;
	int32_t *row, *adj_row, *n_draft, *ntok;
	double t_launch;
};

struct eng_slot {
	struct eng_req *r; /* NULL: free (written under mu) */
	int32_t seq;
	int32_t n_past;      /* positions in the cache */
	bool started;        /* slot_start ran for this request */
	bool generating;     /* prompt fully decoded */
	int32_t last_token;  /* fed at position n_past next step */
	int32_t n_generated;
	int32_t row;         /* logits row this step, -1 none */
	bool lp_dev;         /* its logprobs come from the device (batch.logprobs) */
	struct alice_sampler *sampler;
	struct alice_detok_stream *detok;
	struct alice_sbuf pending; /* text held back: it may start a stop string */
	double t_start, t_first, t_last;
	/* prefix cache: toks[0..n_past) are the tokens whose KV the sequence
	 * holds; an idle slot keeps n_cached of them for the next request */
	int32_t *toks;
	int32_t n_cached;
	int32_t n_reused; /* prompt tokens this request took from the cache */
	uint64_t last_used; /* admission counter, for least-recently-used eviction */
	/* this step's pick (slot_pick, maybe on a pool thread) */
	struct alice_sample_result res;
	enum alice_status pick_st;
	char pick_msg[ALICE_ERROR_MSG_MAX + 64];
	uint8_t *mask; /* n_vocab, constrained requests only */
	uint32_t *mask_bits; /* the same as bits, for the device (batch.mask) */
	/* this step's logit bias and penalties for the backend (row adj_row;
	 * -1 none), in adj[ALICE_ADJ_ROW_MAX], made on first use */
	struct alice_logit_adj *adj;
	int32_t adj_row;
	/* speculative decoding (spec.h): this step's drafted tokens, verified
	 * in rows row+1 .. row+n_draft; spec_k: the adaptive draft length;
	 * misses / cool: drafts wholly rejected in a row, steps left without
	 * drafting */
	int32_t draft[ALICE_SPEC_MAX_DRAFT];
	int32_t n_draft, spec_k, misses, cool;
	int32_t n_drafted, n_accepted;
};

/* the last ALICE_ENGINE_LAT_WINDOW samples of one latency, for percentiles */
struct lat_ring {
	float v[ALICE_ENGINE_LAT_WINDOW];
	uint64_t n; /* ever recorded */
};

static void lat_add(struct lat_ring *r, double ms)
{
	r->v[r->n % ALICE_ENGINE_LAT_WINDOW] = (float)ms;
	r->n++;
}

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

struct alice_engine {
	struct alice_model *model;
	struct alice_context *ctx;
	const struct alice_tokenizer *tok;
	int32_t n_vocab;
	uint32_t n_slots, n_ctx, n_batch, max_queue;
	uint64_t picks_device, picks_host; /* atomic: slot_pick runs on pool threads */
	double t_kv_stats;                 /* last kv_stats_update (engine thread) */
	void (*on_round)(void *user, bool begin); /* alice_engine_params */
	void *round_user;
	bool prefix_cache;
	uint64_t n_admitted;
	bool embd;        /* an embeddings engine */
	int pooling;      /* its pooling (enum alice_pooling) */
	int32_t n_embd;
	float *vec;       /* [n_batch * n_embd]: a request's vectors */
	struct alice_spec_params spec; /* mode NONE: off */
	struct alice_spec_drafter *drafter; /* ALICE_SPEC_DRAFT */

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct eng_req *q_head, *q_tail;
	uint32_t n_queued;
	bool stopping;
	uint64_t next_id;
	struct alice_engine_stats stats;
	struct lat_ring ttft, itl; /* under mu */

	struct eng_slot *slots;
	int32_t *b_tok, *b_pos, *b_seq;
	bool *b_logits, *b_solo, *b_top;
	struct alice_draw *b_draw; /* backend draws (alice_sampler_temp_ok rows) */
	const struct alice_logit_adj **b_adj; /* per row: its edits on the device, or NULL */
	int32_t *b_n_adj;
	int32_t *b_topn; /* 1: the row's pick reads only its best entry */
	int32_t *b_feed; /* a fed step's rows of the step before */
	bool *b_lp;      /* batch.logprobs */
	const uint32_t **b_mask; /* batch.mask: a constrained row's allowed tokens */
	/* steps in flight: fl_n of them, the oldest fl[fl_old]; pipeline: the
	 * next step may be launched before the last is taken (the context
	 * feeds tokens on the device; ALICE_PIPELINE=0 turns it off) */
	struct eng_flight fl[2];
	int32_t fl_n, fl_old;
	bool pipeline;
	bool trace; /* ALICE_ENGINE_TRACE=1: a line per step on stderr */
	struct alice_workpool *pool; /* samples a step's rows in parallel */
	struct eng_slot **picks;     /* [n_slots]: the slots sampled this step */
	bool *active;                /* [n_slots]: scratch of kv_stats_update */
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
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

static void req_free(struct eng_req *r)
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

static void emit_done(struct eng_req *r, enum alice_engine_finish f, const char *text, size_t len,
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
static void kv_stats_update(struct alice_engine *e)
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
static struct eng_req *slot_release(struct alice_engine *e, struct eng_slot *sl)
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
	kv_stats_update(e);
	pthread_mutex_unlock(&e->mu);
	return r;
}

/* Finish the slot's request: emit DONE (with `text` as the last delta) and free the slot. */
static void slot_finish_status(struct alice_engine *e, struct eng_slot *sl, enum alice_engine_finish f,
			       const char *text, size_t len, const char *error, enum alice_status est)
{
	if (sl->t_first > 0 && sl->t_last <= 0)
		sl->t_last = sl->t_first;
	if (f == ALICE_ENGINE_FINISH_ERROR)
		sl->n_past = 0; /* a failed decode may leave the KV half written: do not reuse */
	int32_t n_generated = sl->n_generated;
	struct eng_req *r = slot_release(e, sl);
	emit_done(r, f, text, len, n_generated, sl, error, est);
	req_free(r);
}

static void slot_finish(struct alice_engine *e, struct eng_slot *sl, enum alice_engine_finish f,
			const char *text, size_t len, const char *error)
{
	slot_finish_status(e, sl, f, text, len, error, ALICE_ERR_BACKEND);
}

/* First occurrence of any stop string in the pending text: its offset, or -1
 * (*which: the request's index of that stop string). */
static ptrdiff_t find_stop(const struct eng_slot *sl, const struct eng_req *r, int32_t *which)
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
static size_t stop_prefix_tail(const struct eng_slot *sl, const struct eng_req *r)
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

static enum alice_status slot_start(struct alice_engine *e, struct eng_slot *sl, struct alice_error *err)
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

static void admit(struct alice_engine *e, struct eng_req **cancelled)
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
		slot_finish_status(e, sl, f, NULL, 0, sl->pick_msg, sl->pick_st);
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
		slot_finish(e, sl, ALICE_ENGINE_FINISH_STOP, sl->pending.p, sl->pending.n, NULL);
		return;
	}
	bool must_end = false;
	if (r->grammar && (st = alice_grammar_constraint_accept(r->grammar, res.token, &must_end, &err)) != ALICE_OK) {
		snprintf(msg, sizeof(msg), "constraint: %s", err.msg);
		slot_finish_status(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg, st);
		return;
	}
	const char *piece;
	size_t piece_len;
	if (alice_detok_stream_push(sl->detok, res.token, &piece, &piece_len, &err) != ALICE_OK ||
	    !alice_sb_addn(&sl->pending, piece, piece_len)) {
		snprintf(msg, sizeof(msg), "detokenize: %s", err.msg[0] ? err.msg : "out of memory");
		slot_finish(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg);
		return;
	}

	struct alice_engine_event ev = {0};
	ev.id = r->id;
	ev.type = ALICE_ENGINE_EVENT_TOKEN;
	ev.token.token = res.token;
	ev.token.logprob = res.logprob;
	ev.top = res.top;
	ev.n_top = r->sp.logprobs ? res.n_top : 0;

	ptrdiff_t stop_at = find_stop(sl, r, &r->stop_hit);
	if (stop_at >= 0) {
		ev.text = sl->pending.p;
		ev.text_len = (size_t)stop_at;
		r->on_event(&ev, r->user);
		slot_finish(e, sl, ALICE_ENGINE_FINISH_STOP, NULL, 0, NULL);
		return;
	}
	size_t keep = stop_prefix_tail(sl, r);
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
		slot_finish(e, sl, must_end ? ALICE_ENGINE_FINISH_STOP : ALICE_ENGINE_FINISH_LENGTH,
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
		slot_finish(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, "decode returned no embeddings");
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
	struct eng_req *req = slot_release(e, sl);
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
	req_free(req);
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
			slot_finish(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg);
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

static void *engine_main(void *arg)
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
				kv_stats_update(e);
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
		admit(e, &cancelled);
		bool stopping = e->stopping;
		pthread_mutex_unlock(&e->mu);
		if (e->on_round)
			e->on_round(e->round_user, true);

		while (cancelled) {
			struct eng_req *r = cancelled;
			cancelled = r->next;
			emit_done(r, ALICE_ENGINE_FINISH_CANCELLED, NULL, 0, 0, NULL, NULL, ALICE_OK);
			req_free(r);
		}
		for (uint32_t i = 0; i < e->n_slots; i++) {
			struct eng_slot *sl = &e->slots[i];
			if (!sl->r)
				continue;
			if (__atomic_load_n(&sl->r->cancel, __ATOMIC_RELAXED)) {
				if (!sl->started && sl->t_start == 0)
					sl->t_start = now_ms();
				slot_finish(e, sl, ALICE_ENGINE_FINISH_CANCELLED, NULL, 0, NULL);
				continue;
			}
			if (!sl->started) {
				struct alice_error err = {{0}};
				enum alice_status st = slot_start(e, sl, &err);
				if (st != ALICE_OK) {
					char msg[ALICE_ERROR_MSG_MAX + 32];
					snprintf(msg, sizeof(msg), "request setup: %s", err.msg);
					slot_finish_status(e, sl, ALICE_ENGINE_FINISH_ERROR, NULL, 0, msg, st);
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
		kv_stats_update(e);
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
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
		req_free(r);
		return alice_fail(err, ALICE_ERR_CANCELLED, "the engine is stopping");
	}
	uint32_t free_slots = 0;
	for (uint32_t i = 0; i < e->n_slots; i++)
		free_slots += e->slots[i].r == NULL;
	if (e->n_queued >= e->max_queue + free_slots) {
		pthread_mutex_unlock(&e->mu);
		req_free(r);
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
	req_free(r);
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
