/* bench_batch.c — alice-bench --batch: the engine's own throughput under
 * concurrency, like llama.cpp's batched bench. For each B: B sequences
 * prefill P tokens each (one batch, split by the context's n_batch), then
 * N decode steps of B rows (one token per sequence, logits for every row,
 * as the server's engine asks). Like the engine, the backend picks each
 * row's best entries (TOPK) and only those come back (a greedy or top-k
 * request needs no more), or with --temp draws each row (SAMPLE_TEMP, a
 * plain temperature request); a greedy row reads its best entry alone
 * (the argmax, as the engine asks; ALICE_BATCH_TOPK=1: the best 128, as a
 * top-k request needs); ALICE_TOPK=0, or a backend without the ops,
 * reads every row whole. A second timing reads every row whole anyway
 * (what a logprobs or grammar request costs). Prints prefill t/s, total
 * decode t/s and per-sequence decode t/s. */
#include "bench_batch.h"
#include "alice/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(struct batch_result *r, const char *what, const struct alice_error *err)
{
	snprintf(r->error, sizeof r->error, "B=%d %s: %s", r->B, what, err->msg);
	return -1;
}

/* B random prompts of P tokens, sequence-major (seq q's tokens are
 * consecutive), logits for each one's last token; returns the RNG state. */
static unsigned make_prompts(int B, int P, int32_t n_vocab, int32_t *tok, int32_t *pos, int32_t *seq, bool *lg)
{
	unsigned s = 1234u + (unsigned)B;
	for (int q = 0; q < B; q++)
		for (int i = 0; i < P; i++) {
			size_t k = (size_t)q * P + i;
			s = s * 1103515245u + 12345u;
			tok[k] = (int32_t)((s >> 8) % (unsigned)n_vocab);
			pos[k] = i;
			seq[k] = q;
			lg[k] = i == P - 1;
		}
	return s;
}

/* Decode steps are timed to the end of alice_context_decode, which returns
 * after the rows' best entries (or whole logits rows) are on the host (the
 * engine samples from there). */
