/* alice-perplexity — perplexity of a model over a text file, computed the way
 * llama.cpp's llama-perplexity does so the numbers are comparable:
 * non-overlapping chunks of -c tokens; within each chunk only the second half
 * is scored (each position predicts the next token); BOS replaces the first
 * token of a chunk when the model adds BOS. Output ends with
 * "Final estimate: PPL = <value> +/- <error>". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/model.h"
#include "alice/tokenizer.h"
#include "tool_io.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-perplexity -m MODEL.gguf -f TEXT [-c N_CTX (256)] [-b N_BATCH] "
		   "[--backend NAME] [--backend-dir DIR] [-t THREADS] [--chunks N]\n");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	const char *text_path = NULL;
	int n_ctx = 256, n_batch = 0, max_chunks = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
		if (!v) { fprintf(stderr, "alice-perplexity: %s needs a value\n", a); return 2; }
		if (!strcmp(a, "-m")) mp.path = v;
		else if (!strcmp(a, "-f")) text_path = v;
		else if (!strcmp(a, "-c")) n_ctx = atoi(v);
		else if (!strcmp(a, "-b")) n_batch = atoi(v);
		else if (!strcmp(a, "-t")) mp.n_threads = atoi(v);
		else if (!strcmp(a, "--backend")) mp.backend = v;
		else if (!strcmp(a, "--backend-dir")) mp.backend_dir = v;
		else if (!strcmp(a, "--chunks")) max_chunks = atoi(v);
		else { fprintf(stderr, "alice-perplexity: unknown option %s\n", a); usage(stderr); return 2; }
		i++;
	}
	if (!mp.path || !text_path || n_ctx < 8) { usage(stderr); return 2; }

	size_t text_len = 0;
	char *text = tool_read_file(text_path, &text_len);
	if (!text) { fprintf(stderr, "alice-perplexity: %s: cannot read\n", text_path); return 1; }

	struct alice_error err = {{0}};
	struct alice_model *m = NULL;
	struct alice_context *c = NULL;
	int32_t *toks = NULL;
	size_t n_tok = 0;
	int rc = 1;
	if (alice_model_load(&mp, &m, &err) != ALICE_OK) {
		fprintf(stderr, "alice-perplexity: %s\n", err.msg);
		goto out;
	}
	const struct alice_tokenizer *tk = alice_model_tokenizer(m);
	bool add_bos = alice_tokenizer_add_bos(tk);
	double t0 = now_s();
	if (alice_tokenizer_encode(tk, text, text_len, true, false, &toks, &n_tok, &err) != ALICE_OK) {
		fprintf(stderr, "alice-perplexity: %s: %s\n", text_path, err.msg);
		goto out;
	}
	fprintf(stderr, "perplexity: tokenized %zu bytes into %zu tokens in %.2f ms\n", text_len, n_tok,
		(now_s() - t0) * 1e3);
	if (n_tok < 2 * (size_t)n_ctx) {
		fprintf(stderr, "alice-perplexity: %s: need at least %d tokens (2*n_ctx), have %zu\n", text_path,
			2 * n_ctx, n_tok);
		goto out;
	}
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = (uint32_t)n_ctx;
	cp.n_seq = 1;
	cp.n_batch = (uint32_t)(n_batch > 0 ? n_batch : n_ctx);
	if (alice_context_create(m, &cp, &c, &err) != ALICE_OK) {
		fprintf(stderr, "alice-perplexity: %s\n", err.msg);
		goto out;
	}
	int n_chunks = (int)(n_tok / (size_t)n_ctx);
	if (max_chunks > 0 && max_chunks < n_chunks)
		n_chunks = max_chunks;
	int32_t n_vocab = alice_model_n_vocab(m);
	int first = n_ctx / 2;
	int32_t *pos = malloc(sizeof(int32_t) * (size_t)n_ctx);
	int32_t *seq = calloc((size_t)n_ctx, sizeof(int32_t));
	int32_t *chunk = malloc(sizeof(int32_t) * (size_t)n_ctx);
	bool *want = malloc(sizeof(bool) * (size_t)n_ctx);
	if (!pos || !seq || !chunk || !want) {
		fprintf(stderr, "alice-perplexity: out of memory\n");
		goto out_free;
	}
	for (int i = 0; i < n_ctx; i++) {
		pos[i] = i;
		want[i] = i >= first && i < n_ctx - 1;
	}
	fprintf(stderr, "perplexity: %d chunks, n_ctx=%d, scoring %d tokens per chunk\n", n_chunks, n_ctx,
		n_ctx - 1 - first);
	double nll = 0, nll2 = 0;
	long count = 0;
	double t_start = now_s();
	for (int ch = 0; ch < n_chunks; ch++) {
		memcpy(chunk, toks + (size_t)ch * n_ctx, sizeof(int32_t) * (size_t)n_ctx);
		if (add_bos && alice_tokenizer_bos(tk) >= 0)
			chunk[0] = alice_tokenizer_bos(tk);
		alice_context_seq_clear(c, 0);
		struct alice_batch b = {n_ctx, chunk, pos, seq, want, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (alice_context_decode(c, &b, &err) != ALICE_OK) {
			fprintf(stderr, "alice-perplexity: chunk %d: %s\n", ch, err.msg);
			goto out_free;
		}
		for (int j = first; j < n_ctx - 1; j++) {
			const float *lg = alice_context_logits(c, j - first);
			double mx = lg[0];
			for (int32_t v = 1; v < n_vocab; v++)
				if (lg[v] > mx) mx = lg[v];
			double s = 0;
			for (int32_t v = 0; v < n_vocab; v++)
				s += exp(lg[v] - mx);
			double lp = lg[toks[(size_t)ch * n_ctx + j + 1]] - mx - log(s);
			nll -= lp;
			nll2 += lp * lp;
			count++;
		}
		printf("[%d]%.4f,", ch + 1, exp(nll / count));
		fflush(stdout);
	}
	double mean = nll / count, var = nll2 / count - mean * mean;
	double err_mean = count > 1 && var > 0 ? sqrt(var / (count - 1)) : 0;
	double ppl = exp(mean);
	printf("\n");
	fprintf(stderr, "perplexity: %.2f s for %d chunks (%.1f tokens/s)\n", now_s() - t_start, n_chunks,
		n_chunks * (double)n_ctx / (now_s() - t_start));
	printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * err_mean);
	rc = 0;
out_free:
	free(pos);
	free(seq);
	free(chunk);
	free(want);
out:
	free(toks);
	alice_context_free(c);
	alice_model_free(m);
	free(text);
	return rc;
}
