/* engine.h — the request queue and the continuous-batching loop.
 *
 * One engine owns one context with n_slots sequences and one thread. Each
 * step it builds ONE batch from every active request (prefill chunks and the
 * last sampled token of each decoding request), calls alice_context_decode
 * once, samples every request that got logits, detokenizes incrementally
 * (never splitting a UTF-8 character), matches stop strings across token
 * boundaries, and reports through the request's callback.
 *
 * Callbacks run on the engine thread; they must copy what they keep (every
 * pointer in an event is borrowed for the duration of the call) and must not
 * call back into the engine except alice_engine_cancel. Every accepted request
 * gets exactly one terminal event (ALICE_ENGINE_EVENT_DONE), also when it is
 * cancelled or fails; after it, the request's callback is never called again.
 *
 * KV memory: the slots share one paged KV cache (model.h, ALICE_KV_BLOCK
 * cells per block) of n_kv_cells cells. A request is admitted only when the
 * pool can promise it every block it may need (prompt + max_tokens, capped
 * by n_ctx): the blocks are reserved then and taken as its positions grow,
 * so a running request never runs out of KV memory; one that cannot get
 * them waits in the queue (FIFO) until running requests end. Blocks that
 * only idle slots' caches hold are evicted for it, least recently used
 * slot first.
 *
 * Prefix cache: a finished request's KV stays in its slot (evictable). A new
 * request looks for the slot, idle or running, whose tokens share the
 * longest prefix with its prompt. If that slot is idle and the prefix covers
 * half the prompt, the request takes that slot and its sequence is
 * truncated to the common prefix; otherwise it takes the least recently
 * used idle slot and maps the whole blocks of that prefix into its table
 * (shared, not copied). Only the rest is prefilled, at least the prompt's
 * last token (recurrent models: no sharing across slots, and reuse only
 * when the whole cached sequence is a prefix of the prompt). Reused entries
 * are the KV of the very same tokens at the same positions, so nothing of
 * another request's content leaks; anything past the common prefix is
 * dropped. */
#ifndef ALICE_ENGINE_H
#define ALICE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/model.h"
#include "alice/sampling.h"
#include "alice/spec.h"
#include "alice/status.h"

struct alice_engine;

struct alice_engine_params {
	uint32_t n_slots;   /* parallel sequences; 0 = 4 */
	uint32_t n_ctx;     /* positions per slot; 0 = min(n_ctx_train, 4096) */
	uint32_t n_batch;   /* prompt tokens per step (plus one decode token per slot); 0 = 512 */
	uint32_t max_queue; /* requests waiting for a slot; 0 = 64 */
	bool no_prefix_cache; /* clear each slot before reuse (no KV reuse) */
	/* cells of the paged KV cache shared by all slots (context params
	 * n_kv_cells); 0 = n_slots * n_ctx. At least n_ctx. */
	uint32_t n_kv_cells;
	uint32_t n_sample_threads; /* threads sampling a step's rows; 0 = all CPUs but one, at most 32 */
	/* An embeddings engine: every request is an input to embed, not a
	 * prompt to continue. Its prompt is decoded whole in one step (so it
	 * must fit n_batch), its hidden states are pooled (embed.h) and
	 * L2-normalised, and its DONE event carries the vector(s); nothing is
	 * sampled and no KV is kept for later requests. */
	bool embeddings;
	/* enum alice_pooling; ALICE_POOLING_UNSPECIFIED = the GGUF's
	 * <arch>.pooling_type, NONE when it has none. */
	int pooling;
	/* speculative decoding (spec.h); mode NONE = off. Ignored, with a
	 * logged reason, for recurrent models. */
	struct alice_spec_params spec;
	/* NULL, or called on the engine thread around each round of events
	 * (begin true before a round's first event, false after its last; a
	 * round is one pass of the engine loop: a step's tokens for every
	 * stream, its DONEs, cancellations): a caller that queues events to
	 * another thread can wake it once per round. Never called while the
	 * engine waits for work. */
	void (*on_round)(void *user, bool begin);
	void *round_user;
};

void alice_engine_params_default(struct alice_engine_params *p);

