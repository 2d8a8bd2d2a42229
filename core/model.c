/* model.c — loads a GGUF model (arch lookup, hyper-parameters, tensor table
 * check, weights onto a backend) and the model's public getters. The context
 * (KV cache, forward steps) is in context.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/backend_loader.h"
#include "alice/embed.h"
#include "alice/log.h"
#include "alice/model.h"
#include "alice/quant.h"
#include "alice/tokenizer.h"
#include "model_internal.h"
#include "recurrent.h"

void alice_model_params_default(struct alice_model_params *p)
{
	memset(p, 0, sizeof(*p));
	p->backend = NULL;
	p->backend_dir = NULL;
	p->n_threads = 0;
	p->device = -1;
}

/* The tensor named by spec/il: check it and append it to m->tensors. */
static enum alice_status bind_one(struct alice_model *m, const struct alice_tensor_spec *sp, int il,
				  int32_t *slot_out, struct alice_error *err)
{
	const char *path = alice_gguf_path(m->gguf);
	char name[128];
	if (il >= 0)
		snprintf(name, sizeof(name), "blk.%d.%s", il, sp->name);
	else
		snprintf(name, sizeof(name), "%s", sp->name);
	int64_t ti = alice_gguf_find_tensor(m->gguf, name);
	if (ti < 0) {
		if (sp->flags & ALICE_TS_OPTIONAL) {
			*slot_out = -1;
			return ALICE_OK;
		}
		return alice_fail(err, ALICE_ERR_INVALID, "%s: missing tensor %s (required by architecture %s)",
				  path, name, m->arch->name);
	}
	const struct alice_gguf_tensor_info *info = alice_gguf_tensor(m->gguf, ti);
	int64_t want0 = alice_dim_value(m->arch, &m->hp, sp->ne[0]);
	int64_t want1 = alice_dim_value(m->arch, &m->hp, sp->ne[1]);
	if (info->ne[0] != want0 || info->ne[1] != want1 || info->ne[2] != 1 || info->ne[3] != 1)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld] from the "
				  "hyper-parameters",
				  path, name, (long long)info->ne[0], (long long)info->ne[1], (long long)info->ne[2],
				  (long long)info->ne[3], (long long)want0, (long long)want1);
	const struct alice_type_info *tinfo = alice_type_info(info->type);
	if (!tinfo || !tinfo->supported)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: tensor %s has type %s (%u), which is not supported",
				  path, name, alice_type_name(info->type), info->type);
	if ((sp->flags & ALICE_TS_F32) && info->type != ALICE_TYPE_F32)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: tensor %s has type %s; only F32 is supported for it",
				  path, name, alice_type_name(info->type));
	if ((sp->flags & ALICE_TS_FLOAT) && info->type != ALICE_TYPE_F32 && info->type != ALICE_TYPE_F16 &&
	    info->type != ALICE_TYPE_BF16)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED,
				  "%s: tensor %s has type %s; only F32, F16 and BF16 are supported for it", path, name,
				  alice_type_name(info->type));
	size_t row = alice_row_size(info->type, info->ne[0]);
	if (row == 0 || (uint64_t)row * (uint64_t)info->ne[1] != info->nbytes)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: tensor %s: row of %lld elements does not fit type %s",
				  path, name, (long long)info->ne[0], alice_type_name(info->type));
	struct alice_tensor *t = &m->tensors[m->n_tensors];
	memset(t, 0, sizeof(*t));
	t->type = info->type;
	for (int d = 0; d < ALICE_MAX_DIMS; d++)
		t->ne[d] = info->ne[d];
	t->nb[0] = tinfo->type_size;
	t->nb[1] = (int64_t)row;
	t->nb[2] = t->nb[1] * t->ne[1];
	t->nb[3] = t->nb[2] * t->ne[2];
	m->src_info[m->n_tensors] = info;
	*slot_out = (int32_t)m->n_tensors++;
	m->n_params += (uint64_t)(info->ne[0] * info->ne[1]);
	m->weight_bytes += info->nbytes;
	return ALICE_OK;
}

