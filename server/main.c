/* main.c — alice-llm-server: command-line flags, then srv_run().
 * Exit codes: 0 clean shutdown, 1 runtime failure (model load, a
 * --chat-template-file that does not compile, socket),
 * 2 bad command line. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alice/chat.h"
#include "alice/embed.h"
#include "chat_tmpl.h"
#include "server.h"

#define DEFAULT_MODEL "tiny-tolstoy-Q8_0.gguf"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: alice-llm-server [options]\n"
		"\n"
		"An OpenAI-compatible server for GGUF models.\n"
		"\n"
		"  --model PATH          GGUF model to serve (default: the bundled models/%s)\n"
		"  --backend NAME        auto | cpu | cuda | vulkan | a drop-in backend name (default auto)\n"
		"  --hybrid              same as --backend cpu\n"
		"  --backend-dir DIR     look for backend plugins in DIR first\n"
		"  --host ADDR           address to listen on (default 127.0.0.1)\n"
		"  --port N              port to listen on (default 8000)\n"
		"  --ctx-size N          context positions per slot (default: the model's, at most 4096)\n"
		"  --parallel N          requests decoded together, one slot each (default 4)\n"
		"  --kv-cells N          KV cache cells shared by all slots, in blocks of 16 (default 0:\n"
		"                        parallel x ctx-size, every slot can fill its context at once;\n"
		"                        at least ctx-size). A request is admitted when the pool can promise\n"
		"                        it prompt + max_tokens cells (the context when max_tokens is\n"
		"                        absent: see --max-tokens-limit), else it waits in the queue\n"
		"  --batch-size N        prompt tokens per engine step (default 512)\n"
		"  --threads N           CPU threads (default: physical cores)\n"
		"  --queue N             requests waiting for a slot before 503 (default 64)\n"
		"  --api-key KEY         require 'Authorization: Bearer KEY' on every route but /health\n"
		"                        (or env ALICE_API_KEY)\n"
		"  --metrics-no-auth     serve /metrics without the API key (for scrapers)\n"
		"  --max-body BYTES      largest request body, suffix k/m allowed (default 1m)\n"
		"  --chat-template NAME  render chats with a built-in format instead of the model's own\n"
		"                        Jinja template (tokenizer.chat_template): %s\n"
		"  --chat-template-file F  render chats with the Jinja template in file F\n"
		"  --reasoning-format F  deepseek: a <think> block goes to message.reasoning_content\n"
		"                        (default); none: it stays in content\n"
		"  --log-format FMT      text | json (default text)\n"
		"  --cors-origin ORIGIN  send Access-Control-Allow-Origin: ORIGIN (or *) and answer CORS\n"
		"                        preflights; default: no CORS headers\n"
		"  --timeout SECONDS     drop a client inactive that long: not sending its request, or not\n"
		"                        reading the reply (default 600); never counts the server's own work\n"
		"  --request-deadline SECONDS  a request's head and body must arrive within this, counted from\n"
		"                        the connection's start or the previous reply (default 60; 0 = none)\n"
		"  --max-connections N   open connections at most; more wait in the kernel's backlog\n"
		"                        (default 512)\n"
		"  --max-n N             most choices ('n') per request, else 400 (default 16)\n"
		"  --max-tokens-limit N  most max_tokens per request, else 400; also the default when\n"
		"                        absent (default 0: up to the context)\n"
		"  --max-messages N      most chat messages per request, else 413 (default 1024; 0 = no cap)\n"
		"  --max-grammar-bytes N largest grammar (GBNF or from a JSON schema), else 413\n"
		"                        (default 131072; 0 = no cap)\n"
		"  --no-prefix-cache     never reuse a slot's KV cache for a new request's common prefix\n"
		"  --responses-store N   /v1/responses kept for previous_response_id and GET, least recently\n"
		"                        used dropped first (default 256; 0 = none kept)\n"
		"  --no-webui            no chat page at / (then / is a 404)\n"
		"  --embeddings          serve /v1/embeddings and refuse the generation routes (implied by\n"
		"                        an embedding model: BERT, or a GGUF with <arch>.pooling_type)\n"
		"  --pooling TYPE        none | mean | cls | last: how token vectors become one embedding\n"
		"                        (default: the GGUF's <arch>.pooling_type, else none)\n"
		"  --model-draft PATH    speculative decoding with this smaller GGUF as the draft (same\n"
		"                        vocabulary as --model, else refused at load)\n"
		"  --backend-draft NAME  backend of the draft model (default: --backend)\n"
		"  --spec MODE           speculative decoding: none | ngram (prompt lookup, no draft model)\n"
		"                        | draft (needs --model-draft; the default when it is given)\n"
		"  --spec-ngram N        ngram: tokens matched to find a continuation (1-16, default 3)\n"
		"  --draft-max N         tokens drafted per step (1-14, default 14)\n"
		"  --draft-min N         verify no draft shorter than this (default 0)\n"
		"  --draft-p-min P       draft model: stop drafting below this top probability (default 0.75)\n"
		"  --help                this text\n"
		"  --version             print the version\n",
		DEFAULT_MODEL, alice_chat_format_names());
}

static bool spec_given; /* --spec was on the command line */

