/* synth.c — synthetic models of any registered architecture (see synth.h):
 * the shape's metadata is written, read back by the loader's own
 * hyper-parameter code, and the architecture's tensor table, sized from it,
 * is filled with seeded random rows. */
#include "alice/synth.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/gguf_write.h"
#include "alice/quant.h"
#include "arch/arch.h"

/* Small dims every family accepts; a family adds its own (arch->synth_kv). */
static const char default_shape[] =
	"context_length=2048 embedding_length=64 block_count=2 feed_forward_length=128 attention.head_count=4 "
	"attention.head_count_kv=2 attention.key_length=16 attention.value_length=16 rope.dimension_count=16 "
	"rope.freq_base=10000.0 attention.layer_norm_rms_epsilon=1e-5";

const char *alice_synth_arch(size_t i)
{
	const struct alice_arch *a = alice_arch_at(i);
	return a ? a->name : NULL;
}

/* ---- the shape: "key=value" words onto the writer ---- */

static enum alice_status set_word(struct alice_gguf_writer *w, const char *arch, const char *word, size_t len,
				  struct alice_error *err)
{
	char buf[256], key[320];
	if (len >= sizeof(buf))
		return alice_fail(err, ALICE_ERR_INVALID, "shape word '%.40s...' is too long", word);
	memcpy(buf, word, len);
	buf[len] = 0;
	char *eq = strchr(buf, '=');
	if (!eq || eq == buf || !eq[1])
		return alice_fail(err, ALICE_ERR_INVALID, "shape word '%s' is not key=value", buf);
	*eq = 0;
	const char *val = eq + 1;
	snprintf(key, sizeof(key), "%s.%s", arch, buf);
	char *end;
	enum alice_status st;
	if (strchr(val, ',')) {
		int32_t v[64];
		uint64_t n = 0;
		for (const char *s = val; n < 64; s = end + 1) {
			long x = strtol(s, &end, 10);
			if (end == s || (*end && *end != ','))
				return alice_fail(err, ALICE_ERR_INVALID, "shape: %s=%s is not an integer list", buf, val);
			v[n++] = (int32_t)x;
			if (!*end)
				break;
		}
		st = alice_gguf_writer_set_arr(w, key, ALICE_GGUF_INT32, v, n);
	} else if (strpbrk(val, ".eE")) {
		double x = strtod(val, &end);
		if (*end || !isfinite(x))
			return alice_fail(err, ALICE_ERR_INVALID, "shape: %s=%s is not a number", buf, val);
		st = alice_gguf_writer_set_f32(w, key, (float)x);
	} else {
		unsigned long long x = strtoull(val, &end, 10);
		if (*end || !isdigit((unsigned char)val[0]) || x > UINT32_MAX)
			return alice_fail(err, ALICE_ERR_INVALID, "shape: %s=%s is not an unsigned 32-bit integer", buf,
					  val);
		st = alice_gguf_writer_set_u32(w, key, (uint32_t)x);
	}
	return st == ALICE_OK ? ALICE_OK : alice_fail(err, st, "shape: cannot set %s", key);
}

static enum alice_status set_shape(struct alice_gguf_writer *w, const char *arch, const char *shape,
				   struct alice_error *err)
{
	for (const char *s = shape ? shape : ""; *s;) {
		while (isspace((unsigned char)*s))
			s++;
		size_t n = 0;
		while (s[n] && !isspace((unsigned char)s[n]))
			n++;
		if (n) {
			enum alice_status st = set_word(w, arch, s, n, err);
			if (st != ALICE_OK)
				return st;
		}
		s += n;
	}
	return ALICE_OK;
}

/* ---- tensor data ---- */

struct tensor_desc {
	uint32_t type;
	uint8_t init; /* enum alice_tinit */
	int64_t ne0, rows;
	float mean, sd;
	uint64_t stream;
	int threads;
	const struct alice_hparams *hp; /* ALICE_TI_ROPE_FREQS */
	float rope_factor;
};

