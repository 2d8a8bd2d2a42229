/* refs.h — the tokenizer's view of the llama.cpp reference files
 * (fixtures/refs/<model>.json, schema llama-cpp-reference/1): per prompt the
 * tokenized text and its ids and pieces, and the greedy continuation's ids
 * with llama_detokenize's text. Everything is owned by the struct; free with
 * alice_tok_refs_free. */
#ifndef ALICE_TEST_REFS_H
#define ALICE_TEST_REFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct alice_tok_ref_prompt {
	char *id;              /* "plain", "chat", ... */
	char *text;            /* exact text tokenized (may contain NUL: use text_len) */
	size_t text_len;
	bool add_special, parse_special;
	int32_t *tokens;
	size_t n_tokens;
	char **pieces;         /* llama_token_to_piece(special=true) bytes per token */
	size_t *piece_lens;
	int32_t *gen_tokens;   /* greedy continuation */
	size_t n_gen;
	char *gen_text;        /* llama_detokenize(unparse_special=false) bytes (from text_hex) */
	size_t gen_text_len;
	char *gen_text_special; /* unparse_special=true; NULL unless the text was valid UTF-8 */
	size_t gen_text_special_len;
};

struct alice_tok_refs {
	char *model_file;
	int32_t n_vocab, bos, eos;
	bool add_bos, add_eos;
	size_t n_prompts;
	struct alice_tok_ref_prompt *prompts;
};

/* Load one refs JSON file. Returns NULL and writes a message to err on failure. */
struct alice_tok_refs *alice_tok_refs_load(const char *path, char *err, size_t err_len);
void alice_tok_refs_free(struct alice_tok_refs *r);

#endif
