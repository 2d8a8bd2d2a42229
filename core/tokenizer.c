/* tokenizer.c — vocabulary loading from GGUF, special tokens, encode driver.
 *
 * Loading follows llama.cpp's llama_vocab::load: the same defaults per
 * vocabulary type, the same special-token detection by text (EOT, EOM, FIM,
 * end-of-generation), the same attribute fix-ups. Encoding first splits the
 * text on special tokens (llama.cpp's tokenizer_st_partition: longest token
 * text first, each occurrence left to right) and tokenizes the text between
 * them with the SPM or BPE tokenizer. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/log.h"
#include "tokenizer_internal.h"

/* ---- small containers ---------------------------------------------------- */

bool tok_ivec_push(struct tok_ivec *a, int32_t x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		int32_t *v = realloc(a->v, cap * sizeof *v);
		if (!v)
			return false;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return true;
}

uint64_t tok_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33; /* final mix: both halves are used (index and tag) */
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

static size_t pow2_at_least(size_t n)
{
	size_t m = 16;
	while (m < n)
		m <<= 1;
	return m;
}

int32_t tok_lookup(const struct alice_tokenizer *t, const char *s, size_t n)
{
	uint64_t h = tok_hash(s, n), tag = h >> 32;
	size_t i = h & t->map.mask;
	for (;;) {
		uint64_t v = t->map.slots[i];
		if (!v)
			return -1;
		if ((v >> 32) == tag) {
			int32_t id = (int32_t)(uint32_t)v - 1;
			if (t->tok[id].len == n && memcmp(t->tok[id].text, s, n) == 0)
				return id;
		}
		i = (i + 1) & t->map.mask;
	}
}

static uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn)
{
	return tok_hash(l, ln) * 0x9e3779b97f4a7c15ull + tok_hash(r, rn);
}

int32_t tok_merge_rank(const struct alice_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn)
{
	const struct tok_mergemap *m = &t->merges;
	if (!m->slots)
		return -1;
	size_t i = pair_hash(l, ln, r, rn) & m->mask;
	for (;;) {
		int32_t k = m->slots[i];
		if (k < 0)
			return -1;
		const struct tok_merge *e = &m->items[k];
		if (e->left_len == ln && e->right_len == rn && memcmp(e->left, l, ln) == 0 &&
		    memcmp(e->right, r, rn) == 0)
			return e->rank;
		i = (i + 1) & m->mask;
	}
}

/* ---- loading --------------------------------------------------------------- */

static enum alice_status fail(struct alice_error *err, enum alice_status st, const struct alice_gguf *g,
			      const char *what)
{
	return alice_fail(err, st, "%s: tokenizer: %s", alice_gguf_path(g), what);
}

static int32_t find_text(const struct alice_tokenizer *t, const char *s)
{
	return tok_lookup(t, s, strlen(s));
}

/* The first of `texts` (NULL-terminated) present in the vocabulary: its id is
 * stored in *id when *id is unset, and the token becomes a control token. */
static void detect_special(struct alice_tokenizer *t, int32_t *id, const char *const *texts)
{
	if (*id >= 0)
		return;
	for (size_t i = 0; texts[i]; i++) {
		int32_t k = find_text(t, texts[i]);
		if (k >= 0) {
			*id = k;
			t->tok[k].attr |= TOK_ATTR_CONTROL;
			return;
		}
	}
}

static const char *const EOT_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
					"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
					"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
					"<end_of_utterance>", NULL};
static const char *const EOM_TEXTS[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE_TEXTS[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
					    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
					    "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const FIM_SUF_TEXTS[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
					    "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
					    "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const FIM_MID_TEXTS[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
					    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
					    "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const FIM_PAD_TEXTS[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP_TEXTS[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
					    "<reponame>", NULL};
static const char *const FIM_SEP_TEXTS[] = {"<|file_sep|>", NULL};
/* llama.cpp's end-of-generation texts */
static const char *const EOG_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
					"<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
					"<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
					"<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
					"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[",
					NULL};

struct pre_def {
	const char *name;
	enum tok_pre pre;
	bool clean_spaces, ignore_merges, add_bos;
};

