/* synth.h — synthetic GGUF models of any registered architecture, for
 * benchmarks and tests that need no downloads (alice-mkmodel, the tests).
 *
 * A shape is the architecture's metadata as "key=value" words, keys after
 * "<arch>." ("embedding_length=2048 attention.head_count=32"); a value is an
 * integer, a float (written with a '.' or an exponent: "1e-5", "500000.0"),
 * or a comma-separated integer array ("3,3,2,0"). Later words override
 * earlier ones, and the given shape overrides the small default one (common
 * keys, then the family's own), so "" alone is a tiny model of the family.
 *
 * The tensors are the architecture's own table, the one the loader binds,
 * with the shapes computed from the hyper-parameters as the loader reads
 * them back from the written metadata. Weights are seeded random (each row
 * from seed, tensor and row: the file does not depend on the thread count),
 * quantized with core/quant's reference quantizers. */
#ifndef ALICE_SYNTH_H
#define ALICE_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/gguf.h"
#include "alice/status.h"

struct alice_synth_params {
	const char *arch;        /* a registered architecture (general.architecture) */
	const char *shape;       /* "key=value ..." over the default shape; NULL = "" */
	const char *name;        /* general.name; NULL = "<arch> (synthetic)" */
	uint32_t type;           /* ALICE_TYPE_* of the 2-D weights; F32-only and 1-D tensors stay F32 */
	bool k_mix;              /* Q4_K_M / Q5_K_M rule: some layers' attn_v and ffn_down get Q6_K */
	bool tied;               /* leave output.weight out: the head reuses token_embd */
	float rope_freqs_factor; /* > 0: rope_freqs.weight, where the table has it, with Llama-3.1 scaling */
	/* Its tokenizer.* keys are copied (borrowed). vocab_size defaults to its
	 * token count and may not be below it. */
	const struct alice_gguf *vocab;
	uint64_t seed;
	int n_threads; /* < 1: 1 */
};

/* The registered architectures, in registry order; NULL past the end. */
const char *alice_synth_arch(size_t i);

/* Writes the model to path. Errors name the shape's key or the tensor (a
 * type that cannot hold a row), or the file. */
enum alice_status alice_synth_write(const struct alice_synth_params *p, const char *path,
				    struct alice_error *err);

#endif
