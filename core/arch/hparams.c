/* hparams.c — hyper-parameters every family shares (the family's own are
 * read by its hparams hook into hp->priv), the tensor table's dimensions and
 * layer kinds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"
#include "arch/arch.h"

#define HP_MAX_DIM (1u << 20) /* sanity bound on any single dimension */

/* Reads <arch>.<key> as an integer (iv) or a float (fv != NULL); *found
 * says whether it is there. Absent and required, or of the wrong kind, is an
 * error naming the file and key. */
static enum alice_status lookup(const struct alice_gguf *g, const char *arch, const char *key, bool required,
				int64_t *iv, double *fv, bool *found, struct alice_error *err)
{
	char full[160];
	snprintf(full, sizeof(full), "%s.%s", arch, key);
	const char *path = alice_gguf_path(g);
	enum alice_status st = fv ? alice_gguf_get_float(g, full, fv, NULL) : alice_gguf_get_int(g, full, iv, NULL);
	*found = st != ALICE_ERR_NOT_FOUND;
	if (!*found)
		return required ? alice_fail(err, ALICE_ERR_INVALID, "%s: missing hyper-parameter %s", path, full)
				: ALICE_OK;
	if (fv && (st != ALICE_OK || !isfinite(*fv)))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s is not a finite number", path, full);
	if (!fv && st == ALICE_ERR_TYPE)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED,
				  "%s: %s is not a single integer (per-layer values are not supported)", path, full);
	if (!fv && (st != ALICE_OK || *iv < 0 || *iv > (int64_t)UINT32_MAX))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s is out of range", path, full);
	return ALICE_OK;
}

static enum alice_status get_u32(const struct alice_gguf *g, const char *arch, const char *key,
				 bool required, uint32_t *out, struct alice_error *err)
{
	int64_t v = 0;
	bool found;
	enum alice_status st = lookup(g, arch, key, required, &v, NULL, &found, err);
	if (st == ALICE_OK && found)
		*out = (uint32_t)v;
	return st;
}

static enum alice_status get_f32(const struct alice_gguf *g, const char *arch, const char *key,
				 bool required, float *out, struct alice_error *err)
{
	double v = 0;
	bool found;
	enum alice_status st = lookup(g, arch, key, required, NULL, &v, &found, err);
	if (st == ALICE_OK && found)
		*out = (float)v;
	return st;
}

#define TRY(x)                                 \
	do {                                   \
		enum alice_status st_ = (x);   \
		if (st_ != ALICE_OK)           \
			return st_;            \
	} while (0)

enum alice_status alice_hparams_load(const struct alice_gguf *g, const struct alice_arch *a,
				     int64_t n_vocab_fallback, struct alice_hparams *hp,
				     struct alice_error *err)
{
	const char *an = a->name;
	const char *path = alice_gguf_path(g);
	memset(hp, 0, sizeof(*hp));
	snprintf(hp->arch, sizeof(hp->arch), "%s", an);
	TRY(get_u32(g, an, "context_length", true, &hp->n_ctx_train, err));
	TRY(get_u32(g, an, "embedding_length", true, &hp->n_embd, err));
	TRY(get_u32(g, an, "block_count", true, &hp->n_layer, err));
	TRY(get_u32(g, an, "feed_forward_length", true, &hp->n_ff, err));
	TRY(get_u32(g, an, "attention.head_count", true, &hp->n_head, err));
	hp->n_head_kv = hp->n_head;
	TRY(get_u32(g, an, "attention.head_count_kv", false, &hp->n_head_kv, err));
	if (hp->n_head == 0 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: %s.attention.head_count (%u) must be a positive multiple of head_count_kv (%u)",
				  path, an, hp->n_head, hp->n_head_kv);
	hp->head_dim_k = hp->head_dim_v = hp->n_embd / hp->n_head;
	TRY(get_u32(g, an, "attention.key_length", false, &hp->head_dim_k, err));
	TRY(get_u32(g, an, "attention.value_length", false, &hp->head_dim_v, err));
	hp->n_rot = hp->head_dim_k;
	TRY(get_u32(g, an, "rope.dimension_count", false, &hp->n_rot, err));
	/* an encoder's norm epsilon is its own key (bert: attention.layer_norm_epsilon, its hook) */
	TRY(get_f32(g, an, "attention.layer_norm_rms_epsilon", !a->encoder, &hp->rms_eps, err));
	if (a->encoder && hp->rms_eps == 0.0f)
		hp->rms_eps = 1e-12f; /* checked below; the hook sets the real one */
	hp->rope_base = 10000.0f;
	TRY(get_f32(g, an, "rope.freq_base", false, &hp->rope_base, err));

