/* engine_internal.h — what engine.c (queue, admission, slots, public API)
 * and engine_step.c (building, launching and taking decode steps) share:
 * the engine's structures and the slot helpers both call. Private to core/. */
#ifndef ALICE_ENGINE_INTERNAL_H
#define ALICE_ENGINE_INTERNAL_H

#include "alice/engine.h"

#include <pthread.h>
#include <stddef.h>
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

static inline void lat_add(struct lat_ring *r, double ms)
{
	r->v[r->n % ALICE_ENGINE_LAT_WINDOW] = (float)ms;
	r->n++;
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

static inline double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* engine.c */
void eng_req_free(struct eng_req *r);
void eng_emit_done(struct eng_req *r, enum alice_engine_finish f, const char *text, size_t len,
		      int32_t n_completion, const struct eng_slot *sl, const char *error,
		      enum alice_status error_status);
void eng_kv_stats_update(struct alice_engine *e);
struct eng_req *eng_slot_release(struct alice_engine *e, struct eng_slot *sl);
void eng_slot_finish_status(struct alice_engine *e, struct eng_slot *sl, enum alice_engine_finish f,
			       const char *text, size_t len, const char *error, enum alice_status est);
void eng_slot_finish(struct alice_engine *e, struct eng_slot *sl, enum alice_engine_finish f,
			const char *text, size_t len, const char *error);
ptrdiff_t eng_find_stop(const struct eng_slot *sl, const struct eng_req *r, int32_t *which);
size_t eng_stop_prefix_tail(const struct eng_slot *sl, const struct eng_req *r);
enum alice_status eng_slot_start(struct alice_engine *e, struct eng_slot *sl, struct alice_error *err);
void eng_admit(struct alice_engine *e, struct eng_req **cancelled);
/* engine_step.c: the engine thread */
void *eng_main(void *arg);

#endif