struct row_job {
	const struct tensor_desc *d;
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

static void *row_worker(void *arg)
{
	struct row_job *j = arg;
	const struct tensor_desc *d = j->d;
	float *row = malloc(sizeof(float) * (size_t)d->ne0);
	if (!row)
		return (void *)1;
	for (int64_t r = j->r0; r < j->r1; r++) {
		fill_gauss(row, d->ne0, d->stream ^ (uint64_t)r * 0x2545f4914f6cdd1dull, d->mean, d->sd);
		uint8_t *dst = j->dst + (size_t)r * j->row_bytes;
		if (d->type == ALICE_TYPE_F32)
			memcpy(dst, row, sizeof(float) * (size_t)d->ne0);
		else if (!alice_quantize(d->type, row, dst, d->ne0)) {
			free(row);
			return (void *)1;
		}
	}
	free(row);
	return NULL;
}

/* Llama-3.1 rope scaling (low 1, high 4, original context 8192). */
static void rope_freqs(const struct tensor_desc *d, float *out)
{
	const struct alice_hparams *hp = d->hp;
	const double lo = 8192 / 1.0, hi = 8192 / 4.0;
	for (int64_t i = 0; i < d->ne0; i++) {
		double freq = pow(hp->rope_base, -2.0 * (double)i / hp->n_rot);
		double wavelen = 2 * M_PI / freq;
		if (wavelen < hi) {
			out[i] = 1.0f;
		} else if (wavelen > lo) {
			out[i] = d->rope_factor;
		} else {
			double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
			out[i] = (float)(1.0 / ((1 - smooth) / d->rope_factor + smooth));
		}
	}
}

static enum alice_status fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes,
				     struct alice_error *err)
{
	const struct tensor_desc *d = user;
	(void)nbytes;
	if (d->init == ALICE_TI_ROPE_FREQS) {
		rope_freqs(d, dst);
		return ALICE_OK;
	}
	enum { MAX_THREADS = 256 };
	struct row_job jobs[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	int nt = d->threads < 1 ? 1 : d->threads > MAX_THREADS ? MAX_THREADS : d->threads;
	size_t rb = alice_row_size(d->type, d->ne0);
	bool joined[MAX_THREADS];
	int bad = 0;
	for (int t = 0; t < nt; t++) {
		jobs[t] = (struct row_job){d, dst, rb, d->rows * t / nt, d->rows * (t + 1) / nt};
		joined[t] = pthread_create(&th[t], NULL, row_worker, &jobs[t]) == 0;
		if (!joined[t]) /* no thread: do its rows here */
			bad |= row_worker(&jobs[t]) != NULL;
	}
	for (int t = 0; t < nt; t++) {
		void *r = NULL;
		if (joined[t] && pthread_join(th[t], &r) == 0)
			bad |= r != NULL;
	}
	if (bad)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "cannot quantize %s to %s", name, alice_type_name(d->type));
	return ALICE_OK;
}

/* ---- the tensor table ---- */