static int bad(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "alice-llm-server: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n(see --help)\n");
	return 2;
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return false;
	unsigned long long mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		mul = 1024ull * 1024 * 1024, end++;
	if (*end || v == 0 || v > (1ull << 40) / mul)
		return false;
	*out = (size_t)(v * mul);
	return true;
}

static bool file_exists(const char *p)
{
	return access(p, R_OK) == 0;
}

/* The bundled model: next to the build (build/bin/../../models), in the
 * source tree this binary was built from, or under the working directory. */
static char *find_default_model(void)
{
	char exe[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			const char *rel[] = {"/../../models/", "/../models/", "/models/", "/../share/alice-llm/models/"};
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				snprintf(cand, sizeof(cand), "%s%s%s", exe, rel[i], DEFAULT_MODEL);
				if (file_exists(cand))
					return realpath(cand, NULL);
			}
		}
	}
#ifdef ALICE_SOURCE_DIR
	snprintf(cand, sizeof(cand), "%s/models/%s", ALICE_SOURCE_DIR, DEFAULT_MODEL);
	if (file_exists(cand))
		return realpath(cand, NULL);
#endif
	snprintf(cand, sizeof(cand), "models/%s", DEFAULT_MODEL);
	if (file_exists(cand))
		return realpath(cand, NULL);
	return NULL;
}

enum {
	O_MODEL = 256, O_BACKEND, O_HYBRID, O_BACKEND_DIR, O_HOST, O_PORT, O_CTX, O_PARALLEL, O_BATCH,
	O_THREADS, O_QUEUE, O_API_KEY, O_MAX_BODY, O_TEMPLATE, O_LOG_FORMAT, O_HELP, O_VERSION,
	O_CORS, O_TIMEOUT, O_MAX_N, O_MAX_TOKENS, O_MAX_MESSAGES, O_MAX_GRAMMAR, O_NO_PREFIX_CACHE,
	O_MAX_CONNS, O_DEADLINE, O_METRICS_NO_AUTH, O_TEMPLATE_FILE, O_RESPONSES_STORE, O_NO_WEBUI, O_REASONING, O_EMBEDDINGS, O_POOLING,
	O_MODEL_DRAFT, O_BACKEND_DRAFT, O_SPEC, O_SPEC_NGRAM, O_DRAFT_MAX, O_DRAFT_MIN, O_DRAFT_P_MIN, O_KV_CELLS,
};