/* tokenizer.ggml.pre names llama.cpp maps onto the splits implemented here */
static const struct pre_def PRE_DEFS[] = {
	{"default", TOK_PRE_DEFAULT, true, false, false},
	{"llama3", TOK_PRE_LLAMA3, true, true, true},
	{"llama-v3", TOK_PRE_LLAMA3, true, true, true},
	{"llama-bpe", TOK_PRE_LLAMA3, true, true, true},
	{"falcon3", TOK_PRE_LLAMA3, true, true, true},
	{"falcon-h1", TOK_PRE_LLAMA3, true, true, true},
	{"pixtral", TOK_PRE_LLAMA3, true, true, true},
	{"midm-2.0", TOK_PRE_LLAMA3, true, true, true},
	{"lfm2", TOK_PRE_LLAMA3, true, true, true},
	{"jina-v5-nano", TOK_PRE_LLAMA3, true, true, true},
	{"dbrx", TOK_PRE_LLAMA3, true, false, false},
	{"smaug-bpe", TOK_PRE_LLAMA3, true, false, false},
	{"gpt-2", TOK_PRE_GPT2, true, false, false},
	{"phi-2", TOK_PRE_GPT2, true, false, false},
	{"jina-es", TOK_PRE_GPT2, true, false, false},
	{"jina-de", TOK_PRE_GPT2, true, false, false},
	{"gigachat", TOK_PRE_GPT2, true, false, false},
	{"jina-v2-es", TOK_PRE_GPT2, true, false, false},
	{"jina-v2-de", TOK_PRE_GPT2, true, false, false},
	{"a.x-4.0", TOK_PRE_GPT2, true, false, false},
	{"mellum", TOK_PRE_GPT2, true, false, false},
	{"modern-bert", TOK_PRE_GPT2, true, false, false},
	{"exaone4", TOK_PRE_GPT2, true, false, false},
	{"mpt", TOK_PRE_GPT2, true, false, false},
	{"olmo", TOK_PRE_GPT2, true, false, false},
	{"jais", TOK_PRE_GPT2, true, false, false},
	{"trillion", TOK_PRE_GPT2, false, false, false},
	{"granite-docling", TOK_PRE_GPT2, false, false, false},
	{"qwen2", TOK_PRE_QWEN2, false, false, false},
	{"deepseek-r1-qwen", TOK_PRE_QWEN2, false, false, false},
	{"kormo", TOK_PRE_QWEN2, false, false, false},
	{"f2llmv2", TOK_PRE_QWEN2, false, false, false},
	{"megrez", TOK_PRE_QWEN2, true, false, false},
	{"stablelm2", TOK_PRE_QWEN2, true, false, false},
	{"hunyuan", TOK_PRE_QWEN2, false, false, false},
	{"solar-open", TOK_PRE_QWEN2, false, false, false},
	{"qwen35", TOK_PRE_QWEN35, false, false, false},
	{"gemma4", TOK_PRE_GEMMA4, true, false, false},
};

static bool str_eq(struct alice_gguf_str s, const char *z)
{
	return s.len == strlen(z) && memcmp(s.ptr, z, s.len) == 0;
}

static enum alice_status build_strmap(struct alice_tokenizer *t, const struct alice_gguf *g,
				      struct alice_error *err)
{
	t->map.mask = pow2_at_least((size_t)t->n * 2) - 1;
	t->map.slots = calloc(t->map.mask + 1, sizeof *t->map.slots);
	if (!t->map.slots)
		return fail(err, ALICE_ERR_NOMEM, g, "out of memory");
	for (int32_t id = 0; id < t->n; id++) {
		const struct tok_entry *e = &t->tok[id];
		uint64_t h = tok_hash(e->text, e->len);
		size_t i = h & t->map.mask;
		for (;;) {
			uint64_t v = t->map.slots[i];
			if (!v) {
				t->map.slots[i] = (h >> 32) << 32 | (uint32_t)(id + 1);
				break;
			}
			int32_t o = (int32_t)(uint32_t)v - 1;
			if (t->tok[o].len == e->len && memcmp(t->tok[o].text, e->text, e->len) == 0)
				return alice_fail(err, ALICE_ERR_INVALID,
						  "%s: tokenizer: duplicate token in vocabulary: ids %d and %d",
						  alice_gguf_path(g), o, id);
			i = (i + 1) & t->map.mask;
		}
	}
	return ALICE_OK;
}

static enum alice_status load_merges(struct alice_tokenizer *t, const struct alice_gguf *g,
				     struct alice_error *err)
{
	struct alice_gguf_arr arr;
	enum alice_status st = alice_gguf_get_arr(g, "tokenizer.ggml.merges", &arr, NULL);
	if (st == ALICE_ERR_NOT_FOUND)
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.merges is missing");
	if (st != ALICE_OK || arr.type != ALICE_GGUF_STRING)
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.merges is not an array of strings");
	if (arr.n > INT32_MAX)
		return fail(err, ALICE_ERR_INVALID, g, "too many merges");
	struct tok_mergemap *m = &t->merges;
	m->items = malloc((arr.n ? arr.n : 1) * sizeof *m->items);
	m->mask = pow2_at_least((size_t)arr.n * 2) - 1;
	m->slots = malloc((m->mask + 1) * sizeof *m->slots);
	if (!m->items || !m->slots)
		return fail(err, ALICE_ERR_NOMEM, g, "out of memory");
	memset(m->slots, 0xff, (m->mask + 1) * sizeof *m->slots);
	for (uint64_t r = 0; r < arr.n; r++) {
		struct alice_gguf_str s;
		if (alice_gguf_arr_str(&arr, r, &s) != ALICE_OK)
			return fail(err, ALICE_ERR_INVALID, g, "bad merge entry");
		/* "left right": split at the first space after the first byte;
		 * entries without one never match anything */
		const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
		if (!sp)
			continue;
		struct tok_merge e = {s.ptr, sp + 1, (uint32_t)(sp - s.ptr), (uint32_t)(s.len - (sp - s.ptr) - 1),
				      (int32_t)r};
		size_t i = pair_hash(e.left, e.left_len, e.right, e.right_len) & m->mask;
		for (;;) {
			int32_t k = m->slots[i];
			if (k < 0) {
				m->items[m->n] = e;
				m->slots[i] = (int32_t)m->n++;
				break;
			}
			const struct tok_merge *o = &m->items[k];
			if (o->left_len == e.left_len && o->right_len == e.right_len &&
			    memcmp(o->left, e.left, e.left_len) == 0 && memcmp(o->right, e.right, e.right_len) == 0)
				break; /* duplicate pair: the first (lowest) rank stays */
			i = (i + 1) & m->mask;
		}
	}
	return ALICE_OK;
}

