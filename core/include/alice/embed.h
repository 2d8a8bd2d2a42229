/* embed.h — embeddings: how a sequence's hidden states become one vector.
 *
 * An embeddings context (alice_context_params.embeddings) hands back, per
 * output row, the model's final hidden state (after the output norm for a
 * decoder; after the last block for an encoder such as BERT) instead of
 * logits. Pooling reduces a sequence's rows to one vector, as llama.cpp's
 * LLAMA_POOLING_TYPE_* do; the values match GGUF's <arch>.pooling_type. */
#ifndef ALICE_EMBED_H
#define ALICE_EMBED_H

#include <stdbool.h>
#include <stdint.h>

enum alice_pooling {
	ALICE_POOLING_UNSPECIFIED = -1,
	ALICE_POOLING_NONE = 0, /* one vector per token */
	ALICE_POOLING_MEAN = 1, /* the mean of the rows */
	ALICE_POOLING_CLS = 2,  /* the first row (BERT's [CLS]) */
	ALICE_POOLING_LAST = 3, /* the last row (Qwen3-Embedding) */
};

/* "none", "mean", "cls", "last"; "?" for anything else. */
const char *alice_pooling_name(int pooling);
/* The pooling named s; false if it is none of the four names. */
bool alice_pooling_parse(const char *s, enum alice_pooling *out);

/* Pool n_rows rows of n_embd floats (row-major, row i at rows + i*n_embd)
 * into out[n_embd] (pooling MEAN, CLS or LAST; n_rows >= 1). The mean is
 * summed in double in row order, so it does not depend on anything else. */
void alice_embd_pool(const float *rows, int32_t n_rows, int32_t n_embd, enum alice_pooling pooling, float *out);
/* Scale v[n] to unit Euclidean length (llama.cpp's embd_normalize = 2); a
 * zero vector stays zero. */
void alice_embd_normalize(float *v, int32_t n);

#endif
