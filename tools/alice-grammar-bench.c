/* alice-grammar-bench — cost of one grammar-constrained decoding step: the
 * allowed-token mask for a JSON grammar over a real vocabulary, at several
 * positions in a JSON document (cold: a fresh state, nothing cached), and a
 * token-by-token decode of a JSON document (the per-step cost an engine sees).
 *
 * usage: alice-grammar-bench [vocab.gguf] [iterations]
 * default vocab: the llama-bpe fixture (128256 tokens). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/grammar.h"
#include "../core/grammar_internal.h" /* to evict the mask cache for the warm figure */
#include "../tests/core/grammar_fixture_vocab.h"

#ifndef ALICE_BENCH_VOCAB
#define ALICE_BENCH_VOCAB "../shared/fixtures/vocab/ggml-vocab-llama-bpe.gguf"
#endif

static const char *json_gbnf =
	"root   ::= object\n"
	"value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
	"object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
	"array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
	"number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,15})? ws\n"
	"ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: other load on the machine does not count */
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Mask cost at `prefix`, best of `iters`: cold = a fresh state (nothing
 * cached); warm = transitions cached, mask cache evicted (the walk itself);
 * hit = the state's mask cache (a state seen before, e.g. inside a string). */
static int bench_at(const struct alice_grammar *g, const struct alice_grammar_vocab *v,
		    const char *label, const char *prefix, int iters)
{
	struct alice_error err;
	size_t n = alice_grammar_vocab_size(v);
	uint8_t *mask = malloc(n);
	double best = 1e30, warm = 1e30, hit = 1e30;
	size_t allowed = 0;
	uint64_t work = 0;
	for (int it = 0; it < iters && mask; it++) {
		struct alice_grammar_state *st;
		if (alice_grammar_state_create(g, &st, &err) != ALICE_OK ||
		    alice_grammar_state_accept_bytes(st, prefix, strlen(prefix), &err) != ALICE_OK) {
			fprintf(stderr, "%s: %s\n", label, err.msg);
			free(mask);
			return -1;
		}
		double t0 = now_ms();
		alice_grammar_state_mask(st, v, mask, &err);
		double t = now_ms() - t0;
		if (t < best)
			best = t;
		work = st->op_work;
		for (int k = 0; k < GMASK_CACHE; k++)
			st->mcache[k].vocab = NULL;
		t0 = now_ms();
		alice_grammar_state_mask(st, v, mask, &err);
		t = now_ms() - t0;
		if (t < warm)
			warm = t;
		t0 = now_ms();
		alice_grammar_state_mask(st, v, mask, &err);
		t = now_ms() - t0;
		if (t < hit)
			hit = t;
		alice_grammar_state_free(st);
	}
	for (size_t i = 0; i < n && mask; i++)
		allowed += mask[i];
	printf("  %-24s cold %7.3f ms  warm %7.3f ms  hit %6.3f ms  (%zu tokens allowed; cold work %llu)\n",
	       label, best, warm, hit, allowed, (unsigned long long)work);
	free(mask);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Decode `doc` token by token as an engine would: mask, then take the longest
 * allowed token that continues the document. Prints the per-step costs. */
static int bench_decode(const struct alice_grammar *g, const struct alice_grammar_vocab *v,
			const struct gfx_vocab *fx, const char *doc)
{
	struct alice_error err;
	struct alice_grammar_state *st;
	size_t n = alice_grammar_vocab_size(v), pos = 0, len = strlen(doc);
	uint8_t *mask = malloc(n);
	if (!mask || alice_grammar_state_create(g, &st, &err) != ALICE_OK)
		return -1;
	double total = 0, worst = 0, str_total = 0, times[4096];
	uint64_t worst_work = 0;
	int steps = 0, str_steps = 0, in_str = 0;
	while (pos < len) {
		double t0 = now_ms();
		if (alice_grammar_state_mask(st, v, mask, &err) != ALICE_OK) {
			fprintf(stderr, "mask: %s\n", err.msg);
			break;
		}
		double t = now_ms() - t0;
		total += t;
		if (st->op_work > worst_work)
			worst_work = st->op_work;
		if (steps < 4096)
			times[steps] = t;
		steps++;
		if (t > worst)
			worst = t;
		if (in_str) {
			str_total += t;
			str_steps++;
		}
		size_t best = 0, best_len = 0;
		for (size_t i = 0; i < n; i++)
			if (mask[i] && fx->len[i] > best_len && fx->len[i] <= len - pos &&
			    memcmp(fx->piece[i], doc + pos, fx->len[i]) == 0)
				best = i, best_len = fx->len[i];
		if (!best_len) {
			fprintf(stderr, "no allowed token continues the document at %zu\n", pos);
			break;
		}
		for (size_t k = 0; k < best_len; k++)
			if (doc[pos + k] == '"' && (pos + k == 0 || doc[pos + k - 1] != '\\'))
				in_str = !in_str;
		if (alice_grammar_state_accept_bytes(st, fx->piece[best], best_len, &err) != ALICE_OK) {
			fprintf(stderr, "accept: %s\n", err.msg);
			break;
		}
		pos += best_len;
	}
	alice_grammar_state_mask(st, v, mask, &err);
	int ns = steps < 4096 ? steps : 4096;
	qsort(times, (size_t)ns, sizeof *times, cmp_double);
	printf("  decode %d steps: mean %.3f ms/step, median %.3f, p90 %.3f, worst %.3f ms; steps inside a "
	       "string: mean %.3f ms (%d); can_end at the end: %d; most matcher work in a step %llu\n",
	       steps, total / (steps ? steps : 1), ns ? times[ns / 2] : 0, ns ? times[ns * 9 / 10] : 0,
	       worst, str_total / (str_steps ? str_steps : 1), str_steps,
	       (int)alice_grammar_state_can_end(st), (unsigned long long)worst_work);
	alice_grammar_state_free(st);
	free(mask);
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : ALICE_BENCH_VOCAB;
	int iters = argc > 2 ? atoi(argv[2]) : 5;
	struct gfx_vocab fx;
	if (gfx_vocab_load(path, &fx) < 0)
		return 1;
	struct alice_error err;
	struct alice_grammar *g;
	struct alice_grammar_vocab *v;
	double t0 = now_ms();
	if (alice_grammar_vocab_build(fx.piece, fx.len, fx.kind, fx.n, &v, &err) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	printf("vocab %s: %zu tokens, %zu trie nodes, built in %.1f ms\n", path, fx.n,
	       alice_grammar_vocab_trie_nodes(v), now_ms() - t0);
	if (alice_grammar_parse(json_gbnf, strlen(json_gbnf), &g, &err, NULL) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	bench_at(g, v, "start", "", iters);
	bench_at(g, v, "after '{'", "{", iters);
	bench_at(g, v, "inside a key string", "{\"na", iters);
	bench_at(g, v, "after a key", "{\"name\":", iters);
	bench_at(g, v, "inside a value string", "{\"name\": \"Al", iters);
	bench_at(g, v, "inside a number", "{\"n\": 12", iters);
	bench_at(g, v, "nested array", "{\"a\": [1, [true, {\"b\": [", iters);
	bench_decode(g, v, &fx,
		     "{\"name\": \"Alice Liddell\", \"age\": 7, \"tags\": [\"curious\", \"polite\"],\n"
		     "  \"address\": {\"street\": \"Wonderland Lane 12\", \"zip\": \"OX1 1AA\"},\n"
		     "  \"ratio\": -0.125e3, \"ok\": true, \"none\": null, \"note\": \"a \\\"quoted\\\" word \\u00e9\"}");
	alice_grammar_free(g);
	alice_grammar_vocab_free(v);
	gfx_vocab_free(&fx);
	return 0;
}
