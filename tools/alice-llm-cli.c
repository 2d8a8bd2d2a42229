/* alice-llm-cli — run a GGUF model on a prompt from the command line:
 * prefill in one batch, then generate token by token, streaming the text and
 * reporting prefill/decode tokens per second (or one JSON object). A GBNF
 * grammar or a JSON schema constrains the output through the core's grammar
 * constraint, exactly as the server's engine uses it. */
#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/backend_loader.h"
#include "alice/grammar.h"
#include "alice/json_schema.h"
#include "alice/log.h"
#include "alice/model.h"
#include "alice/sampling.h"
#include "alice/sbuf.h"
#include "alice/tokenizer.h"
#include "tool_io.h"

struct opts {
	const char *model, *prompt, *prompt_file, *backend, *backend_dir, *grammar_file, *json_schema;
	int n_predict, n_threads, ctx_size;
	float temp;
	uint64_t seed;
	bool ignore_eos, json, list_backends, no_bos;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: alice-llm-cli -m MODEL.gguf [-p PROMPT | -f FILE] [options]\n"
		"  -m, --model FILE       GGUF model\n"
		"  -p, --prompt TEXT      prompt text\n"
		"  -f, --file FILE        read the prompt from FILE\n"
		"  -n, --n-predict N      tokens to generate (default 64); stops earlier at an\n"
		"                         end-of-generation token unless --ignore-eos\n"
		"  --backend NAME         cpu | cuda | vulkan | auto (default) | a drop-in name\n"
		"  --backend-dir DIR      search DIR first for libalice-backend-<name>.so\n"
		"  -t, --threads N        CPU threads (default: physical cores)\n"
		"  --temp T               temperature; 0 = greedy argmax, ties to the lowest id (default 0)\n"
		"  --seed N               sampling seed (default 0; used when --temp > 0)\n"
		"  --ignore-eos           do not stop at end-of-generation tokens (a grammar's end still stops)\n"
		"  --grammar FILE         constrain the output to the GBNF grammar in FILE\n"
		"  --json-schema S        constrain the output to JSON of the schema S: a file, or the\n"
		"                         schema's JSON text itself (starting with '{')\n"
		"  -c, --ctx-size N       context length (default min(train context, 4096))\n"
		"  --no-bos               do not add BOS even if the model's metadata asks for it\n"
		"  --json                 print one JSON object: prompt_tokens, tokens, text,\n"
		"                         prefill_tokens_per_second, decode_tokens_per_second\n"
		"  --list-backends        list the backends found, their paths and probe results\n"
		"  -h, --help             this help\n");
}

static bool parse_int(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < -1 || v > 1 << 30)
		return false;
	*out = (int)v;
	return true;
}

/* 0 ok, 1 error (message printed), 2 help printed */
static int parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->n_predict = 64;
	o->backend = "auto";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG()                                                              \
	do {                                                                    \
		if (!v) {                                                       \
			fprintf(stderr, "alice-llm-cli: %s needs a value\n", a); \
			return 1;                                               \
		}                                                               \
		i++;                                                            \
	} while (0)
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 2;
		} else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			NEED_ARG();
			o->model = v;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			NEED_ARG();
			o->prompt = v;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
			NEED_ARG();
			o->prompt_file = v;
		} else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
			NEED_ARG();
			if (!parse_int(v, &o->n_predict) || o->n_predict < 0) {
				fprintf(stderr, "alice-llm-cli: -n: bad count '%s'\n", v);
				return 1;
			}
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			NEED_ARG();
			if (!parse_int(v, &o->n_threads) || o->n_threads < 0) {
				fprintf(stderr, "alice-llm-cli: -t: bad thread count '%s'\n", v);
				return 1;
			}
		} else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
			NEED_ARG();
			if (!parse_int(v, &o->ctx_size) || o->ctx_size < 0) {
				fprintf(stderr, "alice-llm-cli: --ctx-size: bad size '%s'\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--backend")) {
			NEED_ARG();
			o->backend = v;
		} else if (!strcmp(a, "--backend-dir")) {
			NEED_ARG();
			o->backend_dir = v;
		} else if (!strcmp(a, "--temp")) {
			NEED_ARG();
			char *end;
			o->temp = strtof(v, &end);
			if (*end || end == v || !(o->temp >= 0.0f)) {
				fprintf(stderr, "alice-llm-cli: --temp: bad temperature '%s'\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--seed")) {
			NEED_ARG();
			char *end;
			errno = 0;
			o->seed = strtoull(v, &end, 10);
			if (errno || *end || end == v) {
				fprintf(stderr, "alice-llm-cli: --seed: bad seed '%s'\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--grammar")) {
			NEED_ARG();
			o->grammar_file = v;
		} else if (!strcmp(a, "--json-schema")) {
			NEED_ARG();
			o->json_schema = v;
		} else if (!strcmp(a, "--ignore-eos")) {
			o->ignore_eos = true;
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--list-backends")) {
			o->list_backends = true;
		} else if (!strcmp(a, "--no-bos")) {
			o->no_bos = true;
		} else {
			fprintf(stderr, "alice-llm-cli: unknown option '%s' (see --help)\n", a);
			return 1;
		}
#undef NEED_ARG
	}
	if (o->grammar_file && o->json_schema) {
		fprintf(stderr, "alice-llm-cli: --grammar and --json-schema cannot be combined\n");
		return 1;
	}
	return 0;
}

