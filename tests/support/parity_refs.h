/* parity_refs.h — reads the llama.cpp reference files of the parity
 * fixtures (fixtures/refs/<model>.json + .bin, schema llama-cpp-reference/1)
 * into plain structs for the parity tests. The caller frees with
 * alice_parity_refs_free. */
#ifndef ALICE_TEST_PARITY_REFS_H
#define ALICE_TEST_PARITY_REFS_H

#include <stdbool.h>
#include <stdint.h>

#define ALICE_REF_TOPK 10

struct alice_ref_top {
	int32_t id[ALICE_REF_TOPK];
	float logit[ALICE_REF_TOPK];
	float lse;
};

struct alice_ref_prompt {
	char *id;          /* "plain", "chat", ... */
	char *kind;        /* "text" | "chat" */
	char *text;        /* the exact text that was tokenized */
	bool add_special, parse_special;
	int32_t n_tokens;
	int32_t *tokens;
	struct alice_ref_top *positions; /* [n_tokens] */
	int32_t last_logits_row;         /* -1 if none */
	int32_t n_gen;
	int32_t *gen_tokens;             /* [n_gen] */
	struct alice_ref_top *gen_steps; /* [n_gen] */
	char *gen_text;
	int32_t first_eog_step;          /* -1 if none */
};

struct alice_parity_refs {
	char *model_file;
	int32_t n_vocab;
	bool add_bos;
	int32_t bos, eos;
	int32_t n_prompts;
	struct alice_ref_prompt *prompts;
	int32_t bin_rows;
	float *bin;                      /* [bin_rows * n_vocab] */
};

/* Load <fixtures>/refs/<name>.json and its .bin. NULL on failure with a
 * message in err (len bytes). */
struct alice_parity_refs *alice_parity_refs_load(const char *fixtures_dir, const char *name, char *err,
						 int err_len);
void alice_parity_refs_free(struct alice_parity_refs *r);

#endif
