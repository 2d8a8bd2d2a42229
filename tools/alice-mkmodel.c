/* alice-mkmodel — write a GGUF with the exact tensor shapes and metadata of a
 * named real model, seeded random weights (quantized with core/quant's
 * reference quantizers) and the tokenizer of a vocab GGUF. Benchmarks need no
 * downloads. Rows are generated from (seed, tensor, row), so the output does
 * not depend on the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alice/gguf.h"
#include "alice/gguf_write.h"
#include "alice/quant.h"

struct shape {
	const char *name, *arch, *desc;
	int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
	float rope_theta, rms_eps;
	int tied, qkv_bias, qk_norm;
	float llama3_factor; /* > 0: write rope_freqs for llama3 scaling */
};

static const struct shape shapes[] = {
	{"llama-1b", "llama", "Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.f, 1e-5f, 1, 0, 0, 32.f},
	{"llama-3b", "llama", "Llama-3.2-3B", 3072, 28, 24, 8, 128, 8192, 128256, 131072, 500000.f, 1e-5f, 1, 0, 0, 32.f},
	{"llama-8b", "llama", "Llama-3.1-8B", 4096, 32, 32, 8, 128, 14336, 128256, 131072, 500000.f, 1e-5f, 0, 0, 0, 8.f},
	{"qwen2-0.5b", "qwen2", "Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1e6f, 1e-6f, 1, 1, 0, 0},
	{"qwen2-7b", "qwen2", "Qwen2.5-7B", 3584, 28, 28, 4, 128, 18944, 152064, 32768, 1e6f, 1e-6f, 0, 1, 0, 0},
	{"qwen3-0.6b", "qwen3", "Qwen3-0.6B", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, 1, 0, 1, 0},
	{"tiny", "llama", "tiny test model", 256, 2, 4, 2, 64, 512, 0, 2048, 10000.f, 1e-5f, 1, 0, 0, 0},
};

/* File types: a base type for 2-D weights plus the K-quant "M" mixes. */
struct ftype {
	const char *name;
	uint32_t base;
	int mix; /* 0 pure; 1 = Q4_K_M/Q5_K_M rule (some attn_v / ffn_down get Q6_K) */
};

static const struct ftype ftypes[] = {
	{"F32", ALICE_TYPE_F32, 0}, {"F16", ALICE_TYPE_F16, 0}, {"BF16", ALICE_TYPE_BF16, 0},
	{"Q8_0", ALICE_TYPE_Q8_0, 0}, {"Q4_0", ALICE_TYPE_Q4_0, 0}, {"Q4_1", ALICE_TYPE_Q4_1, 0},
	{"Q5_0", ALICE_TYPE_Q5_0, 0}, {"Q5_1", ALICE_TYPE_Q5_1, 0}, {"Q2_K", ALICE_TYPE_Q2_K, 0},
	{"Q3_K", ALICE_TYPE_Q3_K, 0}, {"Q4_K", ALICE_TYPE_Q4_K, 0}, {"Q5_K", ALICE_TYPE_Q5_K, 0},
	{"Q6_K", ALICE_TYPE_Q6_K, 0}, {"Q4_K_M", ALICE_TYPE_Q4_K, 1}, {"Q5_K_M", ALICE_TYPE_Q5_K, 1},
	{"MXFP4", ALICE_TYPE_MXFP4, 0}, {"Q1_0", ALICE_TYPE_Q1_0, 0},
};

struct gen {
	uint64_t seed;
	int threads;
	const struct shape *sh;
	int n_vocab;
	int tensor_index; /* bumped per tensor for distinct streams */
};

struct tensor_job {
	struct gen *g;
	uint32_t type;
	int64_t ne0, rows;
	float stddev, mean;
	uint64_t stream;
	uint8_t *dst;
	size_t row_bytes;
	int64_t r0, r1;
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_gauss(float *x, int64_t n, uint64_t seed, float mean, float sd)
{
	uint64_t s = seed;
	for (int64_t i = 0; i < n; i += 2) {
		double u1 = ((splitmix(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
		double u2 = ((splitmix(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
		double r = sqrt(-2.0 * log(u1));
		x[i] = (float)(mean + sd * r * cos(2 * M_PI * u2));
		if (i + 1 < n)
			x[i + 1] = (float)(mean + sd * r * sin(2 * M_PI * u2));
	}
}

static void *tensor_worker(void *arg)
{
	struct tensor_job *j = arg;
	float *row = malloc(sizeof(float) * (size_t)j->ne0);
	if (!row)
		return (void *)1;
	for (int64_t r = j->r0; r < j->r1; r++) {
		fill_gauss(row, j->ne0, j->stream ^ (uint64_t)r * 0x2545f4914f6cdd1dull, j->mean, j->stddev);
		uint8_t *d = j->dst + (size_t)r * j->row_bytes;
		if (j->type == ALICE_TYPE_F32)
			memcpy(d, row, sizeof(float) * (size_t)j->ne0);
		else if (!alice_quantize(j->type, row, d, j->ne0)) {
			free(row);
			return (void *)1;
		}
	}
	free(row);
	return NULL;
}

struct tensor_desc {
	struct gen *g;
	uint32_t type;
	int64_t ne0, rows;
	float mean, stddev;
	uint64_t stream;
};

static enum alice_status fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes,
				     struct alice_error *err)
{
	struct tensor_desc *td = user;
	int nt = td->g->threads;
	struct tensor_job jobs[256];
	pthread_t th[256];
	if (nt > 256)
		nt = 256;
	size_t rb = alice_row_size(td->type, td->ne0);
	for (int t = 0; t < nt; t++) {
		jobs[t] = (struct tensor_job){td->g, td->type, td->ne0, td->rows, td->stddev, td->mean,
					      td->stream, dst, rb, td->rows * t / nt, td->rows * (t + 1) / nt};
		pthread_create(&th[t], NULL, tensor_worker, &jobs[t]);
	}
	int bad = 0;
	for (int t = 0; t < nt; t++) {
		void *r;
		pthread_join(th[t], &r);
		bad |= r != NULL;
	}
	if (bad)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "cannot quantize %s to %s", name,
				  alice_type_name(td->type));
	(void)nbytes;
	return ALICE_OK;
}

static enum alice_status fill_const(void *user, const char *name, void *dst, uint64_t nbytes,
				    struct alice_error *err)
{
	(void)name; (void)err;
	memcpy(dst, user, nbytes);
	return ALICE_OK;
}

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-mkmodel --shape NAME --type TYPE --vocab VOCAB.gguf -o OUT.gguf "
		   "[--seed N] [--threads N] [--layers N]\n  shapes:");
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		fprintf(f, " %s", shapes[i].name);
	fprintf(f, "\n  types:");
	for (size_t i = 0; i < sizeof(ftypes) / sizeof(ftypes[0]); i++)
		fprintf(f, " %s", ftypes[i].name);
	fprintf(f, "\n  --vocab: a GGUF whose tokenizer.* keys are copied (its token count must match the shape's "
		   "vocabulary, except for 'tiny', which takes the vocab's size)\n");
}

#define ADD(st) do { if ((st) != ALICE_OK) { fprintf(stderr, "alice-mkmodel: out of memory\n"); goto fail; } } while (0)

int main(int argc, char **argv)
{
	const char *shape_name = NULL, *type_name = NULL, *vocab_path = NULL, *out = NULL;
	uint64_t seed = 42;
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), layers = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
		if (!v) { fprintf(stderr, "alice-mkmodel: %s needs a value\n", a); usage(stderr); return 2; }
		if (!strcmp(a, "--shape")) shape_name = v;
		else if (!strcmp(a, "--type")) type_name = v;
		else if (!strcmp(a, "--vocab")) vocab_path = v;
		else if (!strcmp(a, "-o")) out = v;
		else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--threads")) threads = atoi(v);
		else if (!strcmp(a, "--layers")) layers = atoi(v);
		else { fprintf(stderr, "alice-mkmodel: unknown option %s\n", a); usage(stderr); return 2; }
		i++;
	}
	if (!shape_name || !type_name || !vocab_path || !out) { usage(stderr); return 2; }
	if (threads < 1) threads = 1;
	const struct shape *sh = NULL;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(shapes[i].name, shape_name)) sh = &shapes[i];
	const struct ftype *ft = NULL;
	for (size_t i = 0; i < sizeof(ftypes) / sizeof(ftypes[0]); i++)
		if (!strcasecmp(ftypes[i].name, type_name)) ft = &ftypes[i];
	if (!sh) { fprintf(stderr, "alice-mkmodel: unknown shape '%s'\n", shape_name); usage(stderr); return 2; }
	if (!ft) { fprintf(stderr, "alice-mkmodel: unknown type '%s'\n", type_name); usage(stderr); return 2; }

	struct alice_error err = {{0}};
	struct alice_gguf *voc = NULL;
	if (alice_gguf_open(vocab_path, &voc, &err) != ALICE_OK) {
		fprintf(stderr, "alice-mkmodel: %s\n", err.msg);
		return 1;
	}
	struct alice_gguf_arr toks;
	if (alice_gguf_get_arr(voc, "tokenizer.ggml.tokens", &toks, &err) != ALICE_OK) {
		fprintf(stderr, "alice-mkmodel: %s: no tokenizer.ggml.tokens: %s\n", vocab_path, err.msg);
		alice_gguf_close(voc);
		return 1;
	}
	int n_vocab = sh->n_vocab ? sh->n_vocab : (int)toks.n;
	if ((uint64_t)n_vocab < toks.n) {
		fprintf(stderr, "alice-mkmodel: %s has %llu tokens but shape %s has a %d-token vocabulary\n",
			vocab_path, (unsigned long long)toks.n, sh->name, n_vocab);
		alice_gguf_close(voc);
		return 1;
	}
	int n_layer = layers > 0 ? layers : sh->n_layer;

	struct alice_gguf_writer *w = alice_gguf_writer_create();
	struct tensor_desc *descs = calloc((size_t)n_layer * 16 + 8, sizeof(*descs));
	struct gen g = {seed, threads, sh, n_vocab, 0};
	if (!w || !descs) { fprintf(stderr, "alice-mkmodel: out of memory\n"); return 1; }
	char key[256];
	const char *A = sh->arch;
	ADD(alice_gguf_writer_set_str(w, "general.architecture", A));
	snprintf(key, sizeof key, "%s (synthetic, random weights, %s)", sh->desc, ft->name);
	ADD(alice_gguf_writer_set_str(w, "general.name", key));
	ADD(alice_gguf_writer_set_u32(w, "general.alignment", 32));
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", A, suffix), key)
	ADD(alice_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)sh->n_ctx));
	ADD(alice_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)sh->n_embd));
	ADD(alice_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)n_layer));
	ADD(alice_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)sh->n_ff));
	ADD(alice_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sh->n_head));
	ADD(alice_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv));
	ADD(alice_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)sh->head_dim));
	ADD(alice_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)sh->head_dim));
	ADD(alice_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->rms_eps));
	ADD(alice_gguf_writer_set_f32(w, KEY("rope.freq_base"), sh->rope_theta));
	ADD(alice_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)sh->head_dim));
	ADD(alice_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)n_vocab));
	for (int64_t i = 0; i < alice_gguf_n_kv(voc); i++)
		if (!strncmp(alice_gguf_key(voc, i), "tokenizer.", 10))
			ADD(alice_gguf_writer_copy_kv(w, voc, i));

	/* Tensors: 1-D stay F32; 2-D get the file type (with the mix rules). */
	size_t nd = 0;
	int64_t E = sh->n_embd, Hq = (int64_t)sh->n_head * sh->head_dim, Hkv = (int64_t)sh->n_head_kv * sh->head_dim;
	uint32_t out_type = ft->base;
	/* As llama.cpp's quantizer: the output matrix gets Q6_K for quantized
	 * types other than Q8_0 when its rows are a multiple of 256, else Q8_0. */
	if (alice_type_info(ft->base)->block_size > 1 && ft->base != ALICE_TYPE_Q8_0)
		out_type = (E % 256 == 0) ? ALICE_TYPE_Q6_K : ALICE_TYPE_Q8_0;
	float emb_sd = 1.0f;