static enum alice_status bind_tensors(struct alice_model *m, struct alice_error *err)
{
	const struct alice_arch *a = m->arch;
	uint32_t L = m->hp.n_layer;
	/* every layer has tensors: a block_count beyond the file's tensor count
	 * is corrupt, and must not size the allocations below */
	if ((int64_t)L > alice_gguf_n_tensors(m->gguf))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s.block_count = %u but the file has only %lld tensors",
				  alice_gguf_path(m->gguf), a->name, L, (long long)alice_gguf_n_tensors(m->gguf));
	size_t max = 0;
	for (size_t i = 0; i < a->n_tensors; i++)
		max += (a->tensors[i].flags & ALICE_TS_LAYER) ? L : 1;
	m->tensors = calloc(max, sizeof(*m->tensors));
	m->src_info = calloc(max, sizeof(*m->src_info));
	m->layers = calloc(L, sizeof(*m->layers));
	if (!m->tensors || !m->src_info || !m->layers)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory binding tensors");
	for (int s = 0; s < ALICE_W_COUNT; s++)
		m->w.global[s] = -1;
	for (uint32_t il = 0; il < L; il++)
		for (int s = 0; s < ALICE_W_COUNT; s++)
			m->layers[il][s] = -1;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const struct alice_tensor_spec *sp = &a->tensors[i];
		enum alice_status st;
		if (sp->flags & ALICE_TS_LAYER) {
			for (uint32_t il = 0; il < L; il++)
				if (alice_arch_spec_on_layer(a, &m->hp, sp, (int)il) &&
				    (st = bind_one(m, sp, (int)il, &m->layers[il][sp->slot], err)) != ALICE_OK)
					return st;
		} else if ((st = bind_one(m, sp, -1, &m->w.global[sp->slot], err)) != ALICE_OK) {
			return st;
		}
	}
	m->w.tensors = m->tensors;
	m->w.layer = m->layers;
	int64_t n_file = alice_gguf_n_tensors(m->gguf);
	if (n_file > (int64_t)m->n_tensors)
		alice_log(ALICE_LOG_WARN, "%s: %lld tensor(s) not used by architecture %s",
			  alice_gguf_path(m->gguf), (long long)(n_file - (int64_t)m->n_tensors), a->name);
	return ALICE_OK;
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Upload progress in the log: nothing for a load under a second, then one
 * line a second (percent of the bytes, tensors done) and a last one at 100%. */
struct load_progress {
	double t0, t_next;
	bool shown;
};

static void load_progress(struct load_progress *p, const char *path, uint32_t done, uint32_t n, uint64_t bytes,
			  uint64_t total)
{
	double t = mono_s();
	bool last = done == n;
	if (t < p->t_next && !(last && p->shown))
		return;
	p->t_next = t + 1.0;
	p->shown = true;
	alice_log(ALICE_LOG_INFO, "loading %s: %3.0f%% (%u/%u tensors, %.1f/%.1f MB, %.1f s)", path,
		  total ? 100.0 * (double)bytes / (double)total : 100.0, done, n, (double)bytes / 1e6,
		  (double)total / 1e6, t - p->t0);
}

static uint64_t padded(uint64_t n) { return (n + 255) / 256 * 256; }

static void free_weights(struct alice_model *m)
{
	for (uint32_t i = 0; i < m->n_wbufs; i++)
		m->be->vt->buffer_free(m->bctx, m->wbufs[i]);
	free(m->wbufs);
	m->wbufs = NULL;
	m->n_wbufs = 0;
}

/* Buffers for the weights copied: one of total bytes if the backend makes
 * it, else runs of consecutive whole tensors of at most cap bytes, cap
 * halving until every run's buffer is made (a device's largest allocation
 * can be below the model: Vulkan's maxMemoryAllocationSize is 4 GiB on the
 * H200, an 8B Q4_K_M is 4.9 GB). run[i]: tensor i's buffer. */
