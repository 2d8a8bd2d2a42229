/* gguf_write.c — GGUF v3 writer (see gguf_write.h). Values are serialized to
 * their wire bytes when set; tensor data is generated at write time. */
#include "alice/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"

#define WRITER_ALIGN 32

struct bytes {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

struct kv_entry {
	char *key;
	uint32_t type;
	struct bytes val; /* value in wire format (after the type field) */
};

struct tensor_entry {
	char *name;
	uint32_t type, n_dims;
	int64_t ne[4];
	uint64_t nbytes, offset;
	alice_gguf_fill_fn fill;
	void *user;
};

struct alice_gguf_writer {
	struct kv_entry *kv;
	size_t n_kv, cap_kv;
	struct tensor_entry *t;
	size_t n_t, cap_t;
};

static void put(struct bytes *b, const void *src, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

static void put_u32(struct bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(struct bytes *b, const char *s, uint64_t len)
{
	put_u64(b, len);
	put(b, s, len);
}

static size_t scalar_size(uint32_t type)
{
	switch (type) {
	case ALICE_GGUF_UINT8: case ALICE_GGUF_INT8: case ALICE_GGUF_BOOL: return 1;
	case ALICE_GGUF_UINT16: case ALICE_GGUF_INT16: return 2;
	case ALICE_GGUF_UINT32: case ALICE_GGUF_INT32: case ALICE_GGUF_FLOAT32: return 4;
	case ALICE_GGUF_UINT64: case ALICE_GGUF_INT64: case ALICE_GGUF_FLOAT64: return 8;
	default: return 0;
	}
}

struct alice_gguf_writer *alice_gguf_writer_create(void)
{
	return calloc(1, sizeof(struct alice_gguf_writer));
}

void alice_gguf_writer_free(struct alice_gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key);
		free(w->kv[i].val.p);
	}
	for (size_t i = 0; i < w->n_t; i++)
		free(w->t[i].name);
	free(w->kv);
	free(w->t);
	free(w);
}

/* Find or append the entry for key; its old value is discarded. */
static struct kv_entry *kv_slot(struct alice_gguf_writer *w, const char *key, uint32_t type)
{
	for (size_t i = 0; i < w->n_kv; i++) {
		if (strcmp(w->kv[i].key, key) == 0) {
			w->kv[i].val.n = 0;
			w->kv[i].type = type;
			return &w->kv[i];
		}
	}
	if (w->n_kv == w->cap_kv) {
		size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
		struct kv_entry *kv = realloc(w->kv, cap * sizeof(*kv));
		if (!kv)
			return NULL;
		w->kv = kv;
		w->cap_kv = cap;
	}
	struct kv_entry *e = &w->kv[w->n_kv];
	memset(e, 0, sizeof(*e));
	e->key = strdup(key);
	if (!e->key)
		return NULL;
	e->type = type;
	w->n_kv++;
	return e;
}

static enum alice_status set_scalar(struct alice_gguf_writer *w, const char *key, uint32_t type,
				    const void *v)
{
	struct kv_entry *e = kv_slot(w, key, type);
	if (!e)
		return ALICE_ERR_NOMEM;
	put(&e->val, v, scalar_size(type));
	return e->val.oom ? ALICE_ERR_NOMEM : ALICE_OK;
}

enum alice_status alice_gguf_writer_set_u32(struct alice_gguf_writer *w, const char *key, uint32_t v)
{ return set_scalar(w, key, ALICE_GGUF_UINT32, &v); }
enum alice_status alice_gguf_writer_set_i32(struct alice_gguf_writer *w, const char *key, int32_t v)
{ return set_scalar(w, key, ALICE_GGUF_INT32, &v); }
enum alice_status alice_gguf_writer_set_u64(struct alice_gguf_writer *w, const char *key, uint64_t v)
{ return set_scalar(w, key, ALICE_GGUF_UINT64, &v); }
enum alice_status alice_gguf_writer_set_f32(struct alice_gguf_writer *w, const char *key, float v)
{ return set_scalar(w, key, ALICE_GGUF_FLOAT32, &v); }
enum alice_status alice_gguf_writer_set_bool(struct alice_gguf_writer *w, const char *key, bool v)
{
	uint8_t b = v ? 1 : 0;
	return set_scalar(w, key, ALICE_GGUF_BOOL, &b);
}

enum alice_status alice_gguf_writer_set_str(struct alice_gguf_writer *w, const char *key, const char *v)
{
	struct kv_entry *e = kv_slot(w, key, ALICE_GGUF_STRING);
	if (!e)
		return ALICE_ERR_NOMEM;
	put_str(&e->val, v, strlen(v));
	return e->val.oom ? ALICE_ERR_NOMEM : ALICE_OK;
}

enum alice_status alice_gguf_writer_set_arr(struct alice_gguf_writer *w, const char *key,
					    enum alice_gguf_type type, const void *data, uint64_t n)
{
	size_t es = scalar_size(type);
	if (!es)
		return ALICE_ERR_INVALID;
	struct kv_entry *e = kv_slot(w, key, ALICE_GGUF_ARRAY);
	if (!e)
		return ALICE_ERR_NOMEM;
	put_u32(&e->val, type);
	put_u64(&e->val, n);
	put(&e->val, data, es * n);
	return e->val.oom ? ALICE_ERR_NOMEM : ALICE_OK;
}

enum alice_status alice_gguf_writer_set_arr_str(struct alice_gguf_writer *w, const char *key,
						const char *const *strs, uint64_t n)
{
	struct kv_entry *e = kv_slot(w, key, ALICE_GGUF_ARRAY);
	if (!e)
		return ALICE_ERR_NOMEM;
	put_u32(&e->val, ALICE_GGUF_STRING);
	put_u64(&e->val, n);
	for (uint64_t i = 0; i < n; i++)
		put_str(&e->val, strs[i], strlen(strs[i]));
	return e->val.oom ? ALICE_ERR_NOMEM : ALICE_OK;
}

/* Serialize an array value read from another file (recursively for nested arrays). */
static enum alice_status put_arr(struct bytes *b, const struct alice_gguf_arr *a)
{
	put_u32(b, a->type);
	put_u64(b, a->n);
	if (a->type == ALICE_GGUF_STRING) {
		for (uint64_t i = 0; i < a->n; i++) {
			struct alice_gguf_str s;
			if (alice_gguf_arr_str(a, i, &s) != ALICE_OK)
				return ALICE_ERR_INVALID;
			put_str(b, s.ptr, s.len);
		}
	} else if (a->type == ALICE_GGUF_ARRAY) {
		for (uint64_t i = 0; i < a->n; i++) {
			struct alice_gguf_arr sub;
			if (alice_gguf_arr_arr(a, i, &sub) != ALICE_OK)
				return ALICE_ERR_INVALID;
			enum alice_status st = put_arr(b, &sub);
			if (st != ALICE_OK)
				return st;
		}
	} else {
		size_t es = scalar_size(a->type);
		if (!es)
			return ALICE_ERR_INVALID;
		put(b, a->data, es * a->n);
	}
	return b->oom ? ALICE_ERR_NOMEM : ALICE_OK;
}

enum alice_status alice_gguf_writer_copy_kv(struct alice_gguf_writer *w, const struct alice_gguf *src,
					    int64_t i)
{
	const char *key = alice_gguf_key(src, i);
	enum alice_gguf_type type = alice_gguf_kv_type(src, i);
	if (!key)
		return ALICE_ERR_RANGE;
	struct kv_entry *e = kv_slot(w, key, type);
	if (!e)
		return ALICE_ERR_NOMEM;
	if (type == ALICE_GGUF_STRING) {
		struct alice_gguf_str s;
		if (alice_gguf_get_str(src, key, &s, NULL) != ALICE_OK)
			return ALICE_ERR_INVALID;
		put_str(&e->val, s.ptr, s.len);
	} else if (type == ALICE_GGUF_ARRAY) {
		struct alice_gguf_arr a;
		if (alice_gguf_get_arr(src, key, &a, NULL) != ALICE_OK)
			return ALICE_ERR_INVALID;
		enum alice_status st = put_arr(&e->val, &a);
		if (st != ALICE_OK)
			return st;
	} else {
		uint8_t v[8] = {0};
		enum alice_status st;
		switch (type) {
		case ALICE_GGUF_UINT8: st = alice_gguf_get_u8(src, key, (uint8_t *)v, NULL); break;
		case ALICE_GGUF_INT8: st = alice_gguf_get_i8(src, key, (int8_t *)v, NULL); break;
		case ALICE_GGUF_UINT16: st = alice_gguf_get_u16(src, key, (uint16_t *)(void *)v, NULL); break;
		case ALICE_GGUF_INT16: st = alice_gguf_get_i16(src, key, (int16_t *)(void *)v, NULL); break;
		case ALICE_GGUF_UINT32: st = alice_gguf_get_u32(src, key, (uint32_t *)(void *)v, NULL); break;
		case ALICE_GGUF_INT32: st = alice_gguf_get_i32(src, key, (int32_t *)(void *)v, NULL); break;
		case ALICE_GGUF_FLOAT32: st = alice_gguf_get_f32(src, key, (float *)(void *)v, NULL); break;
		case ALICE_GGUF_BOOL: st = alice_gguf_get_bool(src, key, (bool *)v, NULL); break;
		case ALICE_GGUF_UINT64: st = alice_gguf_get_u64(src, key, (uint64_t *)(void *)v, NULL); break;
		case ALICE_GGUF_INT64: st = alice_gguf_get_i64(src, key, (int64_t *)(void *)v, NULL); break;
		case ALICE_GGUF_FLOAT64: st = alice_gguf_get_f64(src, key, (double *)(void *)v, NULL); break;
		default: return ALICE_ERR_INVALID;
		}
		if (st != ALICE_OK)
			return st;
		put(&e->val, v, scalar_size(type));
	}
	return e->val.oom ? ALICE_ERR_NOMEM : ALICE_OK;
}

enum alice_status alice_gguf_writer_add_tensor(struct alice_gguf_writer *w, const char *name,
					       uint32_t type, uint32_t n_dims, const int64_t *ne,
					       alice_gguf_fill_fn fill, void *user)
{
	if (n_dims < 1 || n_dims > 4 || !alice_type_info(type))
		return ALICE_ERR_INVALID;
	uint64_t rows = 1;
	for (uint32_t d = 1; d < n_dims; d++)
		rows *= (uint64_t)ne[d];
	size_t row = alice_row_size(type, ne[0]);
	if (!row)
		return ALICE_ERR_INVALID;
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? w->cap_t * 2 : 64;
		struct tensor_entry *t = realloc(w->t, cap * sizeof(*t));
		if (!t)
			return ALICE_ERR_NOMEM;
		w->t = t;
		w->cap_t = cap;
	}
	struct tensor_entry *t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name)
		return ALICE_ERR_NOMEM;
	t->type = type;
	t->n_dims = n_dims;
	for (int d = 0; d < 4; d++)
		t->ne[d] = d < (int)n_dims ? ne[d] : 1;
	t->nbytes = row * rows;
	t->fill = fill;
	t->user = user;
	w->n_t++;
	return ALICE_OK;
}