enum alice_engine_finish {
	ALICE_ENGINE_FINISH_NONE = 0,
	ALICE_ENGINE_FINISH_STOP,      /* end-of-generation token, stop string or grammar end */
	ALICE_ENGINE_FINISH_LENGTH,    /* max_tokens or the slot's context is full */
	ALICE_ENGINE_FINISH_CANCELLED, /* alice_engine_cancel or engine shutdown */
	ALICE_ENGINE_FINISH_ERROR,     /* backend or grammar failure; see event.error */
};

const char *alice_engine_finish_name(enum alice_engine_finish f); /* "stop", "length", ... */

enum alice_engine_event_type {
	ALICE_ENGINE_EVENT_TOKEN = 0, /* one sampled token (not an end-of-generation one, unless ignore_eos) */
	ALICE_ENGINE_EVENT_DONE,      /* terminal */
};

struct alice_engine_event {
	uint64_t id;
	enum alice_engine_event_type type;
	/* Text that became final with this event: complete UTF-8 characters,
	 * never a part of a stop string. May be empty. DONE carries the rest. */
	const char *text;
	size_t text_len;
	/* TOKEN: the sampled token and its log-probability as the sampler
	 * reports it (sampling.h; 0 unless sampling.logprobs). */
	struct alice_token_logprob token;
	/* TOKEN when sampling.logprobs and sampling.n_probs > 0: the most
	 * likely tokens at this position, best first. */
	const struct alice_token_logprob *top;
	int32_t n_top;
	/* DONE: */
	enum alice_engine_finish finish;
	int32_t n_prompt;      /* prompt tokens */
	int32_t n_completion;  /* sampled tokens (end-of-generation token included) */
	double queue_ms;       /* waiting for a slot */
	double prefill_ms;     /* slot start to first sampled token */
	double decode_ms;      /* first to last sampled token */
	const char *error;     /* FINISH_ERROR: what failed */
	/* FINISH_ERROR: ALICE_ERR_INVALID / ALICE_ERR_RANGE when the request
	 * itself cannot be served (nothing may be sampled under its logit bias
	 * and grammar, bad sampling parameters, a grammar too ambiguous);
	 * ALICE_ERR_BACKEND or another status for a failure of the server. */
	enum alice_status error_status;
	/* DONE: prompt tokens whose KV was reused from the slot's cache
	 * (not prefilled again); <= n_prompt - 1. */
	int32_t n_cached;
	/* DONE with FINISH_STOP: the index in the request's `stop` list of the
	 * stop string that ended it; -1 for an end-of-generation token or a
	 * grammar's end (and for every other finish). */
	int32_t stop_index;
	/* DONE of an embeddings request that succeeded (finish STOP):
	 * n_vectors unit vectors of n_embd floats each, one after the other
	 * (1 when pooled; one per input token with ALICE_POOLING_NONE). */
	const float *embd;
	int32_t n_vectors;
	int32_t n_embd;
	/* DONE: tokens drafted for this request and how many of them the
	 * target accepted (speculative decoding, spec.h) */
	int32_t n_drafted, n_accepted;
};

typedef void (*alice_engine_event_fn)(const struct alice_engine_event *ev, void *user);

struct alice_grammar_constraint; /* grammar.h */

struct alice_engine_request {
	const int32_t *prompt; /* copied */
	int32_t n_prompt;      /* >= 1 */
	int32_t max_tokens;    /* < 0: until end-of-generation or the context is full */
	struct alice_sampling_params sampling; /* copied (logit bias array too) */
	const char *const *stop; /* stop strings, copied; not included in the output */
	size_t n_stop;

	/* NULL, or this request's own grammar constraint (grammar.h), used on
	 * the engine thread to mask every step and advanced by every sampled
	 * token; the engine frees it once the submit succeeds. */
	struct alice_grammar_constraint *grammar;
	/* End-of-generation tokens are sampled and emitted as ordinary tokens
	 * (llama-server's ignore_eos, for benchmarks): the request ends only at
	 * max_tokens, a stop string or a full context. Under a grammar an EOG
	 * token still ends it (it is the grammar's end). */
	bool ignore_eos;
	/* Control tokens (not end-of-generation ones) go into the text as their
	 * texts, e.g. the tool-call markers Mistral's [TOOL_CALLS] and Llama 3's
	 * <|python_tag|>, which a tool-call parse must see. */
	bool render_special;
	/* speculative decoding of this request (when the engine has it on):
	 * no_spec turns it off; spec_n_max / spec_n_min / spec_p_min override
	 * the engine's draft-max / draft-min / draft-p-min (0 = the engine's;
	 * n_max is capped at the engine's). */
	bool no_spec;
	int32_t spec_n_max, spec_n_min;
	float spec_p_min;