static enum alice_status alloc_weights(struct alice_model *m, uint64_t total, uint32_t *run, struct alice_error *err)
{
	const struct alice_backend_vtable *vt = m->be->vt;
	uint64_t biggest = 256;
	for (uint32_t i = 0; i < m->n_tensors; i++)
		if (padded(m->src_info[i]->nbytes) > biggest)
			biggest = padded(m->src_info[i]->nbytes);
	uint64_t cap = total > biggest ? total : biggest;
	for (;;) {
		uint32_t n = 0;
		uint64_t in = cap; /* bytes in the current run: start a new one first */
		for (uint32_t i = 0; i < m->n_tensors; i++) {
			uint64_t b = padded(m->src_info[i]->nbytes);
			if (in + b > cap) {
				n++;
				in = 0;
			}
			in += b;
			run[i] = n - 1;
		}
		if (n == 0)
			n = 1;
		m->wbufs = calloc(n, sizeof(*m->wbufs));
		if (!m->wbufs)
			return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		m->n_wbufs = n;
		bool ok = true;
		for (uint32_t r = 0; r < n && ok; r++) {
			uint64_t bytes = 0;
			for (uint32_t i = 0; i < m->n_tensors; i++)
				if (run[i] == r)
					bytes += padded(m->src_info[i]->nbytes);
			ok = vt->buffer_alloc(m->bctx, bytes ? bytes : 256, ALICE_BUFFER_WEIGHTS, &m->wbufs[r]) == ALICE_OK;
		}
		if (ok) {
			if (n > 1)
				alice_log(ALICE_LOG_INFO, "%s: weights in %u buffers of at most %llu bytes (backend %s)",
					  alice_gguf_path(m->gguf), n, (unsigned long long)cap, m->be->name);
			return ALICE_OK;
		}
		char why[256];
		snprintf(why, sizeof(why), "%s", vt->last_error(m->bctx));
		for (uint32_t r = 0; r < n; r++)
			if (m->wbufs[r])
				vt->buffer_free(m->bctx, m->wbufs[r]);
		free(m->wbufs);
		m->wbufs = NULL;
		m->n_wbufs = 0;
		if (cap <= biggest)
			return alice_fail(err, ALICE_ERR_BACKEND, "%s: backend %s: cannot allocate %llu bytes of weights: %s",
					  alice_gguf_path(m->gguf), m->be->name, (unsigned long long)total, why);
		cap = cap / 2 > biggest ? cap / 2 : biggest;
	}
}

/* Copied weights rewritten into the backend's own layout where it has one
 * (tensor_pack); ALICE_PACK=0 keeps every tensor as the file has it. */
static enum alice_status pack_weights(struct alice_model *m, struct alice_error *err)
{
	const struct alice_backend_vtable *vt = m->be->vt;
	const char *e = getenv("ALICE_PACK");
	if (!ALICE_VT_HAS(vt, tensor_pack) || (e && e[0] == '0'))
		return ALICE_OK;
	uint32_t packed = 0;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		if (vt->tensor_pack(m->bctx, &m->tensors[i]) != ALICE_OK)
			return alice_fail(err, ALICE_ERR_BACKEND, "%s: backend %s: repacking tensor %s failed: %s",
					  alice_gguf_path(m->gguf), m->be->name, m->src_info[i]->name,
					  vt->last_error(m->bctx));
		if (m->tensors[i].flags & ALICE_TENSOR_PACKED) {
			packed++;
			bytes += m->src_info[i]->nbytes;
		}
	}
	if (packed)
		alice_log(ALICE_LOG_INFO, "%s: %u tensors (%.1f MB) repacked in place for backend %s",
			  alice_gguf_path(m->gguf), packed, (double)bytes / 1e6, m->be->name);
	return ALICE_OK;
}

/* Import the mapping, unless the device runs faster on a copy
 * (ALICE_DEVICE_PREFER_COPY) and the copy fits in half of the memory the
 * device reports free; ALICE_MMAP=1 always imports where it can. */
static bool import_weights(const struct alice_model *m, uint64_t size)
{
	if (!m->be->vt->buffer_import)
		return false;
	const char *e = getenv("ALICE_MMAP");
	if ((e && e[0] == '1') || !(m->dev.flags & ALICE_DEVICE_PREFER_COPY))
		return true;
	return m->dev.mem_free / 2 < size;
}

/* The mapping's tensor data as the weights' one buffer (buffer_import). */
static enum alice_status import_mapping(struct alice_model *m, struct alice_error *err)
{
	const struct alice_backend_vtable *vt = m->be->vt;
	uint64_t data_off = alice_gguf_data_offset(m->gguf);
	const uint8_t *base = alice_gguf_base(m->gguf);
	struct alice_buffer *b = NULL;
	if (vt->buffer_import(m->bctx, base + data_off, alice_gguf_size(m->gguf) - data_off, &b) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_BACKEND, "%s: backend %s: cannot use the weights in place: %s",
				  alice_gguf_path(m->gguf), m->be->name, vt->last_error(m->bctx));
	m->wbufs = calloc(1, sizeof(*m->wbufs));
	if (!m->wbufs) {
		vt->buffer_free(m->bctx, b);
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	}
	m->wbufs[0] = b;
	m->n_wbufs = 1;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		m->tensors[i].buf = b;
		m->tensors[i].offset = m->src_info[i]->offset;
	}
	m->weights_imported = true;
	return ALICE_OK;
}