static const struct option opts[] = {
	{"model", required_argument, NULL, O_MODEL},
	{"backend", required_argument, NULL, O_BACKEND},
	{"hybrid", no_argument, NULL, O_HYBRID},
	{"backend-dir", required_argument, NULL, O_BACKEND_DIR},
	{"host", required_argument, NULL, O_HOST},
	{"port", required_argument, NULL, O_PORT},
	{"ctx-size", required_argument, NULL, O_CTX},
	{"parallel", required_argument, NULL, O_PARALLEL},
	{"kv-cells", required_argument, NULL, O_KV_CELLS},
	{"batch-size", required_argument, NULL, O_BATCH},
	{"threads", required_argument, NULL, O_THREADS},
	{"queue", required_argument, NULL, O_QUEUE},
	{"api-key", required_argument, NULL, O_API_KEY},
	{"max-body", required_argument, NULL, O_MAX_BODY},
	{"chat-template", required_argument, NULL, O_TEMPLATE},
	{"chat-template-file", required_argument, NULL, O_TEMPLATE_FILE},
	{"reasoning-format", required_argument, NULL, O_REASONING},
	{"log-format", required_argument, NULL, O_LOG_FORMAT},
	{"cors-origin", required_argument, NULL, O_CORS},
	{"timeout", required_argument, NULL, O_TIMEOUT},
	{"max-n", required_argument, NULL, O_MAX_N},
	{"max-tokens-limit", required_argument, NULL, O_MAX_TOKENS},
	{"max-messages", required_argument, NULL, O_MAX_MESSAGES},
	{"max-grammar-bytes", required_argument, NULL, O_MAX_GRAMMAR},
	{"no-prefix-cache", no_argument, NULL, O_NO_PREFIX_CACHE},
	{"embeddings", no_argument, NULL, O_EMBEDDINGS},
	{"pooling", required_argument, NULL, O_POOLING},
	{"max-connections", required_argument, NULL, O_MAX_CONNS},
	{"request-deadline", required_argument, NULL, O_DEADLINE},
	{"metrics-no-auth", no_argument, NULL, O_METRICS_NO_AUTH},
	{"responses-store", required_argument, NULL, O_RESPONSES_STORE},
	{"no-webui", no_argument, NULL, O_NO_WEBUI},
	{"model-draft", required_argument, NULL, O_MODEL_DRAFT},
	{"backend-draft", required_argument, NULL, O_BACKEND_DRAFT},
	{"spec", required_argument, NULL, O_SPEC},
	{"spec-ngram", required_argument, NULL, O_SPEC_NGRAM},
	{"draft-max", required_argument, NULL, O_DRAFT_MAX},
	{"draft-min", required_argument, NULL, O_DRAFT_MIN},
	{"draft-p-min", required_argument, NULL, O_DRAFT_P_MIN},
	{"help", no_argument, NULL, O_HELP},
	{"version", no_argument, NULL, O_VERSION},
	{NULL, 0, NULL, 0},
};

/* The numeric flags: range and the message for a value outside it. */
static const struct num_opt {
	int id;
	long lo, hi;
	const char *msg; /* one %s: the value given */
} num_opts[] = {
	{O_PORT, 0, 65535, "--port: '%s' is not a port number (0-65535)"},
	{O_CTX, 1, 1 << 24, "--ctx-size: '%s' is not a positive number"},
	{O_PARALLEL, 1, 256, "--parallel: '%s' must be between 1 and 256"},
	{O_KV_CELLS, 0, INT32_MAX, "--kv-cells: '%s' must be a number >= 0 (0: parallel x ctx-size)"},
	{O_BATCH, 1, 1 << 16, "--batch-size: '%s' must be between 1 and 65536"},
	{O_THREADS, 0, 1024, "--threads: '%s' must be between 0 and 1024"},
	{O_QUEUE, 1, 1 << 20, "--queue: '%s' must be a positive number"},
	{O_TIMEOUT, 1, 86400, "--timeout: '%s' must be between 1 and 86400 seconds"},
	{O_MAX_N, 1, SRV_MAX_N, "--max-n: '%s' must be between 1 and 16"},
	{O_MAX_TOKENS, 0, INT32_MAX, "--max-tokens-limit: '%s' must be a number >= 0 (0: no cap)"},
	{O_MAX_MESSAGES, 0, INT32_MAX, "--max-messages: '%s' must be a number >= 0 (0: no cap)"},
	{O_MAX_GRAMMAR, 0, INT32_MAX, "--max-grammar-bytes: '%s' must be a number >= 0 (0: no cap)"},
	{O_MAX_CONNS, 1, 1 << 20, "--max-connections: '%s' must be between 1 and 1048576"},
	{O_DEADLINE, 0, 86400, "--request-deadline: '%s' must be between 0 and 86400 seconds"},
	{O_RESPONSES_STORE, 0, 1 << 20, "--responses-store: '%s' must be between 0 and 1048576"},
	{O_SPEC_NGRAM, 1, 16, "--spec-ngram: '%s' must be between 1 and 16"},
	{O_DRAFT_MAX, 1, ALICE_SPEC_MAX_DRAFT, "--draft-max: '%s' must be between 1 and 14"},
	{O_DRAFT_MIN, 0, ALICE_SPEC_MAX_DRAFT, "--draft-min: '%s' must be between 0 and 14"},
};