	alice_engine_event_fn on_event;
	void *user;
};

/* Start the engine thread. The model is borrowed and must outlive the engine. */
enum alice_status alice_engine_create(struct alice_model *model, const struct alice_engine_params *p,
				      struct alice_engine **out, struct alice_error *err);
/* Cancel everything (each request gets its DONE event), stop and join the
 * thread, free the context. NULL is a no-op. */
void alice_engine_free(struct alice_engine *e);

/* Queue a request. Errors: ALICE_ERR_RANGE when the queue is full,
 * ALICE_ERR_INVALID for a bad request (empty prompt, prompt not fitting the
 * slot's context or, for an embeddings engine, one batch; token id out of range), ALICE_ERR_CANCELLED when the engine
 * is stopping. On error no event is ever sent and r->grammar is NOT taken
 * (the caller still owns it). *id identifies the request. */
enum alice_status alice_engine_submit(struct alice_engine *e, const struct alice_engine_request *r,
				      uint64_t *id, struct alice_error *err);
/* Ask a request to stop; it ends within one step with FINISH_CANCELLED (or
 * its natural finish if that came first). Unknown/finished ids are ignored.
 * Thread-safe. */
void alice_engine_cancel(struct alice_engine *e, uint64_t id);

struct alice_engine_stats {
	uint32_t n_slots;
	uint32_t slots_busy;
	uint32_t queued;
	uint64_t requests_done;
	uint64_t tokens_generated;
	uint64_t steps;
	uint64_t prompt_tokens;        /* prompt tokens of started requests */
	uint64_t prompt_tokens_cached; /* of which reused from the prefix cache */
	uint64_t kv_cells_used;        /* positions held in the KV cache, cached idle slots included */
	uint64_t kv_cells_total;       /* cells of the KV pool (default n_slots * n_ctx) */
	/* the paged KV cache, in blocks of kv_block_cells cells (model.h) */
	uint32_t kv_block_cells;
	uint32_t kv_blocks_total;
	uint32_t kv_blocks_used;      /* held by at least one slot */
	uint32_t kv_blocks_shared;    /* held by more than one slot (shared prefixes) */
	uint32_t kv_blocks_cached;    /* held only by idle slots (prefix cache, evictable) */
	uint32_t kv_blocks_available; /* free and not reserved by running requests */
	uint64_t requests_kv_waited;  /* requests that waited in the queue for KV blocks */
	/* Latency over the last ALICE_ENGINE_LAT_WINDOW samples (ms; 0 before
	 * any): time to first token from submission (queue + prefill), and
	 * the gap between consecutive tokens of a request. */
	double ttft_p50_ms, ttft_p95_ms;
	double itl_p50_ms, itl_p95_ms;
	uint64_t ttft_samples, itl_samples; /* ever recorded */
	/* speculative decoding: tokens drafted and accepted by the target */
	uint64_t draft_tokens, draft_accepted;
	/* tokens chosen on the device (from a row's best entries or a draw)
	 * and from whole logits rows read to the host */
	uint64_t picks_device, picks_host;
	/* steps launched before the previous step's tokens reached the host
	 * (their tokens fed on the device: the pipelined engine) */
	uint64_t steps_fed;
};
#define ALICE_ENGINE_LAT_WINDOW 4096
void alice_engine_stats(struct alice_engine *e, struct alice_engine_stats *out);
uint32_t alice_engine_n_ctx(const struct alice_engine *e);
/* An embeddings engine's pooling (enum alice_pooling, never UNSPECIFIED);
 * -1 for a generation engine. */
int alice_engine_pooling(const struct alice_engine *e);
/* Tokens one embeddings input may have (min of n_batch and n_ctx). */
uint32_t alice_engine_max_embd_tokens(const struct alice_engine *e);

#endif