static void read_id(struct alice_tokenizer *t, const struct alice_gguf *g, const char *key, int32_t *id)
{
	int64_t v;
	if (alice_gguf_get_int(g, key, &v, NULL) != ALICE_OK)
		return;
	if (v < 0 || v >= t->n) {
		alice_log(ALICE_LOG_WARN, "%s: tokenizer: bad special token %s = %lld, using %d",
			  alice_gguf_path(g), key, (long long)v, *id);
		return;
	}
	*id = (int32_t)v;
}

static void read_bool(const struct alice_gguf *g, const char *key, bool *b)
{
	bool v;
	if (alice_gguf_get_bool(g, key, &v, NULL) == ALICE_OK)
		*b = v;
}

struct special_key {
	uint32_t len;
	int32_t id;
};

static int cmp_special(const void *a, const void *b)
{
	const struct special_key *x = a, *y = b;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int32_t trie_child(const struct tok_trie *tr, int32_t node, uint8_t byte)
{
	size_t i = (((uint64_t)(uint32_t)node * 0x9e3779b97f4a7c15ull) ^ byte) & tr->mask;
	for (;;) {
		if (tr->edge_key_node[i] < 0)
			return -1;
		if (tr->edge_key_node[i] == node && tr->edge_key_byte[i] == byte)
			return tr->edge_child[i];
		i = (i + 1) & tr->mask;
	}
}

static bool build_trie(struct alice_tokenizer *t)
{
	struct tok_trie *tr = &t->trie;
	size_t total = 1;
	for (int32_t i = 0; i < t->n_special; i++)
		total += t->tok[t->special[i]].len;
	tr->mask = pow2_at_least(total * 2) - 1;
	tr->edge_key_node = malloc((tr->mask + 1) * sizeof *tr->edge_key_node);
	tr->edge_key_byte = malloc(tr->mask + 1);
	tr->edge_child = malloc((tr->mask + 1) * sizeof *tr->edge_child);
	tr->node_token = malloc(total * sizeof *tr->node_token);
	if (!tr->edge_key_node || !tr->edge_key_byte || !tr->edge_child || !tr->node_token)
		return false;
	memset(tr->edge_key_node, 0xff, (tr->mask + 1) * sizeof *tr->edge_key_node);
	tr->n_nodes = 1;
	tr->node_token[0] = -1;
	for (int32_t k = 0; k < t->n_special; k++) {
		const struct tok_entry *e = &t->tok[t->special[k]];
		int32_t node = 0;
		for (uint32_t j = 0; j < e->len; j++) {
			uint8_t byte = (uint8_t)e->text[j];
			int32_t c = trie_child(tr, node, byte);
			if (c < 0) {
				c = tr->n_nodes++;
				tr->node_token[c] = -1;
				size_t i = (((uint64_t)(uint32_t)node * 0x9e3779b97f4a7c15ull) ^ byte) & tr->mask;
				while (tr->edge_key_node[i] >= 0)
					i = (i + 1) & tr->mask;
				tr->edge_key_node[i] = node;
				tr->edge_key_byte[i] = byte;
				tr->edge_child[i] = c;
			}
			node = c;
		}
		tr->node_token[node] = t->special[k];
	}
	return true;
}

enum alice_status tok_build_pieces(struct alice_tokenizer *t); /* tokenizer_decode.c */

static enum alice_status load_tokens(struct alice_tokenizer *t, const struct alice_gguf *g,
				     struct alice_error *err)
{
	struct alice_gguf_arr toks, scores, types;
	enum alice_status st = alice_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, NULL);
	if (st == ALICE_ERR_NOT_FOUND)
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.tokens is missing");
	if (st != ALICE_OK || toks.type != ALICE_GGUF_STRING)
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.tokens is not an array of strings");
	if (toks.n == 0 || toks.n > INT32_MAX / 4)
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.tokens has a bad length");
	t->n = (int32_t)toks.n;
	bool has_scores = false, has_types = false;
	st = alice_gguf_get_arr(g, "tokenizer.ggml.scores", &scores, NULL);
	if (st == ALICE_OK) {
		if ((scores.type != ALICE_GGUF_FLOAT32 && scores.type != ALICE_GGUF_INT32) || scores.n < toks.n)
			return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.scores has a bad type or length");
		has_scores = true;
	} else if (st != ALICE_ERR_NOT_FOUND) {
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.scores is not an array");
	}
	st = alice_gguf_get_arr(g, "tokenizer.ggml.token_type", &types, NULL);
	if (st == ALICE_OK) {
		if (types.type != ALICE_GGUF_INT32 || types.n < toks.n)
			return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.token_type has a bad type or length");
		has_types = true;
	} else if (st != ALICE_ERR_NOT_FOUND) {
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.token_type is not an array");
	}
	t->tok = calloc((size_t)t->n, sizeof *t->tok);
	if (!t->tok)
		return fail(err, ALICE_ERR_NOMEM, g, "out of memory");
	size_t n_empty = 0;
	for (int32_t i = 0; i < t->n; i++) {
		struct alice_gguf_str s;
		if (alice_gguf_arr_str(&toks, (uint64_t)i, &s) != ALICE_OK || s.len > UINT32_MAX)
			return fail(err, ALICE_ERR_INVALID, g, "bad token string");
		n_empty += s.len == 0;
		t->tok[i].text = s.ptr;
		t->tok[i].len = (uint32_t)s.len;
		if (has_scores) {
			double v = 0;
			alice_gguf_arr_float(&scores, (uint64_t)i, &v);
			t->tok[i].score = (float)v;
		}
		uint32_t attr = TOK_ATTR_NORMAL;
		if (has_types) {
			int64_t ty = 0;
			alice_gguf_arr_int(&types, (uint64_t)i, &ty);
			switch (ty) { /* llama.cpp's token types -> attributes */
			case 2: attr = TOK_ATTR_UNKNOWN; break;
			case 5: attr = TOK_ATTR_UNUSED; break;
			case 1: attr = TOK_ATTR_NORMAL; break;
			case 3: attr = TOK_ATTR_CONTROL; break;
			case 4: attr = TOK_ATTR_USER_DEFINED; break;
			case 6: attr = TOK_ATTR_BYTE; break;
			default: attr = 0; break;
			}
		}
		t->tok[i].attr = attr;
	}
	if (n_empty) { /* llama.cpp names empty tokens "[EMPTY_<id>]" */
		t->owned = malloc(n_empty * 24);
		if (!t->owned)
			return fail(err, ALICE_ERR_NOMEM, g, "out of memory");
		char *p = t->owned;
		for (int32_t i = 0; i < t->n; i++) {
			if (t->tok[i].len)
				continue;
			int w = snprintf(p, 24, "[EMPTY_%d]", i);
			t->tok[i].text = p;
			t->tok[i].len = (uint32_t)w;
			p += w + 1;
		}
	}
	return build_strmap(t, g, err);
}

