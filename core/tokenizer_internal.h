/* tokenizer_internal.h — shared state of core/tokenizer*.c and pretokenizer.c
 * (private to the core). */
#ifndef ALICE_TOKENIZER_INTERNAL_H
#define ALICE_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/tokenizer.h"
#include "unicode.h"

/* Token attributes (llama.cpp's llama_token_attr bits). */
enum {
	TOK_ATTR_UNKNOWN = 1 << 0,
	TOK_ATTR_UNUSED = 1 << 1,
	TOK_ATTR_NORMAL = 1 << 2,
	TOK_ATTR_CONTROL = 1 << 3,
	TOK_ATTR_USER_DEFINED = 1 << 4,
	TOK_ATTR_BYTE = 1 << 5,
	TOK_ATTR_LSTRIP = 1 << 7,
	TOK_ATTR_RSTRIP = 1 << 8,
};

enum tok_type { TOK_TYPE_SPM, TOK_TYPE_BPE, TOK_TYPE_WPM };

/* Pre-tokenizer split rules (llama.cpp's regex lists, hand-written). */
enum tok_pre {
	TOK_PRE_DEFAULT, /* llama.cpp's fallback list of four regexes */
	TOK_PRE_GPT2,
	TOK_PRE_LLAMA3,
	TOK_PRE_QWEN2,
	TOK_PRE_QWEN35,
	TOK_PRE_GEMMA4, /* runs of '\n' / of everything else */
};

struct tok_entry {
	const char *text;
	uint32_t len;
	uint32_t attr;
	float score;
};

/* Open-addressing hash of byte strings -> token id. A slot holds the upper
 * 32 bits of the key's hash and id + 1 (0: empty), so most misses and
 * collisions are settled without touching the token table. */
struct tok_strmap {
	uint64_t *slots;
	size_t mask;
};

struct tok_merge {
	const char *left;
	const char *right;
	uint32_t left_len, right_len;
	int32_t rank;
};

struct tok_mergemap {
	struct tok_merge *items;
	size_t n;
	int32_t *slots; /* index into items or -1 */
	size_t mask;
};

/* Trie of special-token texts for the special-token partition. */
struct tok_trie {
	int32_t *edge_key_node; /* hash slot -> parent node (-1 empty) */
	uint8_t *edge_key_byte;
	int32_t *edge_child;
	size_t mask;
	int32_t n_nodes;
	int32_t *node_token; /* token id ending at node, or -1 */
};

struct alice_tokenizer {
	enum tok_type type;
	enum tok_pre pre;
	char model_name[32];
	char pre_name[64];
	const char *path; /* for error messages (owned by the gguf handle) */

	int32_t n;
	struct tok_entry *tok;
	struct tok_strmap map;
	struct tok_mergemap merges;
	char *owned; /* storage for replaced empty token texts */

	int32_t bos, eos, eot, eom, unk, sep, pad, mask;
	int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
	bool add_bos, add_eos, add_space_prefix;
	bool escape_whitespace; /* BPE over U+2581-escaped text (gemma4) */
	bool byte_encode;       /* GPT-2 byte alphabet */
	bool clean_spaces, ignore_merges;
	/* WordPiece: [SEP] after the text when adding special tokens; the
	 * normaliser's options; the longest token text in bytes */
	bool add_sep, lowercase, strip_accents;
	size_t max_token_len;
	uint8_t *eog; /* n flags */

	int32_t *special; /* control/user-defined/unknown ids, longest text first */
	int32_t n_special;
	int32_t *special_rank; /* id -> position in special[], or -1 */
	struct tok_trie trie;

	char *pieces; /* render_special=true piece of every token */
	size_t *piece_off; /* n+1 offsets into pieces */

	int32_t byte_tok[256]; /* SPM byte fallback token per byte, -1 if none */
	bool spm_barrier[256]; /* ASCII bytes in no multi-character token */
	char gpt2_enc[256][3]; /* GPT-2 alphabet UTF-8 per byte */
	uint8_t gpt2_enc_len[256];
};

/* Growable int32 array. */
struct tok_ivec {
	int32_t *v;
	size_t n, cap;
};
bool tok_ivec_push(struct tok_ivec *a, int32_t x);

int32_t tok_lookup(const struct alice_tokenizer *t, const char *s, size_t n);
int32_t tok_merge_rank(const struct alice_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn);
uint64_t tok_hash(const char *s, size_t n);

/* Tokenize text that has no special tokens in it; appends to out. */
enum alice_status tok_spm_encode(const struct alice_tokenizer *t, const char *text, size_t len,
				 struct tok_ivec *out);
enum alice_status tok_bpe_encode(const struct alice_tokenizer *t, const char *text, size_t len,
				 struct tok_ivec *out);
enum alice_status tok_wpm_encode(const struct alice_tokenizer *t, const char *text, size_t len,
				 struct tok_ivec *out);

/* Split cpts[0..n) into words for the pre-tokenizer `pre`; word lengths (in
 * code points) are appended to *lens. false on allocation failure. */
bool tok_pretokenize(enum tok_pre pre, const uint32_t *cpts, size_t n, struct tok_ivec *lens);

#endif
