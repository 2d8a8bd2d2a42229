/* alice-mkmodel — write a synthetic GGUF of a named real shape (--shape) or
 * of any registered architecture at small dims (--arch), with seeded random
 * weights and the tokenizer of a vocab GGUF, so benchmarks need no
 * downloads. The tensor table is the architecture's own (core/synth.c);
 * this file only names the shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alice/gguf.h"
#include "alice/quant.h"
#include "alice/synth.h"

/* A real model's shape: the common dims, then its family's own keys. */
struct shape {
	const char *name, *arch, *desc;
	int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
	float rope_theta, rms_eps;
	int tied;
	float llama3_factor; /* > 0: rope_freqs with Llama-3.1 scaling */
	const char *extra;   /* family keys, "key=value ..." (synth.h) */
};

static const struct shape shapes[] = {
	{"llama-1b", "llama", "Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.f, 1e-5f, 1, 32.f, ""},
	{"llama-3b", "llama", "Llama-3.2-3B", 3072, 28, 24, 8, 128, 8192, 128256, 131072, 500000.f, 1e-5f, 1, 32.f, ""},
	{"llama-8b", "llama", "Llama-3.1-8B", 4096, 32, 32, 8, 128, 14336, 128256, 131072, 500000.f, 1e-5f, 0, 8.f, ""},
	{"qwen2-0.5b", "qwen2", "Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1e6f, 1e-6f, 1, 0, ""},
	{"qwen2-7b", "qwen2", "Qwen2.5-7B", 3584, 28, 28, 4, 128, 18944, 152064, 32768, 1e6f, 1e-6f, 0, 0, ""},
	{"qwen3-0.6b", "qwen3", "Qwen3-0.6B", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, 1, 0, ""},
	{"gemma2-2b", "gemma2", "Gemma-2-2B", 2304, 26, 8, 4, 256, 9216, 256000, 8192, 10000.f, 1e-6f, 1, 0,
	 "attn_logit_softcapping=50.0 final_logit_softcapping=30.0 attention.sliding_window=4096"},
	{"qwen35-0.8b", "qwen35", "Qwen3.5-0.8B", 1024, 24, 8, 2, 256, 3584, 248320, 262144, 1e7f, 1e-6f, 1, 0,
	 "rope.dimension_count=64 rope.dimension_sections=11,11,10,0 full_attention_interval=4 ssm.conv_kernel=4 "
	 "ssm.state_size=128 ssm.group_count=16 ssm.time_step_rank=16 ssm.inner_size=2048"},
	/* n_vocab 0: the vocab file's size */
	{"tiny", "llama", "tiny test model", 256, 2, 4, 2, 64, 512, 0, 2048, 10000.f, 1e-5f, 1, 0, ""},
};

/* File types: a base type for 2-D weights plus the K-quant "M" mixes. */
struct ftype {
	const char *name;
	uint32_t base;
	int mix; /* Q4_K_M/Q5_K_M rule (some attn_v / ffn_down get Q6_K) */
};

static const struct ftype ftypes[] = {
	{"F32", ALICE_TYPE_F32, 0}, {"F16", ALICE_TYPE_F16, 0}, {"BF16", ALICE_TYPE_BF16, 0},
	{"Q8_0", ALICE_TYPE_Q8_0, 0}, {"Q4_0", ALICE_TYPE_Q4_0, 0}, {"Q4_1", ALICE_TYPE_Q4_1, 0},
	{"Q5_0", ALICE_TYPE_Q5_0, 0}, {"Q5_1", ALICE_TYPE_Q5_1, 0}, {"Q2_K", ALICE_TYPE_Q2_K, 0},
	{"Q3_K", ALICE_TYPE_Q3_K, 0}, {"Q4_K", ALICE_TYPE_Q4_K, 0}, {"Q5_K", ALICE_TYPE_Q5_K, 0},
	{"Q6_K", ALICE_TYPE_Q6_K, 0}, {"Q4_K_M", ALICE_TYPE_Q4_K, 1}, {"Q5_K_M", ALICE_TYPE_Q5_K, 1},
	{"MXFP4", ALICE_TYPE_MXFP4, 0}, {"Q1_0", ALICE_TYPE_Q1_0, 0},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-mkmodel (--shape NAME | --arch ARCH) --type TYPE --vocab VOCAB.gguf -o OUT.gguf\n"
		   "                     [--kv \"key=value ...\"] [--layers N] [--seed N] [--threads N]\n  shapes:");
	for (size_t i = 0; i < COUNT(shapes); i++)
		fprintf(f, " %s", shapes[i].name);
	fprintf(f, "\n  archs (small default dims):");
	for (size_t i = 0; alice_synth_arch(i); i++)
		fprintf(f, " %s", alice_synth_arch(i));
	fprintf(f, "\n  types:");
	for (size_t i = 0; i < COUNT(ftypes); i++)
		fprintf(f, " %s", ftypes[i].name);
	fprintf(f, "\n  --vocab: a GGUF whose tokenizer.* keys are copied (its token count may not exceed the "
		   "shape's vocabulary; 'tiny' and --arch take the vocab's size)\n"
		   "  --kv: metadata over the shape, keys after \"<arch>.\" (\"block_count=4 "
		   "attention.sliding_window=64\"); floats need a '.' or an exponent\n");
}

/* The shape's common dims as "key=value" words, then its family's. */
static void shape_words(const struct shape *sh, char *out, size_t cap)
{
	int n = snprintf(out, cap,
			 "context_length=%d embedding_length=%d block_count=%d feed_forward_length=%d "
			 "attention.head_count=%d attention.head_count_kv=%d attention.key_length=%d "
			 "attention.value_length=%d rope.dimension_count=%d attention.layer_norm_rms_epsilon=%g "
			 "rope.freq_base=%.1f ",
			 sh->n_ctx, sh->n_embd, sh->n_layer, sh->n_ff, sh->n_head, sh->n_head_kv, sh->head_dim,
			 sh->head_dim, sh->head_dim, sh->rms_eps, sh->rope_theta);
	if (n > 0 && (size_t)n < cap && sh->n_vocab)
		n += snprintf(out + n, cap - (size_t)n, "vocab_size=%d ", sh->n_vocab);
	if (n > 0 && (size_t)n < cap)
		snprintf(out + n, cap - (size_t)n, "%s", sh->extra);
}

int main(int argc, char **argv)
{
	const char *shape_name = NULL, *arch = NULL, *type_name = NULL, *vocab_path = NULL, *out = NULL, *kv = "";
	uint64_t seed = 42;
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), layers = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
		if (!v) { fprintf(stderr, "alice-mkmodel: %s needs a value\n", a); usage(stderr); return 2; }
		if (!strcmp(a, "--shape")) shape_name = v;
		else if (!strcmp(a, "--arch")) arch = v;
		else if (!strcmp(a, "--type")) type_name = v;
		else if (!strcmp(a, "--vocab")) vocab_path = v;
		else if (!strcmp(a, "-o")) out = v;
		else if (!strcmp(a, "--kv")) kv = v;
		else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--threads")) threads = atoi(v);
		else if (!strcmp(a, "--layers")) layers = atoi(v);
		else { fprintf(stderr, "alice-mkmodel: unknown option %s\n", a); usage(stderr); return 2; }
		i++;
	}
	if (!shape_name == !arch || !type_name || !vocab_path || !out) { usage(stderr); return 2; }
	const struct shape *sh = NULL;
	for (size_t i = 0; shape_name && i < COUNT(shapes); i++)
		if (!strcmp(shapes[i].name, shape_name)) sh = &shapes[i];
	const struct ftype *ft = NULL;
	for (size_t i = 0; i < COUNT(ftypes); i++)
		if (!strcasecmp(ftypes[i].name, type_name)) ft = &ftypes[i];
	if (shape_name && !sh) { fprintf(stderr, "alice-mkmodel: unknown shape '%s'\n", shape_name); usage(stderr); return 2; }
	if (!ft) { fprintf(stderr, "alice-mkmodel: unknown type '%s'\n", type_name); usage(stderr); return 2; }

	/* the shape: its words (or the arch's defaults), --kv, --layers */
	char words[2048], layer_word[48] = "", name[256];
	words[0] = 0;
	if (sh)
		shape_words(sh, words, sizeof(words));
	if (layers > 0)
		snprintf(layer_word, sizeof(layer_word), " block_count=%d", layers);
	size_t wl = strlen(words);
	snprintf(words + wl, sizeof(words) - wl, " %s%s", kv, layer_word);
	if (strlen(words) + 1 >= sizeof(words)) { fprintf(stderr, "alice-mkmodel: --kv is too long\n"); return 2; }
	const char *label = sh ? sh->name : arch;
	snprintf(name, sizeof(name), "%s (synthetic, random weights, %s)", sh ? sh->desc : arch, ft->name);

	struct alice_error err = {{0}};
	struct alice_gguf *voc = NULL;
	if (alice_gguf_open(vocab_path, &voc, &err) != ALICE_OK) {
		fprintf(stderr, "alice-mkmodel: %s\n", err.msg);
		return 1;
	}
	struct alice_synth_params p = {
		.arch = sh ? sh->arch : arch,
		.shape = words,
		.name = name,
		.type = ft->base,
		.k_mix = ft->mix != 0,
		.tied = sh ? sh->tied != 0 : true,
		.rope_freqs_factor = sh ? sh->llama3_factor : 0.0f,
		.vocab = voc,
		.seed = seed,
		.n_threads = threads,
	};
	enum alice_status st = alice_synth_write(&p, out, &err);
	alice_gguf_close(voc);
	if (st != ALICE_OK) {
		fprintf(stderr, "alice-mkmodel: %s: %s\n", label, err.msg);
		return 1;
	}
	printf("wrote %s: %s shape (%s), %s\n", out, label, p.arch, ft->name);
	return 0;
}
