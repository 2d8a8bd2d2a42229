/* alice-llm-cli — run a GGUF model on a prompt from the command line:
 * prefill in one batch, then generate token by token, streaming the text and
 * reporting prefill/decode tokens per second (or one JSON object). */
#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/backend_loader.h"
#include "alice/log.h"
#include "alice/model.h"
#include "alice/sampling.h"
#include "alice/tokenizer.h"
#include "tool_io.h"

struct opts {
	const char *model, *prompt, *prompt_file, *backend, *backend_dir;
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
		"  --ignore-eos           do not stop at end-of-generation tokens\n"
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

static int32_t argmax(const float *l, int32_t n)
{
	int32_t best = 0;
	for (int32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	return best;
}

/* Append bytes to a growable string. */
struct sbuf {
	char *p;
	size_t n, cap;
};

static bool sbuf_add(struct sbuf *s, const char *d, size_t n)
{
	if (s->n + n + 1 > s->cap) {
		size_t cap = (s->n + n + 1) * 2;
		char *np = realloc(s->p, cap);
		if (!np)
			return false;
		s->p = np;
		s->cap = cap;
	}
	memcpy(s->p + s->n, d, n);
	s->n += n;
	s->p[s->n] = 0;
	return true;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc == 2 ? 0 : 1;
	if (o.list_backends)
		return list_backends(o.backend_dir);
	if (!o.model) {
		fprintf(stderr, "alice-llm-cli: no model given (-m FILE; see --help)\n");
		return 1;
	}
	char *prompt_buf = NULL;
	const char *prompt = o.prompt ? o.prompt : "";
	if (o.prompt_file) {
		if (!(prompt_buf = tool_read_file(o.prompt_file, NULL))) {
			fprintf(stderr, "alice-llm-cli: %s: %s\n", o.prompt_file, strerror(errno));
			return 1;
		}
		prompt = prompt_buf;
	}
	if (o.json)
		alice_log_set_level(ALICE_LOG_WARN);

	rc = 1;
	struct alice_error err = {0};
	struct alice_model *m = NULL;
	struct alice_context *c = NULL;
	struct alice_sampler *smp = NULL;
	struct alice_detok_stream *ds = NULL;
	int32_t *ptoks = NULL, *gen = NULL;
	size_t n_ptoks = 0;
	struct sbuf text = {0};

	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = o.model;
	mp.backend = o.backend;
	mp.backend_dir = o.backend_dir;
	mp.n_threads = o.n_threads;
	if (alice_model_load(&mp, &m, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s\n", err.msg);
		goto out;
	}
	const struct alice_tokenizer *tok = alice_model_tokenizer(m);
	const int32_t n_vocab = alice_model_n_vocab(m);
	if (alice_tokenizer_encode(tok, prompt, strlen(prompt), true, false, &ptoks, &n_ptoks, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s: tokenizing the prompt: %s\n", o.model, err.msg);
		goto out;
	}
	if (o.no_bos && n_ptoks > 0 && ptoks[0] == alice_tokenizer_bos(tok) && alice_tokenizer_add_bos(tok)) {
		memmove(ptoks, ptoks + 1, (n_ptoks - 1) * sizeof(*ptoks));
		n_ptoks--;
	}
	if (n_ptoks == 0) {
		fprintf(stderr, "alice-llm-cli: the prompt is empty (and the model adds no BOS)\n");
		goto out;
	}
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = (uint32_t)o.ctx_size;
	if (alice_context_create(m, &cp, &c, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s: %s\n", o.model, err.msg);
		goto out;
	}
	uint32_t n_ctx = alice_context_n_ctx(c);
	if (n_ptoks >= n_ctx) {
		fprintf(stderr, "alice-llm-cli: the prompt has %zu tokens; the context holds %u\n", n_ptoks, n_ctx);
		goto out;
	}
	if (o.temp > 0.0f) {
		struct alice_sampling_params sp;
		alice_sampling_params_default(&sp);
		sp.temperature = o.temp;
		sp.seed = o.seed;
		if (alice_sampler_create(&sp, n_vocab, &smp, &err) != ALICE_OK) {
			fprintf(stderr, "alice-llm-cli: sampler: %s\n", err.msg);
			goto out;
		}
	}
	if (alice_detok_stream_create(tok, false, &ds, &err) != ALICE_OK) {
		fprintf(stderr, "alice-llm-cli: %s\n", err.msg);
		goto out;
	}
	gen = malloc(((size_t)o.n_predict + 1) * sizeof(*gen));
	int32_t *pos = malloc(n_ptoks * sizeof(*pos));
	if (!gen || !pos) {
		free(pos);
		fprintf(stderr, "alice-llm-cli: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < n_ptoks; i++)
		pos[i] = (int32_t)i;
	struct alice_batch b = {.n_tokens = (int32_t)n_ptoks, .token = ptoks, .pos = pos, .seq = NULL, .logits = NULL};
	if (!o.json) {
		fputs(prompt, stdout);
		fflush(stdout);
	}
	double t0 = now_s();
	enum alice_status st = alice_context_decode(c, &b, &err);
	free(pos);
	if (st != ALICE_OK) {
		fprintf(stderr, "\nalice-llm-cli: prefill: %s\n", err.msg);
		goto out;
	}
	double t_prefill = now_s() - t0;

	int n_gen = 0;
	double t1 = now_s();
	int n_decoded = 0;
	for (;;) {
		const float *l = alice_context_logits(c, 0);
		int32_t next;
		if (smp) {
			struct alice_sample_result r;
			if (alice_sampler_sample(smp, l, NULL, &r, &err) != ALICE_OK ||
			    alice_sampler_accept(smp, r.token, &err) != ALICE_OK) {
				fprintf(stderr, "\nalice-llm-cli: sampling: %s\n", err.msg);
				goto out;
			}
			next = r.token;
		} else {
			next = argmax(l, n_vocab);
		}
		if (!o.ignore_eos && alice_tokenizer_is_eog(tok, next))
			break;
		gen[n_gen++] = next;
		const char *piece;
		size_t plen;
		if (alice_detok_stream_push(ds, next, &piece, &plen, &err) != ALICE_OK) {
			fprintf(stderr, "\nalice-llm-cli: %s\n", err.msg);
			goto out;
		}
		if (!sbuf_add(&text, piece, plen))
			goto out;
		if (!o.json) {
			fwrite(piece, 1, plen, stdout);
			fflush(stdout);
		}
		if (n_gen >= o.n_predict)
			break;
		int32_t p = (int32_t)n_ptoks + n_gen - 1;
		if ((uint32_t)p + 1 > n_ctx) {
			fprintf(stderr, "\nalice-llm-cli: context full (%u tokens)\n", n_ctx);
			break;
		}
		struct alice_batch nb = {.n_tokens = 1, .token = &next, .pos = &p, .seq = NULL, .logits = NULL};
		if (alice_context_decode(c, &nb, &err) != ALICE_OK) {
			fprintf(stderr, "\nalice-llm-cli: decode: %s\n", err.msg);
			goto out;
		}
		n_decoded++;
	}
	double t_decode = now_s() - t1;
	const char *rest;
	size_t rlen;
	alice_detok_stream_flush(ds, &rest, &rlen);
	if (!sbuf_add(&text, rest, rlen))
		goto out;
	double pf_tps = t_prefill > 0 ? (double)n_ptoks / t_prefill : 0.0;
	double dc_tps = t_decode > 0 && n_decoded > 0 ? (double)n_decoded / t_decode : 0.0;
	if (o.json) {
		json_object *root = json_object_new_object();
		json_object *pt = json_object_new_array(), *gt = json_object_new_array();
		for (size_t i = 0; i < n_ptoks; i++)
			json_object_array_add(pt, json_object_new_int(ptoks[i]));
		for (int i = 0; i < n_gen; i++)
			json_object_array_add(gt, json_object_new_int(gen[i]));
		json_object_object_add(root, "prompt_tokens", pt);
		json_object_object_add(root, "tokens", gt);
		json_object_object_add(root, "text", json_object_new_string_len(text.p ? text.p : "", (int)text.n));
		json_object_object_add(root, "prefill_tokens_per_second", json_object_new_double(pf_tps));
		json_object_object_add(root, "decode_tokens_per_second", json_object_new_double(dc_tps));
		printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(root);
	} else {
		fwrite(rest, 1, rlen, stdout);
		printf("\n");
		fprintf(stderr, "\n%s on %s (%s): prefill %zu tokens in %.3f s (%.1f tok/s), decode %d tokens in %.3f s (%.1f tok/s)\n",
			alice_model_name(m), alice_model_backend_name(m), alice_model_device_name(m), n_ptoks, t_prefill,
			pf_tps, n_decoded, t_decode, dc_tps);
	}
	rc = 0;
out:
	alice_detok_stream_free(ds);
	alice_sampler_free(smp);
	alice_context_free(c);
	alice_model_free(m);
	free(text.p);
	free(gen);
	free(ptoks);
	free(prompt_buf);
	return rc;
}