int bench_batch_run(struct alice_model *m, int B, int P, int N, float temp, struct batch_result *r)
{
	struct alice_error err = {{0}};
	struct alice_context *c = NULL;
	int rc = -1;
	memset(r, 0, sizeof *r);
	r->B = B;
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = (uint32_t)(P + N + N / 4 + 8);
	cp.n_seq = (uint32_t)B;
	cp.n_batch = (uint32_t)(B > 512 ? B : 512);
	cp.topk = ALICE_TOPK_MAX;
	size_t nt = (size_t)B * (size_t)(P > 1 ? P : 1);
	int32_t *tok = malloc(nt * sizeof *tok), *pos = malloc(nt * sizeof *pos), *seq = malloc(nt * sizeof *seq);
	bool *lg = malloc(nt * sizeof *lg), *top = malloc(nt * sizeof *top);
	int32_t *top_n = malloc(nt * sizeof *top_n);
	const char *ft = getenv("ALICE_BATCH_TOPK");
	const bool full_top = ft && ft[0] == '1';
	struct alice_draw *dr = temp > 0 ? calloc((size_t)B, sizeof *dr) : NULL;
	if (!tok || !pos || !seq || !lg || !top || !top_n || (temp > 0 && !dr)) {
		snprintf(r->error, sizeof r->error, "B=%d: out of memory", B);
		goto out;
	}
	if (alice_context_create(m, &cp, &c, &err) != ALICE_OK) {
		fail(r, "context", &err);
		goto out;
	}
	int32_t n_vocab = alice_model_n_vocab(m);
	unsigned s = 0;
	for (size_t k = 0; k < nt; k++) {
		top[k] = true;
		top_n[k] = full_top ? 0 : 1; /* greedy: the argmax; drawn rows need none */
	}
	/* warm-up of the timed shapes: the prefill and one decode step as timed
	 * below (a GPU backend builds their pipelines on first use, seconds on
	 * some drivers, and the idle GPU lowers its clocks meanwhile), then
	 * clear */
	if (P > 0) {
		make_prompts(B, P, n_vocab, tok, pos, seq, lg);
		struct alice_batch b = {(int32_t)nt, tok, pos, seq, lg, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			fail(r, "warm-up prefill", &err);
			goto out;
		}
		for (int q = 0; q < B; q++) {
			tok[q] = q % n_vocab;
			pos[q] = P;
			seq[q] = q;
			lg[q] = true;
			if (dr)
				dr[q] = (struct alice_draw){temp, 0.5};
		}
		struct alice_batch d = {B, tok, pos, seq, lg, NULL, top, dr, NULL, NULL, top_n, NULL, NULL, NULL};
		if (alice_context_decode(c, &d, &err) != ALICE_OK) {
			fail(r, "warm-up decode", &err);
			goto out;
		}
		for (int q = 0; q < B; q++)
			alice_context_seq_clear(c, q);
	}
	/* one decode step of B rows (loads kernels, sizes buffers), then clear */
	for (int q = 0; q < B; q++) {
		tok[q] = q % n_vocab;
		pos[q] = 0;
		seq[q] = q;
		lg[q] = true;
	}
	struct alice_batch w = {B, tok, pos, seq, lg, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	if (alice_context_decode(c, &w, &err) != ALICE_OK) {
		fail(r, "warm-up", &err);
		goto out;
	}
	/* GPUs lower their clocks when idle: keep stepping for a second
	 * before timing (B-row steps of the warm-up token, wrapping around the
	 * context) */
	double tw = now_s();
	for (int i = 1; now_s() - tw < 1.0; i++) {
		if (i == (int)cp.n_ctx) {
			for (int q = 0; q < B; q++)
				alice_context_seq_clear(c, q);
			i = 0;
		}
		for (int q = 0; q < B; q++)
			pos[q] = i;
		if (alice_context_decode(c, &w, &err) != ALICE_OK) {
			fail(r, "warm-up", &err);
			goto out;
		}
	}
	for (int q = 0; q < B; q++)
		alice_context_seq_clear(c, q);
	if (P > 0) {
		s = make_prompts(B, P, n_vocab, tok, pos, seq, lg);
		struct alice_batch b = {(int32_t)nt, tok, pos, seq, lg, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		double t0 = now_s();
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			fail(r, "prefill", &err);
			goto out;
		}
		r->pp_s = now_s() - t0;
		r->pp_tps = (double)nt / r->pp_s;
	}
	double t0 = now_s();
	for (int i = 0; i < N; i++) {
		for (int q = 0; q < B; q++) {
			s = s * 1103515245u + 12345u;
			tok[q] = (int32_t)((s >> 8) % (unsigned)n_vocab);
			pos[q] = P + i;
			seq[q] = q;
			lg[q] = true;
			if (dr) { /* a fresh uniform per row and step, as the sampler's RNG gives */
				s = s * 1103515245u + 12345u;
				dr[q] = (struct alice_draw){temp, (double)(s >> 8) / 16777216.0};
			}
		}
		struct alice_batch b = {B, tok, pos, seq, lg, NULL, top, dr, NULL, NULL, top_n, NULL, NULL, NULL};
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			fail(r, "decode", &err);
			goto out;
		}
	}
	r->tg_s = now_s() - t0;
	if (N > 0) {
		r->tg_tps = (double)B * N / r->tg_s;
		r->tg_seq_tps = (double)N / r->tg_s;
		r->step_ms = r->tg_s * 1e3 / N;
	}
	/* the same steps reading every logits row whole */
	int n1 = N / 4;
	t0 = now_s();
	for (int i = 0; i < n1; i++) {
		for (int q = 0; q < B; q++) {
			tok[q] = (tok[q] + 1) % n_vocab;
			pos[q] = P + N + i;
		}
		struct alice_batch b = {B, tok, pos, seq, lg, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			fail(r, "decode (rows read whole)", &err);
			goto out;
		}
	}
	if (n1 > 0)
		r->step_whole_ms = (now_s() - t0) * 1e3 / n1;
	/* pipelined, as the engine runs a steady decode: step i + 1 launched
	 * (its tokens the picks of step i, on the device) before step i is
	 * finished; over the same positions as the first timing (attention's
	 * cost grows with them) */
	if (alice_context_can_feed(c) && alice_context_async(c) && N > 1) {
		int32_t *feed = malloc((size_t)B * sizeof *feed);
		if (!feed) {
			snprintf(r->error, sizeof r->error, "B=%d: out of memory", B);
			goto out;
		}
		for (int q = 0; q < B; q++)
			feed[q] = q;
		int p0 = P;
		for (int q = 0; q < B; q++)
			alice_context_seq_truncate(c, q, P);
		t0 = now_s();
		for (int i = 0; i < N; i++) {
			for (int q = 0; q < B; q++) {
				pos[q] = p0 + i;
				if (dr) {
					s = s * 1103515245u + 12345u;
					dr[q] = (struct alice_draw){temp, (double)(s >> 8) / 16777216.0};
				}
			}
			struct alice_batch b = {B, tok, pos, seq, lg, NULL, top, dr, NULL, NULL, top_n, i ? feed : NULL, NULL, NULL};
			if (alice_context_launch(c, &b, &err) != ALICE_OK ||
			    (i > 0 && alice_context_finish(c, &err) != ALICE_OK)) {
				free(feed);
				fail(r, "decode (pipelined)", &err);
				goto out;
			}
		}
		free(feed);
		if (alice_context_finish(c, &err) != ALICE_OK) {
			fail(r, "decode (pipelined)", &err);
			goto out;
		}
		r->step_pipe_ms = (now_s() - t0) * 1e3 / N;
	}
	rc = 0;
	r->ok = 1;
out:
	alice_context_free(c);
	free(tok);
	free(pos);
	free(seq);
	free(lg);
	free(top);
	free(top_n);
	free(dr);
	return rc;
}
