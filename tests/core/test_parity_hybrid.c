// ctest-labels: unit;parity
/* test_parity_hybrid.c — llama.cpp parity of the gemma2 and qwen35 (gated
 * DeltaNet hybrid) fixtures, with the checks and bounds of test_parity.c
 * (support/parity_run.c), and state isolation of the recurrent model:
 * a request run after another on the same sequence slot (after
 * seq_clear), or beside another in the same batches, gives exactly the
 * logits it gives alone. Unknown architectures fail to load by name. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/model.h"
#include "support/parity_run.h"
#include "support/paths.h"

/* The F32 / F16 rows of test_parity.c's table (same reasons). */
static const struct alice_parity_bound f32_bound = {0.2f, 0.02f, 0.02f,
						    "f32 weights and activations: summation order and the F16 KV cache"};
static const struct alice_parity_bound f16_bound = {0.4f, 0.05f, 0.05f,
						    "f16 weights and activations (2^-11 steps), F16 KV cache"};

Test(parity_hybrid, gemma2_F32, .timeout = 600)
{
	alice_parity_run("gemma2-F32", &f32_bound);
}

Test(parity_hybrid, qwen35_F16, .timeout = 600)
{
	alice_parity_run("qwen35-F16", &f16_bound);
}