static enum alice_status choose_type(struct alice_tokenizer *t, const struct alice_gguf *g,
				     struct alice_error *err)
{
	struct alice_gguf_str model, pre = {"", 0};
	if (alice_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL) != ALICE_OK)
		return fail(err, ALICE_ERR_INVALID, g, "tokenizer.ggml.model is missing or not a string");
	bool has_pre = alice_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL) == ALICE_OK;
	snprintf(t->model_name, sizeof t->model_name, "%.*s", (int)(model.len < 31 ? model.len : 31), model.ptr);
	t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = t->mask = -1;
	t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = -1;
	if (str_eq(model, "llama")) {
		t->type = TOK_TYPE_SPM;
		t->pre = TOK_PRE_DEFAULT;
		t->bos = 1;
		t->eos = 2;
		t->unk = 0;
		t->add_space_prefix = true;
		t->add_bos = true;
		snprintf(t->pre_name, sizeof t->pre_name, "%.*s", has_pre ? (int)(pre.len < 63 ? pre.len : 63) : 7,
			 has_pre ? pre.ptr : "default");
		return ALICE_OK;
	}
	if (str_eq(model, "bert")) { /* WordPiece: [CLS] text [SEP], llama.cpp's default ids */
		t->type = TOK_TYPE_WPM;
		t->pre = TOK_PRE_DEFAULT;
		t->bos = 101;
		t->unk = 100;
		t->sep = 102;
		t->pad = 0;
		t->mask = 103;
		t->add_bos = t->add_sep = true;
		t->clean_spaces = true;
		/* BERT GGUFs written before the normaliser keys existed are all
		 * of lowercasing models (llama.cpp then always lowercased and
		 * stripped accents, and the bert-bge test vectors expect it) */
		t->lowercase = true;
		read_bool(g, "tokenizer.ggml.normalizer.lowercase", &t->lowercase);
		t->strip_accents = t->lowercase;
		read_bool(g, "tokenizer.ggml.normalizer.strip_accents", &t->strip_accents);
		snprintf(t->pre_name, sizeof t->pre_name, "%.*s", has_pre ? (int)(pre.len < 63 ? pre.len : 63) : 7,
			 has_pre ? pre.ptr : "default");
		return ALICE_OK;
	}
	if (str_eq(model, "gpt2")) {
		t->bos = t->eos = 11; /* llama.cpp's BPE defaults */
		t->byte_encode = true;
	} else if (str_eq(model, "gemma4")) {
		pre.ptr = "gemma4"; /* llama.cpp: gemma4 implies its pre-tokenizer */
		pre.len = 6;
		has_pre = true;
	} else {
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: tokenizer: tokenizer.ggml.model '%s' is not supported",
				  alice_gguf_path(g), t->model_name);
	}
	t->type = TOK_TYPE_BPE;
	if (!has_pre || pre.len == 0) {
		alice_log(ALICE_LOG_WARN, "%s: tokenizer: no tokenizer.ggml.pre, using 'default' (quality will suffer)",
			  alice_gguf_path(g));
		pre.ptr = "default";
		pre.len = 7;
	}
	snprintf(t->pre_name, sizeof t->pre_name, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.ptr);
	for (size_t i = 0; i < sizeof PRE_DEFS / sizeof PRE_DEFS[0]; i++) {
		if (!str_eq(pre, PRE_DEFS[i].name))
			continue;
		t->pre = PRE_DEFS[i].pre;
		t->clean_spaces = PRE_DEFS[i].clean_spaces;
		t->ignore_merges = PRE_DEFS[i].ignore_merges;
		t->add_bos = PRE_DEFS[i].add_bos;
		if (t->pre == TOK_PRE_GEMMA4) { /* U+2581 for spaces, raw UTF-8, <0xNN> bytes */
			t->escape_whitespace = true;
			t->byte_encode = false;
		}
		return ALICE_OK;
	}
	return alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: tokenizer: pre-tokenizer '%s' is not supported",
			  alice_gguf_path(g), t->pre_name);
}