/* Weights in place (buffer_import of the mapping) or copied (alloc+write). */
static enum alice_status upload_weights(struct alice_model *m, struct alice_error *err)
{
	const struct alice_backend_vtable *vt = m->be->vt;
	const char *path = alice_gguf_path(m->gguf);
	const bool imp = import_weights(m, alice_gguf_size(m->gguf) - alice_gguf_data_offset(m->gguf));
	if (imp) {
		struct alice_error ie = {{0}};
		if (import_mapping(m, &ie) == ALICE_OK)
			return ALICE_OK;
		alice_log(ALICE_LOG_INFO, "%s: backend %s: import failed (%s); copying the weights", path,
			  m->be->name, ie.msg);
	}
	uint64_t total = 0;
	for (uint32_t i = 0; i < m->n_tensors; i++)
		total += padded(m->src_info[i]->nbytes);
	uint32_t *run = malloc(((size_t)m->n_tensors + 1) * sizeof(*run));
	if (!run)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	enum alice_status st = alloc_weights(m, total, run, err);
	if (st != ALICE_OK) {
		free(run);
		if (imp || !vt->buffer_import) /* a copy was the only way */
			return st;
		alice_log(ALICE_LOG_INFO, "%s: %s; the weights are used in place", path, err->msg);
		return import_mapping(m, err);
	}
	uint64_t off = 0, done = 0;
	uint32_t cur = 0;
	struct load_progress prog = {0};
	prog.t0 = mono_s();
	prog.t_next = prog.t0 + 1.0;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct alice_gguf_tensor_info *info = m->src_info[i];
		if (run[i] != cur) {
			cur = run[i];
			off = 0;
		}
		load_progress(&prog, path, i, m->n_tensors, done, total);
		if (vt->buffer_write(m->bctx, m->wbufs[cur], off, info->data, info->nbytes) != ALICE_OK) {
			free(run);
			return alice_fail(err, ALICE_ERR_BACKEND, "%s: backend %s: writing tensor %s failed: %s", path,
					  m->be->name, info->name, vt->last_error(m->bctx));
		}
		/* the copy is what runs: keep resident memory about the file's size */
		alice_gguf_release(m->gguf, info->data, info->nbytes);
		m->tensors[i].buf = m->wbufs[cur];
		m->tensors[i].offset = off;
		off += padded(info->nbytes);
		done += padded(info->nbytes);
	}
	free(run);
	load_progress(&prog, path, m->n_tensors, m->n_tensors, done, total);
	alice_gguf_release(m->gguf, alice_gguf_base(m->gguf), alice_gguf_size(m->gguf)); /* pages tensors share */
	return pack_weights(m, err);
}

static void set_name(struct alice_model *m, const char *path)
{
	struct alice_gguf_str s;
	if (alice_gguf_get_str(m->gguf, "general.name", &s, NULL) == ALICE_OK && s.len > 0) {
		size_t n = s.len < sizeof(m->name) - 1 ? (size_t)s.len : sizeof(m->name) - 1;
		memcpy(m->name, s.ptr, n);
		m->name[n] = 0;
		return;
	}
	const char *slash = strrchr(path, '/');
	snprintf(m->name, sizeof(m->name), "%s", slash ? slash + 1 : path);
}