/* Where a numeric flag's value goes. */
static void set_num(struct srv_config *cfg, int id, long v)
{
	switch (id) {
	case O_PORT: cfg->port = (int)v; break;
	case O_CTX: cfg->n_ctx = (int)v; break;
	case O_PARALLEL: cfg->n_parallel = (int)v; break;
	case O_KV_CELLS: cfg->kv_cells = (uint32_t)v; break;
	case O_BATCH: cfg->n_batch = (int)v; break;
	case O_THREADS: cfg->n_threads = (int)v; break;
	case O_QUEUE: cfg->queue = (int)v; break;
	case O_TIMEOUT: cfg->timeout_s = (int)v; break;
	case O_MAX_N: cfg->limits.max_n = v; break;
	case O_MAX_TOKENS: cfg->limits.max_tokens = v; break;
	case O_MAX_MESSAGES: cfg->limits.max_messages = v; break;
	case O_MAX_GRAMMAR: cfg->limits.max_grammar_bytes = v; break;
	case O_MAX_CONNS: cfg->max_connections = (int)v; break;
	case O_DEADLINE: cfg->request_deadline_s = (int)v; break;
	case O_RESPONSES_STORE: cfg->responses_store = (int)v; break;
	case O_SPEC_NGRAM: cfg->spec.ngram_n = (uint32_t)v; break;
	case O_DRAFT_MAX: cfg->spec.n_max = (uint32_t)v; break;
	case O_DRAFT_MIN: cfg->spec.n_min = (uint32_t)v; break;
	}
}

static void config_defaults(struct srv_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->backend = "auto";
	cfg->host = "127.0.0.1";
	cfg->port = 8000;
	cfg->n_parallel = 4;
	cfg->n_batch = 512;
	cfg->queue = 64;
	cfg->max_body = 1024 * 1024;
	cfg->timeout_s = 600;
	cfg->max_connections = 512;
	cfg->request_deadline_s = 60;
	cfg->responses_store = 256;
	cfg->limits.max_n = SRV_MAX_N;
	cfg->limits.max_messages = 1024;
	cfg->limits.max_grammar_bytes = 128 * 1024;
	cfg->api_key = getenv("ALICE_API_KEY");
	cfg->pooling = ALICE_POOLING_UNSPECIFIED;
	alice_spec_params_default(&cfg->spec);
}

/* A flag with a text value (or none). -1: go on; else the exit code. */
static int apply_text_opt(int c, const char *a, struct srv_config *cfg, const char **model)
{
	switch (c) {
	case O_MODEL: *model = a; break;
	case O_BACKEND:
		if (!a[0])
			return bad("--backend needs a name%s%s", "", "");
		cfg->backend = a;
		break;
	case O_HYBRID: cfg->backend = "cpu"; break;
	case O_BACKEND_DIR: cfg->backend_dir = a; break;
	case O_HOST: cfg->host = a; break;
	case O_API_KEY: cfg->api_key = a; break;
	case O_MAX_BODY:
		if (!parse_size(a, &cfg->max_body))
			return bad("--max-body: '%s' is not a size (bytes, or with k/m/g)%s", a, "");
		break;
	case O_TEMPLATE: {
		enum alice_chat_format f;
		struct alice_error err = {{0}};
		if (alice_chat_format_from_name(a, &f, &err) != ALICE_OK)
			return bad("--chat-template: %s%s", err.msg, "");
		cfg->chat_template = a;
		break;
	}
	case O_TEMPLATE_FILE: cfg->chat_template_file = a; break;
	case O_REASONING:
		if (strcmp(a, "none") && strcmp(a, "deepseek"))
			return bad("--reasoning-format: '%s' is not none or deepseek%s", a, "");
		cfg->reasoning_none = strcmp(a, "none") == 0;
		break;
	case O_LOG_FORMAT:
		if (strcmp(a, "text") && strcmp(a, "json"))
			return bad("--log-format: '%s' is not text or json%s", a, "");
		cfg->log_json = strcmp(a, "json") == 0;
		break;
	case O_CORS:
		if (!a[0] || strpbrk(a, "\r\n"))
			return bad("--cors-origin: '%s' is not an origin (e.g. https://app.example or *)%s", a, "");
		cfg->cors_origin = a;
		break;
	case O_NO_PREFIX_CACHE: cfg->no_prefix_cache = true; break;
	case O_EMBEDDINGS: cfg->embeddings = true; break;
	case O_POOLING: {
		enum alice_pooling p;
		if (!alice_pooling_parse(a, &p))
			return bad("--pooling: '%s' is not none, mean, cls or last%s", a, "");
		cfg->pooling = (int)p;
		break;
	}
	case O_METRICS_NO_AUTH: cfg->metrics_no_auth = true; break;
	case O_NO_WEBUI: cfg->no_webui = true; break;
	case O_MODEL_DRAFT: cfg->draft_path = a; break;
	case O_BACKEND_DRAFT:
		if (!a[0])
			return bad("--backend-draft needs a name%s%s", "", "");
		cfg->backend_draft = a;
		break;
	case O_SPEC:
		if (strcmp(a, "none") == 0)
			cfg->spec.mode = ALICE_SPEC_NONE;
		else if (strcmp(a, "ngram") == 0)
			cfg->spec.mode = ALICE_SPEC_NGRAM;
		else if (strcmp(a, "draft") == 0)
			cfg->spec.mode = ALICE_SPEC_DRAFT;
		else
			return bad("--spec: '%s' is not none, ngram or draft%s", a, "");
		spec_given = true;
		break;
	case O_DRAFT_P_MIN: {
		char *end;
		errno = 0;
		double p = strtod(a, &end);
		if (errno || end == a || *end || !(p >= 0.0 && p <= 1.0))
			return bad("--draft-p-min: '%s' must be a number between 0 and 1%s", a, "");
		cfg->spec.p_min = (float)p;
		break;
	}
	case O_HELP: usage(stdout); return 0;
	case O_VERSION: printf("alice-llm-server %s\n", ALICE_VERSION); return 0;
	}
	return -1;
}