static void set_eog_and_attrs(struct alice_tokenizer *t, const struct alice_gguf *g)
{
	detect_special(t, &t->eot, EOT_TEXTS);
	detect_special(t, &t->eom, EOM_TEXTS);
	detect_special(t, &t->fim_pre, FIM_PRE_TEXTS);
	detect_special(t, &t->fim_suf, FIM_SUF_TEXTS);
	detect_special(t, &t->fim_mid, FIM_MID_TEXTS);
	detect_special(t, &t->fim_pad, FIM_PAD_TEXTS);
	detect_special(t, &t->fim_rep, FIM_REP_TEXTS);
	detect_special(t, &t->fim_sep, FIM_SEP_TEXTS);
	int32_t fims[3] = {t->fim_pad, t->fim_rep, t->fim_sep};
	for (int i = 0; i < 3; i++)
		if (fims[i] >= 0)
			t->eog[fims[i]] = 1;
	for (size_t i = 0; EOG_TEXTS[i]; i++) {
		int32_t k = find_text(t, EOG_TEXTS[i]);
		if (k >= 0) {
			t->eog[k] = 1;
			t->tok[k].attr |= TOK_ATTR_CONTROL;
		}
	}
	/* gpt-oss: these are always rendered */
	static const char *const always[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
	for (size_t i = 0; always[i]; i++) {
		int32_t k = find_text(t, always[i]);
		if (k >= 0)
			t->tok[k].attr = TOK_ATTR_USER_DEFINED;
	}
	int32_t must[3] = {t->eos, t->eot, t->eom};
	for (int i = 0; i < 3; i++)
		if (must[i] >= 0)
			t->eog[must[i]] = 1;
	/* o200k_harmony / solar-open: <|end|> is not EOG next to <|return|>+<|call|>
	 * or <|calls|>+<|flush|> */
	int32_t end = find_text(t, "<|end|>"), ret = find_text(t, "<|return|>"), call = find_text(t, "<|call|>"),
		calls = find_text(t, "<|calls|>"), flush = find_text(t, "<|flush|>");
	bool has_call = (call >= 0 && t->eog[call]) || (calls >= 0 && t->eog[calls]);
	bool has_ret = ret >= 0 && t->eog[ret], has_flush = flush >= 0 && t->eog[flush];
	if (end >= 0 && t->eog[end] && ((has_ret && has_call) || (has_call && has_flush))) {
		t->eog[end] = 0;
		t->tok[end].attr = TOK_ATTR_USER_DEFINED;
	}
	/* gemma4 / paddleocr: </s> is not EOG next to <|tool_response> */
	int32_t tr = find_text(t, "<|tool_response>"), s = find_text(t, "</s>");
	if (tr >= 0 && t->eog[tr] && s >= 0 && t->eog[s]) {
		t->eog[s] = 0;
		t->tok[s].attr = TOK_ATTR_NORMAL;
	}
	/* Phi-3: special tokens swallow the whitespace after them */
	struct alice_gguf_str name;
	if (alice_gguf_get_str(g, "general.name", &name, NULL) == ALICE_OK) {
		char low[128];
		size_t n = name.len < sizeof low - 1 ? name.len : sizeof low - 1;
		for (size_t i = 0; i < n; i++)
			low[i] = (char)tolower((unsigned char)name.ptr[i]);
		low[n] = 0;
		if (strstr(low, "phi-3") || strstr(low, "phi3")) {
			for (int32_t id = 0; id < t->n; id++)
				if (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
					t->tok[id].attr |= TOK_ATTR_RSTRIP;
			int32_t k = find_text(t, "</s>");
			if (k >= 0)
				t->tok[k].attr |= TOK_ATTR_RSTRIP;
			static const char *const no_strip[] = {"<unk>", "<s>", "<|endoftext|>", NULL};
			for (size_t i = 0; no_strip[i]; i++)
				if ((k = find_text(t, no_strip[i])) >= 0)
					t->tok[k].attr &= ~(uint32_t)TOK_ATTR_RSTRIP;
		}
	}
}

enum alice_status alice_tokenizer_load(const struct alice_gguf *g, struct alice_tokenizer **out,
				       struct alice_error *err)
{
	*out = NULL;
	struct alice_tokenizer *t = calloc(1, sizeof *t);
	if (!t)
		return fail(err, ALICE_ERR_NOMEM, g, "out of memory");
	t->path = alice_gguf_path(g);
	enum alice_status st = choose_type(t, g, err);
	if (st != ALICE_OK)
		goto fail;
	read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
	if ((st = load_tokens(t, g, err)) != ALICE_OK)
		goto fail;
	if (t->type == TOK_TYPE_BPE && (st = load_merges(t, g, err)) != ALICE_OK)
		goto fail;
	for (int32_t id = 0; id < t->n; id++) /* WordPiece tries pieces up to this long */
		if (t->tok[id].len > t->max_token_len)
			t->max_token_len = t->tok[id].len;
	/* default ids outside the vocabulary are disabled */
	int32_t *defaults[] = {&t->bos, &t->eos, &t->unk, &t->sep, &t->pad, &t->mask};
	for (int i = 0; i < 6; i++)
		if (*defaults[i] >= t->n)
			*defaults[i] = -1;
	static const struct {
		const char *key;
		size_t off;
	} ids[] = {
		{"tokenizer.ggml.bos_token_id", offsetof(struct alice_tokenizer, bos)},
		{"tokenizer.ggml.eos_token_id", offsetof(struct alice_tokenizer, eos)},
		{"tokenizer.ggml.eot_token_id", offsetof(struct alice_tokenizer, eot)},
		{"tokenizer.ggml.eom_token_id", offsetof(struct alice_tokenizer, eom)},
		{"tokenizer.ggml.unknown_token_id", offsetof(struct alice_tokenizer, unk)},
		{"tokenizer.ggml.seperator_token_id", offsetof(struct alice_tokenizer, sep)},
		{"tokenizer.ggml.padding_token_id", offsetof(struct alice_tokenizer, pad)},
		{"tokenizer.ggml.mask_token_id", offsetof(struct alice_tokenizer, mask)},
		{"tokenizer.ggml.fim_pre_token_id", offsetof(struct alice_tokenizer, fim_pre)},
		{"tokenizer.ggml.fim_suf_token_id", offsetof(struct alice_tokenizer, fim_suf)},
		{"tokenizer.ggml.fim_mid_token_id", offsetof(struct alice_tokenizer, fim_mid)},
		{"tokenizer.ggml.fim_pad_token_id", offsetof(struct alice_tokenizer, fim_pad)},
		{"tokenizer.ggml.fim_rep_token_id", offsetof(struct alice_tokenizer, fim_rep)},
		{"tokenizer.ggml.fim_sep_token_id", offsetof(struct alice_tokenizer, fim_sep)},
		{"tokenizer.ggml.prefix_token_id", offsetof(struct alice_tokenizer, fim_pre)},
		{"tokenizer.ggml.suffix_token_id", offsetof(struct alice_tokenizer, fim_suf)},
		{"tokenizer.ggml.middle_token_id", offsetof(struct alice_tokenizer, fim_mid)},
	};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		read_id(t, g, ids[i].key, (int32_t *)((char *)t + ids[i].off));
	read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
	read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
	if (t->pre == TOK_PRE_GEMMA4)
		t->add_bos = true; /* as llama.cpp does for Gemma 4 */
	if (t->add_bos && t->bos < 0) {
		st = fail(err, ALICE_ERR_INVALID, g, "add_bos_token is true but there is no BOS token");
		goto fail;
	}
	if (t->add_eos && t->eos < 0) {
		st = fail(err, ALICE_ERR_INVALID, g, "add_eos_token is true but there is no EOS token");
		goto fail;
	}
	st = ALICE_ERR_NOMEM;
	t->eog = calloc((size_t)t->n, 1);
	t->special_rank = malloc((size_t)t->n * sizeof *t->special_rank);
	if (!t->eog || !t->special_rank)
		goto nomem;
	set_eog_and_attrs(t, g);

	for (int32_t id = 0; id < t->n; id++)
		if (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
			t->n_special++;
	t->special = malloc(((size_t)t->n_special + 1) * sizeof *t->special);
	struct special_key *keys = malloc(((size_t)t->n_special + 1) * sizeof *keys);
	if (!t->special || !keys) {
		free(keys);
		goto nomem;
	}
	t->n_special = 0;
	for (int32_t id = 0; id < t->n; id++)
		if (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
			keys[t->n_special++] = (struct special_key){t->tok[id].len, id};
	/* longest text first (llama.cpp's order; equal lengths by id) */
	qsort(keys, (size_t)t->n_special, sizeof *keys, cmp_special);
	for (int32_t k = 0; k < t->n_special; k++)
		t->special[k] = keys[k].id;
	free(keys);
	memset(t->special_rank, 0xff, (size_t)t->n * sizeof *t->special_rank);
	for (int32_t k = 0; k < t->n_special; k++)
		t->special_rank[t->special[k]] = k;
	if (!build_trie(t))
		goto nomem;

	static const char hex[] = "0123456789ABCDEF";
	for (int b = 0; b < 256; b++) {
		char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
		int32_t id = tok_lookup(t, buf, 6);
		if (id < 0) {
			char c = (char)b;
			id = tok_lookup(t, &c, 1);
		}
		/* llama.cpp aborts when a byte has no token at all; use <unk> */
		t->byte_tok[b] = id >= 0 ? id : t->unk;
		char u[4];
		t->gpt2_enc_len[b] = (uint8_t)alice_utf8_encode(alice_gpt2_byte_to_cp((unsigned char)b), u);
		memcpy(t->gpt2_enc[b], u, t->gpt2_enc_len[b]);
	}
	if (t->type == TOK_TYPE_SPM) {
		for (int b = 0; b < 128; b++)
			t->spm_barrier[b] = true;
		for (int32_t id = 0; id < t->n; id++) {
			const struct tok_entry *e = &t->tok[id];
			size_t n_chars = 0;
			for (uint32_t j = 0; j < e->len; j += (uint32_t)alice_utf8_seq_len((unsigned char)e->text[j]))
				n_chars++;
			if (n_chars < 2)
				continue;
			for (uint32_t j = 0; j < e->len; j++)
				if ((unsigned char)e->text[j] < 128)
					t->spm_barrier[(unsigned char)e->text[j]] = false;
		}
	}
	if ((st = tok_build_pieces(t)) != ALICE_OK)
		goto nomem;
	*out = t;
	return ALICE_OK;
nomem:
	st = fail(err, ALICE_ERR_NOMEM, g, "out of memory");
fail:
	alice_tokenizer_free(t);
	return st;
}

void alice_tokenizer_free(struct alice_tokenizer *t)
{
	if (!t)
		return;
	free(t->tok);
	free(t->map.slots);
	free(t->merges.items);
	free(t->merges.slots);
	free(t->owned);
	free(t->eog);
	free(t->special);
	free(t->special_rank);
	free(t->trie.edge_key_node);
	free(t->trie.edge_key_byte);
	free(t->trie.edge_child);
	free(t->trie.node_token);
	free(t->pieces);
	free(t->piece_off);
	free(t);
}

/* ---- accessors ------------------------------------------------------------- */

int32_t alice_tokenizer_n_vocab(const struct alice_tokenizer *t) { return t->n; }
int32_t alice_tokenizer_bos(const struct alice_tokenizer *t) { return t->bos; }
int32_t alice_tokenizer_eos(const struct alice_tokenizer *t) { return t->eos; }
int32_t alice_tokenizer_eot(const struct alice_tokenizer *t) { return t->eot; }
int32_t alice_tokenizer_eom(const struct alice_tokenizer *t) { return t->eom; }
int32_t alice_tokenizer_unk(const struct alice_tokenizer *t) { return t->unk; }
int32_t alice_tokenizer_pad(const struct alice_tokenizer *t) { return t->pad; }
bool alice_tokenizer_add_bos(const struct alice_tokenizer *t) { return t->add_bos; }
bool alice_tokenizer_add_eos(const struct alice_tokenizer *t) { return t->add_eos; }
const char *alice_tokenizer_model_name(const struct alice_tokenizer *t) { return t->model_name; }
const char *alice_tokenizer_pre_name(const struct alice_tokenizer *t) { return t->pre_name; }

bool alice_tokenizer_is_eog(const struct alice_tokenizer *t, int32_t id)
{
	return id >= 0 && id < t->n && t->eog[id];
}

bool alice_tokenizer_is_control(const struct alice_tokenizer *t, int32_t id)
{
	return id >= 0 && id < t->n && (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN));
}

const char *alice_tokenizer_token_text(const struct alice_tokenizer *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n) {
		*len = 0;
		return NULL;
	}
	*len = t->tok[id].len;
	return t->tok[id].text;
}

int32_t alice_tokenizer_find(const struct alice_tokenizer *t, const char *text, size_t len)
{
	return tok_lookup(t, text, len);
}

/* ---- encode ------------------------------------------------------------------ */

struct st_match {
	size_t pos;
	int32_t id;
	int32_t rank;
};

static int cmp_match(const void *a, const void *b)
{
	const struct st_match *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static bool is_ascii_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static enum alice_status encode_text(const struct alice_tokenizer *t, const char *s, size_t n, bool prefix_space,
				     struct tok_ivec *out)
{
	if (t->type == TOK_TYPE_BPE)
		return tok_bpe_encode(t, s, n, out);
	if (t->type == TOK_TYPE_WPM)
		return tok_wpm_encode(t, s, n, out);
	/* SPM: optional leading space, then every space as U+2581 */
	size_t n_sp = prefix_space;
	for (size_t i = 0; i < n; i++)
		n_sp += s[i] == ' ';
	char *buf = malloc(n + 2 * n_sp + 3 + 1);
	if (!buf)
		return ALICE_ERR_NOMEM;
	size_t o = 0;
	if (prefix_space) {
		memcpy(buf, "\xe2\x96\x81", 3);
		o = 3;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == ' ') {
			memcpy(buf + o, "\xe2\x96\x81", 3);
			o += 3;
		} else {
			buf[o++] = s[i];
		}
	}
	enum alice_status st = tok_spm_encode(t, buf, o, out);
	free(buf);
	return st;
}

enum alice_status alice_tokenizer_encode(const struct alice_tokenizer *t, const char *text, size_t len,
					 bool add_special, bool parse_special, int32_t **tokens,
					 size_t *n_tokens, struct alice_error *err)
{
	enum alice_status st = ALICE_ERR_NOMEM;
	struct tok_ivec out = {0};
	struct st_match *cand = NULL;
	uint8_t *used = NULL;
	size_t n_cand = 0, cap_cand = 0;
	if (len > INT32_MAX)
		return alice_fail(err, ALICE_ERR_RANGE, "tokenizer: text of %zu bytes is too long", len);

	/* 1. every place where an eligible special token's text occurs */
	for (size_t p = 0; p < len && t->n_special; p++) {
		int32_t node = 0;
		for (size_t q = p; q < len; q++) {
			node = trie_child(&t->trie, node, (uint8_t)text[q]);
			if (node < 0)
				break;
			int32_t id = t->trie.node_token[node];
			if (id < 0)
				continue;
			if (!parse_special && (t->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))
				continue; /* a control token typed as text stays text */
			if (n_cand == cap_cand) {
				cap_cand = cap_cand ? cap_cand * 2 : 64;
				struct st_match *c = realloc(cand, cap_cand * sizeof *c);
				if (!c)
					goto out;
				cand = c;
			}
			cand[n_cand++] = (struct st_match){p, id, t->special_rank[id]};
		}
	}
	/* 2. claim them longest token first, each left to right, never
	 *    overlapping what is claimed already (llama.cpp's order) */
	size_t n_acc = 0;
	if (n_cand) {
		used = calloc(len, 1); /* 0 text, 1 token, 2 stripped whitespace */
		if (!used)
			goto out;
		qsort(cand, n_cand, sizeof *cand, cmp_match);
		for (size_t k = 0; k < n_cand; k++) {
			size_t p = cand[k].pos, l = t->tok[cand[k].id].len;
			bool free_ = true;
			for (size_t q = p; q < p + l && free_; q++)
				free_ = used[q] == 0;
			if (!free_)
				continue;
			memset(used + p, 1, l);
			cand[n_acc++] = cand[k];
			uint32_t attr = t->tok[cand[k].id].attr;
			if (attr & TOK_ATTR_LSTRIP)
				for (size_t q = p; q > 0 && used[q - 1] == 0 && is_ascii_space(text[q - 1]); q--)
					used[q - 1] = 2;
			if (attr & TOK_ATTR_RSTRIP)
				for (size_t q = p + l; q < len && used[q] == 0 && is_ascii_space(text[q]); q++)
					used[q] = 2;
		}
		/* sort accepted matches by position */
		for (size_t k = 0; k < n_acc; k++)
			cand[k].rank = 0;
		qsort(cand, n_acc, sizeof *cand, cmp_match);
	}
	/* 3. tokenize fragment by fragment */
	bool prev_special = true; /* SPM: a space prefix for text at the start / after a token */
	if (add_special && t->add_bos && !tok_ivec_push(&out, t->bos))
		goto out;
	size_t next = 0;
	for (size_t p = 0; p < len;) {
		if (used && used[p] == 2) {
			p++;
			continue;
		}
		if (used && used[p] == 1) {
			if (!tok_ivec_push(&out, cand[next].id))
				goto out;
			p += t->tok[cand[next].id].len;
			next++;
			prev_special = true;
			continue;
		}
		size_t q = p;
		while (q < len && (!used || used[q] == 0))
			q++;
		st = encode_text(t, text + p, q - p, t->add_space_prefix && prev_special, &out);
		if (st != ALICE_OK)
			goto out;
		st = ALICE_ERR_NOMEM;
		prev_special = false;
		p = q;
	}
	if (add_special && t->add_eos && !tok_ivec_push(&out, t->eos))
		goto out;
	if (add_special && t->add_sep && t->sep >= 0 && !tok_ivec_push(&out, t->sep))
		goto out;
	int32_t *v = realloc(*tokens, (*n_tokens + out.n + 1) * sizeof *v);
	if (!v)
		goto out;
	if (out.n)
		memcpy(v + *n_tokens, out.v, out.n * sizeof *v);
	*tokens = v;
	*n_tokens += out.n;
	st = ALICE_OK;
out:
	if (st == ALICE_ERR_NOMEM)
		alice_error_set(err, "%s: tokenizer: out of memory", t->path);
	free(out.v);
	free(cand);
	free(used);
	return st;
}