enum alice_status alice_model_load(const struct alice_model_params *p, struct alice_model **out,
				   struct alice_error *err)
{
	*out = NULL;
	if (!p || !p->path)
		return alice_fail(err, ALICE_ERR_INVALID, "no model path given");
	struct alice_model *m = calloc(1, sizeof(*m));
	if (!m)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	enum alice_status st = alice_gguf_open(p->path, &m->gguf, err);
	if (st != ALICE_OK)
		goto fail;
	const char *path = alice_gguf_path(m->gguf);
	struct alice_gguf_str an;
	if (alice_gguf_get_str(m->gguf, "general.architecture", &an, NULL) != ALICE_OK) {
		st = alice_fail(err, ALICE_ERR_INVALID, "%s: missing string general.architecture", path);
		goto fail;
	}
	char arch_name[64];
	snprintf(arch_name, sizeof(arch_name), "%.*s", (int)(an.len < 63 ? an.len : 63), an.ptr);
	m->arch = alice_arch_find(arch_name);
	if (!m->arch) {
		st = alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: architecture %s is not supported yet (supported: %s)",
				path, arch_name, alice_arch_supported_list());
		goto fail;
	}
	set_name(m, p->path);

	st = alice_tokenizer_load(m->gguf, &m->tok, err);
	if (st != ALICE_OK)
		goto fail;
	int64_t n_vocab_tok = alice_tokenizer_n_vocab(m->tok);
	if ((st = alice_hparams_load(m->gguf, m->arch, n_vocab_tok, &m->hp, err)) != ALICE_OK)
		goto fail;
	if ((st = bind_tensors(m, err)) != ALICE_OK)
		goto fail;

	st = alice_backend_open(p->backend, p->backend_dir, &m->be, err);
	if (st != ALICE_OK)
		goto fail;
	struct alice_backend_options opts = {.size = sizeof(opts), .device = p->device, .n_threads = p->n_threads};
	if ((st = alice_backend_init(m->be, &opts, &m->bctx, err)) != ALICE_OK)
		goto fail;
	int dev = p->device < 0 ? 0 : p->device;
	if (m->be->vt->device_info(dev, &m->dev) != ALICE_OK)
		snprintf(m->dev.name, sizeof(m->dev.name), "%s device %d", m->be->name, dev);
	if ((st = upload_weights(m, err)) != ALICE_OK)
		goto fail;
	alice_log(ALICE_LOG_INFO, "loaded %s: arch %s, %u layers, n_embd %u, n_vocab %u, %.1f MB of weights on %s (%s)%s",
		  path, m->arch->name, m->hp.n_layer, m->hp.n_embd, m->hp.n_vocab, (double)m->weight_bytes / 1e6,
		  m->be->name, m->dev.name,
		  m->weights_imported ? ", used in place"
		  : (m->dev.flags & ALICE_DEVICE_PREFER_COPY) ? ", copied from the mapping (ALICE_MMAP=1: in place)" : "");
	*out = m;
	return ALICE_OK;
fail:
	alice_model_free(m);
	return st;
}

void alice_model_free(struct alice_model *m)
{
	if (!m)
		return;
	if (m->bctx) {
		free_weights(m);
		m->be->vt->free(m->bctx);
	}
	alice_backend_close(m->be);
	alice_tokenizer_free(m->tok);
	alice_hparams_free(&m->hp);
	free(m->tensors);
	free(m->src_info);
	free(m->layers);
	alice_gguf_close(m->gguf);
	free(m);
}

const struct alice_gguf *alice_model_gguf(const struct alice_model *m) { return m->gguf; }
const struct alice_tokenizer *alice_model_tokenizer(const struct alice_model *m) { return m->tok; }
const char *alice_model_arch(const struct alice_model *m) { return m->arch->name; }
const char *alice_model_name(const struct alice_model *m) { return m->name; }
const char *alice_model_backend_name(const struct alice_model *m) { return m->be->name; }
const char *alice_model_device_name(const struct alice_model *m) { return m->dev.name; }
int32_t alice_model_n_vocab(const struct alice_model *m) { return (int32_t)m->hp.n_vocab; }
int32_t alice_model_n_ctx_train(const struct alice_model *m) { return (int32_t)m->hp.n_ctx_train; }
int32_t alice_model_n_embd(const struct alice_model *m) { return (int32_t)m->hp.n_embd; }
uint64_t alice_model_n_params(const struct alice_model *m) { return m->n_params; }
uint64_t alice_model_weight_bytes(const struct alice_model *m) { return m->weight_bytes; }
bool alice_model_weights_in_place(const struct alice_model *m) { return m->weights_imported; }
bool alice_model_is_recurrent(const struct alice_model *m) { return alice_rs_model_has_state(m); }
bool alice_model_is_encoder(const struct alice_model *m) { return m->arch->encoder; }

int alice_model_pooling(const struct alice_model *m)
{
	char key[96];
	int64_t v = -1;
	snprintf(key, sizeof(key), "%s.pooling_type", m->arch->name);
	if (alice_gguf_get_int(m->gguf, key, &v, NULL) != ALICE_OK || v < 0 || v > 3)
		return ALICE_POOLING_UNSPECIFIED;
	return (int)v;
}