/* -1: parsed, go on; else the exit code (0 after --help/--version, 2 for a bad command line). */
static int parse_args(int argc, char **argv, struct srv_config *cfg, const char **model)
{
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == ':')
			return bad("option %s needs a value%s", argv[optind - 1], "");
		if (c < O_MODEL)
			return bad("unknown option '%s'%s", argv[optind - 1], "");
		const struct num_opt *n = NULL;
		for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++)
			if (num_opts[i].id == c)
				n = &num_opts[i];
		long v;
		if (n && !parse_long(optarg, n->lo, n->hi, &v))
			return bad(n->msg, optarg, "");
		if (n) {
			set_num(cfg, c, v);
			continue;
		}
		int rc = apply_text_opt(c, optarg, cfg, model);
		if (rc >= 0)
			return rc;
	}
	if (optind < argc)
		return bad("unexpected argument '%s'%s", argv[optind], "");
	if (cfg->draft_path && !spec_given)
		cfg->spec.mode = ALICE_SPEC_DRAFT;
	if (cfg->spec.mode == ALICE_SPEC_DRAFT && !cfg->draft_path)
		return bad("--spec draft needs --model-draft PATH%s%s", "", "");
	if (cfg->draft_path && cfg->spec.mode != ALICE_SPEC_DRAFT)
		return bad("--model-draft %s goes with --spec draft, not --spec %s", cfg->draft_path,
			   cfg->spec.mode == ALICE_SPEC_NGRAM ? "ngram" : "none");
	if (cfg->spec.n_min > cfg->spec.n_max)
		return bad("--draft-min is larger than --draft-max%s%s", "", "");
	if (cfg->chat_template && cfg->chat_template_file)
		return bad("--chat-template %s and --chat-template-file %s cannot be combined", cfg->chat_template,
			   cfg->chat_template_file);
	return -1;
}

int main(int argc, char **argv)
{
	struct srv_config cfg;
	const char *model = NULL;
	config_defaults(&cfg);
	int rc = parse_args(argc, argv, &cfg, &model);
	if (rc >= 0)
		return rc;
	cfg.model_path = model ? strdup(model) : find_default_model();
	if (!model && !cfg.model_path) {
		fprintf(stderr,
			"alice-llm-server: no --model given and the bundled models/%s was not found "
			"(looked next to the executable, in the source tree and in ./models)\n",
			DEFAULT_MODEL);
		return 1;
	}
	if (!cfg.model_path)
		return 1;
	char msg[600];
	if (cfg.chat_template_file && srv_chat_read_file(&cfg, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "alice-llm-server: %s\n", msg);
		free(cfg.model_path);
		return 1;
	}
	rc = srv_run(&cfg);
	free(cfg.chat_template_src);
	free(cfg.model_path);
	return rc;
}