#define TENSOR(nm, ty, nd_, ne0_, ne1_, mean_, sd_) do {                                              \
		struct tensor_desc *d_ = &descs[nd++];                                                     \
		*d_ = (struct tensor_desc){&g, (ty), (ne0_), (ne1_), (mean_), (sd_), splitmix(&seed)};    \
		int64_t ne_[2] = {(ne0_), (ne1_)};                                                         \
		if (alice_gguf_writer_add_tensor(w, (nm), (ty), (nd_), ne_, fill_tensor, d_) != ALICE_OK) { \
			fprintf(stderr, "alice-mkmodel: cannot add tensor %s (%s, row %lld)\n", (nm),      \
				alice_type_name(ty), (long long)(ne0_));                                   \
			goto fail;                                                                         \
		}                                                                                          \
	} while (0)
	TENSOR("token_embd.weight", sh->tied ? out_type : ft->base, 2, E, n_vocab, 0.f, emb_sd);
	if (sh->llama3_factor > 0) {
		/* rope_freqs: Llama-3.1 scaling (low 1, high 4, original context 8192). */
		static float factors[256];
		int n = sh->head_dim / 2;
		for (int i = 0; i < n; i++) {
			double freq = pow(sh->rope_theta, -2.0 * i / sh->head_dim);
			double wavelen = 2 * M_PI / freq, lo = 8192 / 1.0, hi = 8192 / 4.0;
			if (wavelen < hi) factors[i] = 1.0f;
			else if (wavelen > lo) factors[i] = sh->llama3_factor;
			else {
				double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
				factors[i] = (float)(1.0 / ((1 - smooth) / sh->llama3_factor + smooth));
			}
		}
		int64_t ne[1] = {n};
		if (alice_gguf_writer_add_tensor(w, "rope_freqs.weight", ALICE_TYPE_F32, 1, ne, fill_const,
						 factors) != ALICE_OK)
			goto fail;
	}
	for (int l = 0; l < n_layer; l++) {
		char nm[96];
		uint32_t tv = ft->base, tdown = ft->base;
		if (ft->mix && use_more_bits(l, n_layer))
			tv = tdown = ALICE_TYPE_Q6_K;
#define LN(s) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), nm)
		TENSOR(LN("attn_norm.weight"), ALICE_TYPE_F32, 1, E, 1, 1.f, 0.05f);
		TENSOR(LN("attn_q.weight"), ft->base, 2, E, Hq, 0.f, 1.0f / sqrtf((float)E));
		TENSOR(LN("attn_k.weight"), ft->base, 2, E, Hkv, 0.f, 1.0f / sqrtf((float)E));
		TENSOR(LN("attn_v.weight"), tv, 2, E, Hkv, 0.f, 1.0f / sqrtf((float)E));
		if (sh->qkv_bias) {
			TENSOR(LN("attn_q.bias"), ALICE_TYPE_F32, 1, Hq, 1, 0.f, 0.1f);
			TENSOR(LN("attn_k.bias"), ALICE_TYPE_F32, 1, Hkv, 1, 0.f, 0.1f);
			TENSOR(LN("attn_v.bias"), ALICE_TYPE_F32, 1, Hkv, 1, 0.f, 0.1f);
		}
		if (sh->qk_norm) {
			TENSOR(LN("attn_q_norm.weight"), ALICE_TYPE_F32, 1, sh->head_dim, 1, 1.f, 0.05f);
			TENSOR(LN("attn_k_norm.weight"), ALICE_TYPE_F32, 1, sh->head_dim, 1, 1.f, 0.05f);
		}
		TENSOR(LN("attn_output.weight"), ft->base, 2, Hq, E, 0.f, 1.0f / sqrtf((float)Hq));
		TENSOR(LN("ffn_norm.weight"), ALICE_TYPE_F32, 1, E, 1, 1.f, 0.05f);
		TENSOR(LN("ffn_gate.weight"), ft->base, 2, E, sh->n_ff, 0.f, 1.0f / sqrtf((float)E));
		TENSOR(LN("ffn_up.weight"), ft->base, 2, E, sh->n_ff, 0.f, 1.0f / sqrtf((float)E));
		TENSOR(LN("ffn_down.weight"), tdown, 2, sh->n_ff, E, 0.f, 1.0f / sqrtf((float)sh->n_ff));
	}
	TENSOR("output_norm.weight", ALICE_TYPE_F32, 1, E, 1, 1.f, 0.05f);
	if (!sh->tied)
		TENSOR("output.weight", out_type, 2, E, n_vocab, 0.f, 1.0f / sqrtf((float)E));
	if (alice_gguf_writer_write(w, out, &err) != ALICE_OK) {
		fprintf(stderr, "alice-mkmodel: %s\n", err.msg);
		goto fail;
	}
	printf("wrote %s: %s shape, %s, %d layers, vocab %d\n", out, sh->name, ft->name, n_layer, n_vocab);
	alice_gguf_writer_free(w);
	free(descs);
	alice_gguf_close(voc);
	return 0;
fail:
	alice_gguf_writer_free(w);
	free(descs);
	alice_gguf_close(voc);
	return 1;
}