static bool use_more_bits(int i, int n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool table_has(const struct alice_arch *a, int slot)
{
	for (size_t i = 0; i < a->n_tensors; i++)
		if (a->tensors[i].slot == slot)
			return true;
	return false;
}

/* Is the optional spec sp written? */
static bool wanted(const struct alice_synth_params *p, const struct alice_tensor_spec *sp)
{
	if (!(sp->flags & ALICE_TS_OPTIONAL))
		return true;
	if (sp->slot == ALICE_W_OUTPUT)
		return !p->tied;
	if (sp->slot == ALICE_W_ROPE_FREQS)
		return p->rope_freqs_factor > 0;
	return false;
}

static uint32_t tensor_type(const struct alice_synth_params *p, const struct alice_arch *a,
			    const struct alice_hparams *hp, const struct alice_tensor_spec *sp, int il, int64_t ne0)
{
	if ((sp->flags & ALICE_TS_F32) || sp->ne[1] == ALICE_D_NONE)
		return ALICE_TYPE_F32;
	if (sp->flags & ALICE_TS_FLOAT) /* as the converter writes BERT's token types (llama.cpp adds them as F32) */
		return ALICE_TYPE_F32;
	uint32_t t = p->type;
	const struct alice_type_info *ti = alice_type_info(t);
	/* As llama.cpp's quantizer: the output matrix (or the tied embedding)
	 * gets Q6_K for quantized types other than Q8_0 when its rows are a
	 * multiple of 256, else Q8_0. */
	bool head = sp->slot == ALICE_W_OUTPUT ||
		    (sp->slot == ALICE_W_TOKEN_EMBD && (p->tied || !table_has(a, ALICE_W_OUTPUT)));
	if (head && ti && ti->block_size > 1 && t != ALICE_TYPE_Q8_0)
		t = hp->n_embd % 256 == 0 ? ALICE_TYPE_Q6_K : ALICE_TYPE_Q8_0;
	else if (p->k_mix && (sp->slot == ALICE_W_ATTN_V || sp->slot == ALICE_W_FFN_DOWN) &&
		 use_more_bits(il, (int)hp->n_layer))
		t = ALICE_TYPE_Q6_K;
	ti = alice_type_info(t);
	if (ti && ti->block_size > 1 && ne0 % ti->block_size) /* a row the type cannot hold */
		t = ne0 % 32 == 0 ? ALICE_TYPE_Q8_0 : ALICE_TYPE_F16;
	return t;
}

static const float init_mean[] = {[ALICE_TI_ONES] = 1.0f, [ALICE_TI_NEGATIVE] = -1.0f};
static const float init_sd[] = {[ALICE_TI_ONES] = 0.05f, [ALICE_TI_SMALL] = 0.1f, [ALICE_TI_NEGATIVE] = 0.05f};

struct plan {
	struct alice_gguf_writer *w;
	struct tensor_desc *descs;
	size_t n;
	uint64_t seed;
};

static enum alice_status add_tensor(struct plan *pl, const struct alice_synth_params *p, const struct alice_arch *a,
				    const struct alice_hparams *hp, const struct alice_tensor_spec *sp, int il,
				    struct alice_error *err)
{
	char name[160];
	if (il >= 0)
		snprintf(name, sizeof(name), "blk.%d.%s", il, sp->name);
	else
		snprintf(name, sizeof(name), "%s", sp->name);
	int64_t ne[2] = {alice_dim_value(a, hp, sp->ne[0]), alice_dim_value(a, hp, sp->ne[1])};
	if (ne[0] <= 0 || ne[1] <= 0)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: tensor %s has no size in this shape", a->name, name);
	struct tensor_desc *d = &pl->descs[pl->n++];
	*d = (struct tensor_desc){.type = tensor_type(p, a, hp, sp, il, ne[0]),
				  .init = sp->init,
				  .ne0 = ne[0],
				  .rows = ne[1],
				  .mean = sp->init < sizeof(init_mean) / sizeof(init_mean[0]) ? init_mean[sp->init] : 0.0f,
				  .sd = sp->init == ALICE_TI_MATRIX ? 1.0f / sqrtf((float)ne[0]) : init_sd[sp->init],
				  .stream = splitmix(&pl->seed),
				  .threads = p->n_threads,
				  .hp = hp,
				  .rope_factor = p->rope_freqs_factor};
	uint32_t n_dims = sp->ne[1] == ALICE_D_NONE ? 1 : 2;
	if (d->init == ALICE_TI_ROPE_FREQS)
		d->type = ALICE_TYPE_F32;
	if (alice_gguf_writer_add_tensor(pl->w, name, d->type, n_dims, ne, fill_tensor, d) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_INVALID, "cannot add tensor %s (%s, row of %lld)", name,
				  alice_type_name(d->type), (long long)ne[0]);
	return ALICE_OK;
}

/* Globals in table order, then each layer's tensors in table order. */
static enum alice_status add_tensors(struct plan *pl, const struct alice_synth_params *p, const struct alice_arch *a,
				     const struct alice_hparams *hp, struct alice_error *err)
{
	enum alice_status st = ALICE_OK;
	for (int il = -1; il < (int)hp->n_layer; il++)
		for (size_t i = 0; i < a->n_tensors && st == ALICE_OK; i++) {
			const struct alice_tensor_spec *sp = &a->tensors[i];
			if (alice_arch_spec_on_layer(a, hp, sp, il) && wanted(p, sp))
				st = add_tensor(pl, p, a, hp, sp, il, err);
		}
	return st;
}

/* The shape's metadata (and the vocabulary's tokenizer) onto w. */
static enum alice_status set_metadata(struct alice_gguf_writer *w, const struct alice_synth_params *p,
				      const struct alice_arch *a, struct alice_error *err)
{
	struct alice_gguf_arr toks;
	if (!p->vocab || alice_gguf_get_arr(p->vocab, "tokenizer.ggml.tokens", &toks, NULL) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_INVALID, "synthetic %s: the vocabulary has no tokenizer.ggml.tokens",
				  a->name);
	char name[160], key[96];
	snprintf(name, sizeof(name), "%s (synthetic)", a->name);
	snprintf(key, sizeof(key), "%s.vocab_size", a->name);
	enum alice_status st;
	if ((st = alice_gguf_writer_set_str(w, "general.architecture", a->name)) != ALICE_OK ||
	    (st = alice_gguf_writer_set_str(w, "general.name", p->name ? p->name : name)) != ALICE_OK ||
	    (st = alice_gguf_writer_set_u32(w, "general.alignment", 32)) != ALICE_OK ||
	    (st = alice_gguf_writer_set_u32(w, key, (uint32_t)toks.n)) != ALICE_OK)
		return alice_fail(err, st, "out of memory");
	if ((st = set_shape(w, a->name, default_shape, err)) != ALICE_OK ||
	    (st = set_shape(w, a->name, a->synth_kv, err)) != ALICE_OK ||
	    (st = set_shape(w, a->name, p->shape, err)) != ALICE_OK)
		return st;
	for (int64_t i = 0; i < alice_gguf_n_kv(p->vocab); i++)
		if (!strncmp(alice_gguf_key(p->vocab, i), "tokenizer.", 10) &&
		    (st = alice_gguf_writer_copy_kv(w, p->vocab, i)) != ALICE_OK)
			return alice_fail(err, st, "cannot copy %s", alice_gguf_key(p->vocab, i));
	return ALICE_OK;
}

enum alice_status alice_synth_write(const struct alice_synth_params *p, const char *path, struct alice_error *err)
{
	const struct alice_arch *a = alice_arch_find(p->arch);
	if (!a)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "architecture %s is not supported (supported: %s)",
				  p->arch ? p->arch : "(null)", alice_arch_supported_list());
	struct alice_gguf_writer *w = alice_gguf_writer_create();
	struct alice_hparams hp = {0};
	struct alice_gguf *meta = NULL;
	void *meta_bytes = NULL;
	size_t meta_size = 0;
	struct plan pl = {.w = w, .seed = p->seed};
	enum alice_status st;
	if (!w)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	if ((st = set_metadata(w, p, a, err)) != ALICE_OK)
		goto free_writer;
	/* read the metadata back as the loader will */
	char meta_name[96];
	snprintf(meta_name, sizeof(meta_name), "synthetic %s shape", a->name);
	if ((st = alice_gguf_writer_write_memory(w, &meta_bytes, &meta_size, err)) != ALICE_OK ||
	    (st = alice_gguf_open_memory(meta_bytes, meta_size, meta_name, &meta, err)) != ALICE_OK ||
	    (st = alice_hparams_load(meta, a, 0, &hp, err)) != ALICE_OK)
		goto free_meta;
	struct alice_gguf_arr toks;
	if (alice_gguf_get_arr(p->vocab, "tokenizer.ggml.tokens", &toks, NULL) == ALICE_OK && toks.n > hp.n_vocab) {
		st = alice_fail(err, ALICE_ERR_INVALID, "the vocabulary has %llu tokens but the shape's vocab_size is %u",
				(unsigned long long)toks.n, hp.n_vocab);
		goto free_hparams;
	}
	size_t max = 0;
	for (size_t i = 0; i < a->n_tensors; i++)
		max += (a->tensors[i].flags & ALICE_TS_LAYER) ? hp.n_layer : 1;
	if (!(pl.descs = calloc(max ? max : 1, sizeof(*pl.descs)))) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto free_hparams;
	}
	if ((st = add_tensors(&pl, p, a, &hp, err)) == ALICE_OK)
		st = alice_gguf_writer_write(w, path, err);
	free(pl.descs);
free_hparams:
	alice_hparams_free(&hp);
free_meta:
	alice_gguf_close(meta);
	free(meta_bytes);
free_writer:
	alice_gguf_writer_free(w);
	return st;
}