static uint64_t align_up(uint64_t x) { return (x + WRITER_ALIGN - 1) / WRITER_ALIGN * WRITER_ALIGN; }

/* Where the file's bytes go: a FILE or memory. */
struct sink {
	FILE *f;
	struct bytes mem;
};

static bool sink_put(struct sink *s, const void *p, size_t n)
{
	if (s->f)
		return fwrite(p, 1, n, s->f) == n;
	put(&s->mem, p, n);
	return !s->mem.oom;
}

static enum alice_status emit(struct alice_gguf_writer *w, const char *path, struct sink *out,
			      struct alice_error *err)
{
	struct bytes h = {0};
	enum alice_status st = ALICE_OK;
	void *buf = NULL;

	put(&h, "GGUF", 4);
	put_u32(&h, 3);
	put_u64(&h, w->n_t);
	put_u64(&h, w->n_kv);
	for (size_t i = 0; i < w->n_kv; i++) {
		put_str(&h, w->kv[i].key, strlen(w->kv[i].key));
		put_u32(&h, w->kv[i].type);
		put(&h, w->kv[i].val.p, w->kv[i].val.n);
	}
	uint64_t off = 0;
	for (size_t i = 0; i < w->n_t; i++) {
		struct tensor_entry *t = &w->t[i];
		put_str(&h, t->name, strlen(t->name));
		put_u32(&h, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			put_u64(&h, (uint64_t)t->ne[d]);
		put_u32(&h, t->type);
		t->offset = off;
		put_u64(&h, off);
		off = align_up(off + t->nbytes);
	}
	if (h.oom) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory building the header", path);
		goto out;
	}
	static const uint8_t zeros[WRITER_ALIGN];
	put(&h, zeros, align_up(h.n) - h.n);
	if (!sink_put(out, h.p, h.n))
		goto write_error;
	for (size_t i = 0; i < w->n_t; i++) {
		struct tensor_entry *t = &w->t[i];
		void *nb = realloc(buf, t->nbytes ? t->nbytes : 1);
		if (!nb) {
			st = alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory for tensor %s (%llu bytes)",
					path, t->name, (unsigned long long)t->nbytes);
			goto out;
		}
		buf = nb;
		if (t->fill) {
			st = t->fill(t->user, t->name, buf, t->nbytes, err);
			if (st != ALICE_OK)
				goto out;
		} else {
			memset(buf, 0, t->nbytes);
		}
		if (!sink_put(out, buf, t->nbytes))
			goto write_error;
		uint64_t pad = align_up(t->nbytes) - t->nbytes;
		if (i + 1 < w->n_t && pad && !sink_put(out, zeros, pad))
			goto write_error;
	}
	goto out;
write_error:
	st = out->f ? alice_fail(err, ALICE_ERR_IO, "%s: write failed: %s", path, strerror(errno))
		    : alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory", path);
out:
	free(buf);
	free(h.p);
	return st;
}

enum alice_status alice_gguf_writer_write(struct alice_gguf_writer *w, const char *path,
					  struct alice_error *err)
{
	struct sink out = {.f = fopen(path, "wb")};
	if (!out.f)
		return alice_fail(err, ALICE_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
	enum alice_status st = emit(w, path, &out, err);
	if (fclose(out.f) != 0 && st == ALICE_OK)
		st = alice_fail(err, ALICE_ERR_IO, "%s: write failed: %s", path, strerror(errno));
	return st;
}

enum alice_status alice_gguf_writer_write_memory(struct alice_gguf_writer *w, void **data, size_t *size,
						 struct alice_error *err)
{
	struct sink out = {0};
	*data = NULL;
	*size = 0;
	enum alice_status st = emit(w, "<memory>", &out, err);
	if (st != ALICE_OK) {
		free(out.mem.p);
		return st;
	}
	*data = out.mem.p;
	*size = out.mem.n;
	return ALICE_OK;
}