static int list_backends(const char *dir)
{
	struct alice_backend_listing *list = NULL;
	size_t n = 0;
	struct alice_error err = {0};
	if (alice_backend_list(dir, &list, &n, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: listing backends: %s\n", err.msg);
		return 1;
	}
	char path[8192];
	alice_backend_search_path(dir, path, sizeof(path));
	printf("search path: %s\n", path);
	if (n == 0)
		printf("no backends found\n");
	for (size_t i = 0; i < n; i++) {
		const struct alice_backend_listing *l = &list[i];
		printf("%-10s %s\n", l->name, l->path);
		if (!l->loadable)
			printf("           not loadable: %s\n", l->reason);
		else if (l->n_devices > 0)
			printf("           ABI %s, probe: %d device(s): %s%s\n", l->abi, l->n_devices, l->device,
			       l->shadowed ? " (shadowed by an earlier directory)" : "");
		else
			printf("           ABI %s, probe: cannot run here: %s\n", l->abi, l->reason);
	}
	alice_backend_list_free(list);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Everything one run holds; freed by run_free. */
struct run {
	struct opts o;
	char *prompt_buf;
	const char *prompt;
	struct alice_model *m;
	const struct alice_tokenizer *tok;
	int32_t n_vocab;
	struct alice_context *c;
	uint32_t n_ctx;
	struct alice_sampler *smp;       /* --temp 0: greedy argmax, ties to the lowest id */
	struct alice_grammar_vocab *gv;  /* with a grammar */
	struct alice_grammar_constraint *gc;
	uint8_t *mask;
	struct alice_detok_stream *ds;
	int32_t *ptoks, *gen;
	size_t n_ptoks;
	int n_gen, n_decoded;
	struct alice_sbuf text;
	double t_prefill, t_decode;
};

static void run_free(struct run *r)
{
	alice_detok_stream_free(r->ds);
	alice_sampler_free(r->smp);
	alice_grammar_constraint_free(r->gc);
	alice_grammar_vocab_free(r->gv);
	alice_context_free(r->c);
	alice_model_free(r->m);
	free(r->mask);
	free(r->text.p);
	free(r->gen);
	free(r->ptoks);
	free(r->prompt_buf);
}

/* The grammar of --grammar FILE or --json-schema FILE|JSON, compiled. */
static int load_grammar(const struct opts *o, struct alice_grammar **g)
{
	struct alice_error err = {0};
	const char *src = o->grammar_file ? o->grammar_file : o->json_schema;
	const char *t = o->json_schema;
	while (t && (*t == ' ' || *t == '\t' || *t == '\n'))
		t++;
	bool inline_json = t && *t == '{';
	size_t len = 0;
	char *buf = inline_json ? NULL : tool_read_file(src, &len);
	if (!inline_json && !buf) {
		fprintf(stderr, "alice-llm-cli: %s: %s\n", src, strerror(errno));
		return 1;
	}
	enum alice_status st;
	if (o->grammar_file)
		st = alice_grammar_parse(buf, len, g, &err, NULL);
	else if (inline_json)
		st = alice_json_schema_text_to_grammar(o->json_schema, strlen(o->json_schema), g, &err);
	else
		st = alice_json_schema_text_to_grammar(buf, len, g, &err);
	free(buf);
	if (st != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s: %s\n", inline_json ? "--json-schema" : src, err.msg);
		return 1;
	}
	return 0;
}

/* The sampler and, with a grammar, its constraint over the model's vocabulary. */
static int setup_sampling(struct run *r)
{
	struct alice_error err = {0};
	struct alice_grammar *g = NULL;
	bool grammar = r->o.grammar_file || r->o.json_schema;
	if (grammar && load_grammar(&r->o, &g) != 0)
		return 1;
	if (grammar) {
		enum alice_status st = alice_grammar_vocab_from_tokenizer(r->tok, &r->gv, &err);
		if (st == ALICE_OK)
			st = alice_grammar_constraint_create(g, r->gv, r->tok, &r->gc, &err);
		alice_grammar_free(g); /* the constraint keeps its own reference */
		if (st != ALICE_OK || !(r->mask = malloc((size_t)r->n_vocab))) {
			fprintf(stderr, "alice-llm-cli: grammar: %s\n", st != ALICE_OK ? err.msg : "out of memory");
			return 1;
		}
	}
	struct alice_sampling_params sp;
	alice_sampling_params_default(&sp);
	sp.temperature = r->o.temp;
	sp.seed = r->o.seed;
	if (alice_sampler_create(&sp, r->n_vocab, &r->smp, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: sampler: %s\n", err.msg);
		return 1;
	}
	return 0;
}

/* Model, prompt tokens, context, sampler, detokenizer. */
static int setup(struct run *r)
{
	struct alice_error err = {0};
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = r->o.model;
	mp.backend = r->o.backend;
	mp.backend_dir = r->o.backend_dir;
	mp.n_threads = r->o.n_threads;
	if (alice_model_load(&mp, &r->m, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s\n", err.msg);
		return 1;
	}
	r->tok = alice_model_tokenizer(r->m);
	r->n_vocab = alice_model_n_vocab(r->m);
	if (alice_tokenizer_encode(r->tok, r->prompt, strlen(r->prompt), true, false, &r->ptoks, &r->n_ptoks, &err) !=
	    ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s: tokenizing the prompt: %s\n", r->o.model, err.msg);
		return 1;
	}
	if (r->o.no_bos && r->n_ptoks > 0 && r->ptoks[0] == alice_tokenizer_bos(r->tok) &&
	    alice_tokenizer_add_bos(r->tok)) {
		memmove(r->ptoks, r->ptoks + 1, (r->n_ptoks - 1) * sizeof(*r->ptoks));
		r->n_ptoks--;
	}
	if (r->n_ptoks == 0) {
		fprintf(stderr, "alice-llm-cli: the prompt is empty (and the model adds no BOS)\n");
		return 1;
	}
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = (uint32_t)r->o.ctx_size;
	if (alice_context_create(r->m, &cp, &r->c, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s: %s\n", r->o.model, err.msg);
		return 1;
	}
	r->n_ctx = alice_context_n_ctx(r->c);
	if (r->n_ptoks >= r->n_ctx) {
		fprintf(stderr, "alice-llm-cli: the prompt has %zu tokens; the context holds %u\n", r->n_ptoks, r->n_ctx);
		return 1;
	}
	if (setup_sampling(r) != 0)
		return 1;
	if (alice_detok_stream_create(r->tok, false, &r->ds, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s\n", err.msg);
		return 1;
	}
	if (!(r->gen = malloc(((size_t)r->o.n_predict + 1) * sizeof(*r->gen)))) {
		fprintf(stderr, "alice-llm-cli: out of memory\n");
		return 1;
	}
	return 0;
}

static int prefill(struct run *r)
{
	struct alice_error err = {0};
	int32_t *pos = malloc(r->n_ptoks * sizeof(*pos));
	if (!pos) {
		fprintf(stderr, "alice-llm-cli: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < r->n_ptoks; i++)
		pos[i] = (int32_t)i;
	struct alice_batch b = {.n_tokens = (int32_t)r->n_ptoks, .token = r->ptoks, .pos = pos, .seq = NULL, .logits = NULL};
	if (!r->o.json) {
		fputs(r->prompt, stdout);
		fflush(stdout);
	}
	double t0 = now_s();
	enum alice_status st = alice_context_decode(r->c, &b, &err);
	free(pos);
	r->t_prefill = now_s() - t0;
	if (st != ALICE_OK) {
		fprintf(stderr, "\nalice-llm-cli: prefill: %s\n", err.msg);
		return 1;
	}
	return 0;
}

/* The next token from the last logits (masked by the grammar, if any). */
static int next_token(struct run *r, int32_t *next)
{
	struct alice_error err = {0};
	const float *l = alice_context_logits(r->c, 0);
	if (r->gc && alice_grammar_constraint_mask(r->gc, r->mask, r->n_vocab, &err) != ALICE_OK) {
		fprintf(stderr, "\nalice-llm-cli: grammar: %s\n", err.msg);
		return 1;
	}
	struct alice_sample_result res;
	if (alice_sampler_sample(r->smp, l, r->gc ? r->mask : NULL, &res, &err) != ALICE_OK ||
	    alice_sampler_accept(r->smp, res.token, &err) != ALICE_OK) {
		fprintf(stderr, "\nalice-llm-cli: sampling: %s\n", err.msg);
		return 1;
	}
	*next = res.token;
	return 0;
}

/* Record and print one generated token; *stop when the grammar is done. */
static int emit(struct run *r, int32_t next, bool *stop)
{
	struct alice_error err = {0};
	const char *piece;
	size_t plen;
	r->gen[r->n_gen++] = next;
	if (r->gc && alice_grammar_constraint_accept(r->gc, next, stop, &err) != ALICE_OK) {
		fprintf(stderr, "\nalice-llm-cli: grammar: %s\n", err.msg);
		return 1;
	}
	if (alice_detok_stream_push(r->ds, next, &piece, &plen, &err) != ALICE_OK) {
		fprintf(stderr, "\nalice-llm-cli: %s\n", err.msg);
		return 1;
	}
	alice_sb_addn(&r->text, piece, plen);
	if (!r->o.json) {
		fwrite(piece, 1, plen, stdout);
		fflush(stdout);
	}
	return 0;
}

static int generate(struct run *r)
{
	struct alice_error err = {0};
	double t1 = now_s();
	for (;;) {
		int32_t next;
		bool stop = false;
		if (next_token(r, &next) != 0)
			return 1;
		/* under a grammar an end-of-generation token is the grammar's end */
		if ((!r->o.ignore_eos || r->gc) && alice_tokenizer_is_eog(r->tok, next))
			break;
		if (emit(r, next, &stop) != 0)
			return 1;
		if (stop || r->n_gen >= r->o.n_predict)
			break;
		int32_t p = (int32_t)r->n_ptoks + r->n_gen - 1;
		if ((uint32_t)p + 1 > r->n_ctx) {
			fprintf(stderr, "\nalice-llm-cli: context full (%u tokens)\n", r->n_ctx);
			break;
		}
		struct alice_batch nb = {.n_tokens = 1, .token = &next, .pos = &p, .seq = NULL, .logits = NULL};
		if (alice_context_decode(r->c, &nb, &err) != ALICE_OK) {
			fprintf(stderr, "\nalice-llm-cli: decode: %s\n", err.msg);
			return 1;
		}
		r->n_decoded++;
	}
	r->t_decode = now_s() - t1;
	return 0;
}

static void report(struct run *r, const char *rest, size_t rlen)
{
	double pf_tps = r->t_prefill > 0 ? (double)r->n_ptoks / r->t_prefill : 0.0;
	double dc_tps = r->t_decode > 0 && r->n_decoded > 0 ? (double)r->n_decoded / r->t_decode : 0.0;
	if (!r->o.json) {
		fwrite(rest, 1, rlen, stdout);
		printf("\n");
		fprintf(stderr, "\n%s on %s (%s): prefill %zu tokens in %.3f s (%.1f tok/s), decode %d tokens in %.3f s (%.1f tok/s)\n",
			alice_model_name(r->m), alice_model_backend_name(r->m), alice_model_device_name(r->m), r->n_ptoks,
			r->t_prefill, pf_tps, r->n_decoded, r->t_decode, dc_tps);
		return;
	}
	json_object *root = json_object_new_object();
	json_object *pt = json_object_new_array(), *gt = json_object_new_array();
	for (size_t i = 0; i < r->n_ptoks; i++)
		json_object_array_add(pt, json_object_new_int(r->ptoks[i]));
	for (int i = 0; i < r->n_gen; i++)
		json_object_array_add(gt, json_object_new_int(r->gen[i]));
	json_object_object_add(root, "prompt_tokens", pt);
	json_object_object_add(root, "tokens", gt);
	json_object_object_add(root, "text", json_object_new_string_len(r->text.p ? r->text.p : "", (int)r->text.n));
	json_object_object_add(root, "prefill_tokens_per_second", json_object_new_double(pf_tps));
	json_object_object_add(root, "decode_tokens_per_second", json_object_new_double(dc_tps));
	printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
}

int main(int argc, char **argv)
{
	struct run r = {0};
	int rc = parse_args(argc, argv, &r.o);
	if (rc)
		return rc == 2 ? 0 : 1;
	if (r.o.list_backends)
		return list_backends(r.o.backend_dir);
	if (!r.o.model) {
		fprintf(stderr, "alice-llm-cli: no model given (-m FILE; see --help)\n");
		return 1;
	}
	r.prompt = r.o.prompt ? r.o.prompt : "";
	if (r.o.prompt_file) {
		if (!(r.prompt_buf = tool_read_file(r.o.prompt_file, NULL))) {
			fprintf(stderr, "alice-llm-cli: %s: %s\n", r.o.prompt_file, strerror(errno));
			return 1;
		}
		r.prompt = r.prompt_buf;
	}
	if (r.o.json)
		alice_log_set_level(ALICE_LOG_WARN);
	rc = 1;
	if (setup(&r) == 0 && prefill(&r) == 0 && generate(&r) == 0) {
		const char *rest;
		size_t rlen;
		alice_detok_stream_flush(r.ds, &rest, &rlen);
		alice_sb_addn(&r.text, rest, rlen);
		if (r.text.oom) {
			fprintf(stderr, "alice-llm-cli: out of memory\n");
		} else {
			report(&r, rest, rlen);
			rc = 0;
		}
	}
	run_free(&r);
	return rc;
}