	/* Rope scaling: linear -> positions * 1/factor; yarn/longrope not yet. */
	char key[160];
	snprintf(key, sizeof(key), "%s.rope.scaling.type", an);
	struct alice_gguf_str stype = {0};
	if (alice_gguf_get_str(g, key, &stype, NULL) == ALICE_OK) {
		bool linear = stype.len == 6 && !memcmp(stype.ptr, "linear", 6);
		bool none = stype.len == 4 && !memcmp(stype.ptr, "none", 4);
		if (!linear && !none)
			return alice_fail(err, ALICE_ERR_UNSUPPORTED,
					  "%s: %s = \"%.*s\" is not supported yet (supported: none, linear)", path,
					  key, (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
	}
	float factor = 0.0f;
	TRY(get_f32(g, an, "rope.scaling.factor", false, &factor, err));
	if (factor == 0.0f)
		TRY(get_f32(g, an, "rope.scale_linear", false, &factor, err));
	if (factor < 0.0f)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s.rope.scaling.factor is negative", path, an);
	hp->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;

	uint32_t n_vocab = 0;
	TRY(get_u32(g, an, "vocab_size", false, &n_vocab, err));
	if (n_vocab == 0 && n_vocab_fallback > 0 && n_vocab_fallback <= (int64_t)INT32_MAX)
		n_vocab = (uint32_t)n_vocab_fallback;
	hp->n_vocab = n_vocab;

	uint32_t dims[] = {hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head, hp->head_dim_k, hp->head_dim_v};
	const char *names[] = {"embedding_length", "block_count", "feed_forward_length",
			       "attention.head_count", "attention.key_length", "attention.value_length"};
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
		if (dims[i] == 0 || dims[i] > HP_MAX_DIM)
			return alice_fail(err, ALICE_ERR_INVALID, "%s: %s.%s = %u is out of range", path, an,
					  names[i], dims[i]);
	if (hp->n_vocab == 0 || hp->n_vocab > (1u << 24))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: vocabulary size %u is out of range", path, hp->n_vocab);
	if (hp->n_rot == 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim_k)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: %s.rope.dimension_count = %u must be even and <= the head size %u", path,
				  an, hp->n_rot, hp->head_dim_k);
	if (!(hp->rms_eps > 0.0f) || !(hp->rope_base > 0.0f))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: rms epsilon and rope base must be positive", path);
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
	TRY(get_f32(g, an, "attention.scale", false, &hp->attn_scale, err));
	if (hp->attn_scale == 0.0f)
		hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
	hp->rope_mode = a->rope_mode;
	if (a->priv_size && !(hp->priv = calloc(1, a->priv_size)))
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	enum alice_status st = a->hparams ? a->hparams(g, hp, err) : ALICE_OK;
	if (st != ALICE_OK)
		alice_hparams_free(hp);
	return st;
}

void alice_hparams_free(struct alice_hparams *hp)
{
	free(hp->priv);
	hp->priv = NULL;
}

int64_t alice_dim_value(const struct alice_arch *a, const struct alice_hparams *hp, uint8_t dim)
{
	if (dim >= ALICE_D_ARCH0)
		return a->dim ? a->dim(hp, dim) : -1;
	switch (dim) {
	case ALICE_D_NONE: return 1;
	case ALICE_D_EMBD: return hp->n_embd;
	case ALICE_D_FF: return hp->n_ff;
	case ALICE_D_VOCAB: return hp->n_vocab;
	case ALICE_D_Q: return (int64_t)hp->n_head * hp->head_dim_k;
	case ALICE_D_K: return (int64_t)hp->n_head_kv * hp->head_dim_k;
	case ALICE_D_V: return (int64_t)hp->n_head_kv * hp->head_dim_v;
	case ALICE_D_O: return (int64_t)hp->n_head * hp->head_dim_v;
	case ALICE_D_HEAD_K: return hp->head_dim_k;
	case ALICE_D_ROT_HALF: return hp->n_rot / 2;
	}
	return -1;
}

bool alice_arch_spec_on_layer(const struct alice_arch *a, const struct alice_hparams *hp,
			      const struct alice_tensor_spec *sp, int il)
{
	if (!(sp->flags & ALICE_TS_LAYER))
		return il < 0;
	if (il < 0)
		return false;
	if ((sp->flags & ALICE_TS_KV_LAYERS) && a->layer_has_kv && !a->layer_has_kv(hp, il))
		return false;
	if (sp->flags & ALICE_TS_STATE_LAYERS) {
		int64_t ne[ALICE_LAYER_STATES][3];
		if (!a->layer_state || a->layer_state(hp, il, ne) <= 0)
			return false;
	}
	return true;
}
