/* gguf.c — mmap'd, validating GGUF v2/v3 reader (see alice/gguf.h).
 *
 * The whole file is checked at open: every read goes through a bounds-checked
 * cursor, every size product is overflow-checked, counts are compared with
 * what the remaining bytes could possibly hold before anything is allocated.
 * Values are not copied: the handle keeps pointers into the mapping, plus
 * per-array element indexes (for string and nested arrays, so element access
 * is O(1)) and two hash tables (keys, tensor names). Everything the handle
 * allocates lives in one arena freed by alice_gguf_close(). */
#include "alice/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alice/quant.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_MAX_NEST 16 /* arrays of arrays deeper than this are refused */

/* ---- arena: every allocation of a handle, freed at once ------------------ */

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

struct arena {
	struct arena_block *head;
};

static void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	struct arena_block *b = a->head;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		if (cap > SIZE_MAX - sizeof(*b))
			return NULL;
		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = a->head;
		a->head = b;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

static void arena_free(struct arena *a)
{
	struct arena_block *b = a->head;
	while (b) {
		struct arena_block *next = b->next;
		free(b);
		b = next;
	}
	a->head = NULL;
}

/* ---- the handle ------------------------------------------------------------ */

struct kv {
	const char *key; /* NUL-terminated copy */
	uint64_t key_len;
	enum alice_gguf_type type;
	const void *val;           /* scalar: the bytes in the mapping */
	struct alice_gguf_str str; /* STRING */
	struct alice_gguf_arr arr; /* ARRAY */
};

/* Open-addressing hash table of indexes (-1 = empty slot). */
struct htab {
	int64_t *slots;
	uint64_t mask;
};

struct alice_gguf {
	char *path;
	const unsigned char *base;
	uint64_t size;
	bool mapped; /* base came from mmap */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	int64_t n_kv, n_tensors;
	struct kv *kvs;
	struct alice_gguf_tensor_info *tensors;
	struct htab key_index, tensor_index;
	struct arena arena;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static bool htab_init(struct htab *t, struct arena *a, int64_t n)
{
	uint64_t cap = 8;
	while (cap < (uint64_t)n * 2)
		cap <<= 1;
	t->slots = arena_alloc(a, cap * sizeof(int64_t));
	if (!t->slots)
		return false;
	for (uint64_t i = 0; i < cap; i++)
		t->slots[i] = -1;
	t->mask = cap - 1;
	return true;
}

/* names(i) gives the NUL-terminated name of entry i. */
typedef const char *(*name_fn)(const struct alice_gguf *g, int64_t i);

static int64_t htab_find(const struct alice_gguf *g, const struct htab *t, name_fn names,
			 const char *s)
{
	if (!t->slots || !s)
		return -1;
	size_t n = strlen(s);
	for (uint64_t h = hash_bytes(s, n) & t->mask;; h = (h + 1) & t->mask) {
		int64_t i = t->slots[h];
		if (i < 0)
			return -1;
		if (strcmp(names(g, i), s) == 0)
			return i;
	}
}

/* Insert entry i; returns the index of an existing entry with the same name, or -1. */
static int64_t htab_insert(const struct alice_gguf *g, struct htab *t, name_fn names, int64_t i)
{
	const char *s = names(g, i);
	for (uint64_t h = hash_bytes(s, strlen(s)) & t->mask;; h = (h + 1) & t->mask) {
		int64_t j = t->slots[h];
		if (j < 0) {
			t->slots[h] = i;
			return -1;
		}
		if (strcmp(names(g, j), s) == 0)
			return j;
	}
}

static const char *kv_name(const struct alice_gguf *g, int64_t i) { return g->kvs[i].key; }
static const char *tensor_name(const struct alice_gguf *g, int64_t i) { return g->tensors[i].name; }

/* ---- bounds-checked cursor --------------------------------------------------- */

struct cur {
	const unsigned char *p;
	uint64_t size, pos;
	const char *name; /* for messages */
	struct alice_error *err;
};

static uint64_t cur_left(const struct cur *c) { return c->size - c->pos; }

static enum alice_status truncated(struct cur *c, const char *what)
{
	return alice_fail(c->err, ALICE_ERR_INVALID,
			  "%s: truncated file: %s at offset %" PRIu64 " runs past the end (%" PRIu64 " bytes)",
			  c->name, what, c->pos, c->size);
}

static enum alice_status cur_take(struct cur *c, uint64_t n, const char *what, const void **out)
{
	if (n > cur_left(c))
		return truncated(c, what);
	*out = c->p + c->pos;
	c->pos += n;
	return ALICE_OK;
}

static enum alice_status cur_u32(struct cur *c, const char *what, uint32_t *out)
{
	const void *p = NULL;
	enum alice_status st = cur_take(c, 4, what, &p);
	if (st == ALICE_OK)
		memcpy(out, p, 4);
	return st;
}

static enum alice_status cur_u64(struct cur *c, const char *what, uint64_t *out)
{
	const void *p = NULL;
	enum alice_status st = cur_take(c, 8, what, &p);
	if (st == ALICE_OK)
		memcpy(out, p, 8);
	return st;
}

static enum alice_status cur_str(struct cur *c, const char *what, struct alice_gguf_str *out)
{
	uint64_t at = c->pos, len;
	enum alice_status st = cur_u64(c, what, &len);
	if (st != ALICE_OK)
		return st;
	if (len > cur_left(c))
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: %s at offset %" PRIu64 ": string length %" PRIu64
				  " runs past the end of the file",
				  c->name, what, at, len);
	out->ptr = (const char *)c->p + c->pos;
	out->len = len;
	c->pos += len;
	return ALICE_OK;
}

/* ---- values ------------------------------------------------------------------ */

static uint64_t scalar_size(uint32_t t)
{
	switch (t) {
	case ALICE_GGUF_UINT8: case ALICE_GGUF_INT8: case ALICE_GGUF_BOOL: return 1;
	case ALICE_GGUF_UINT16: case ALICE_GGUF_INT16: return 2;
	case ALICE_GGUF_UINT32: case ALICE_GGUF_INT32: case ALICE_GGUF_FLOAT32: return 4;
	case ALICE_GGUF_UINT64: case ALICE_GGUF_INT64: case ALICE_GGUF_FLOAT64: return 8;
	default: return 0;
	}
}

static enum alice_status parse_array(struct alice_gguf *g, struct cur *c, const char *key,
				     int depth, struct alice_gguf_arr *out)
{
	uint64_t at = c->pos;
	uint32_t et;
	uint64_t n;
	enum alice_status st;
	if ((st = cur_u32(c, "array element type", &et)) || (st = cur_u64(c, "array length", &n)))
		return st;
	if (et >= ALICE_GGUF_TYPE_COUNT)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: key '%s': invalid array element type %" PRIu32 " at offset %" PRIu64,
				  c->name, key, et, at);
	out->type = (enum alice_gguf_type)et;
	out->n = n;
	out->data = c->p + c->pos;
	out->priv_ = NULL;
	uint64_t esz = scalar_size(et);
	/* Smallest possible encoding of one element bounds n before any allocation. */
	uint64_t min_elem = esz ? esz : et == ALICE_GGUF_STRING ? 8 : 12;
	if (n > cur_left(c) / min_elem)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: key '%s': array length %" PRIu64 " at offset %" PRIu64
				  " is larger than the file can hold",
				  c->name, key, n, at);
	if (!esz && n > SIZE_MAX / sizeof(struct alice_gguf_arr))
		return alice_fail(c->err, ALICE_ERR_NOMEM, "%s: out of memory", c->name);
	if (esz) {
		c->pos += n * esz;
		return ALICE_OK;
	}
	if (et == ALICE_GGUF_STRING) {
		struct alice_gguf_str *idx = n ? arena_alloc(&g->arena, n * sizeof(*idx)) : NULL;
		if (n && !idx)
			return alice_fail(c->err, ALICE_ERR_NOMEM, "%s: out of memory", c->name);
		for (uint64_t i = 0; i < n; i++)
			if ((st = cur_str(c, "array string", &idx[i])))
				return st;
		out->priv_ = idx;
		return ALICE_OK;
	}
	/* ARRAY of arrays */
	if (depth >= GGUF_MAX_NEST)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: key '%s': arrays nested deeper than %d at offset %" PRIu64,
				  c->name, key, GGUF_MAX_NEST, at);
	struct alice_gguf_arr *idx = n ? arena_alloc(&g->arena, n * sizeof(*idx)) : NULL;
	if (n && !idx)
		return alice_fail(c->err, ALICE_ERR_NOMEM, "%s: out of memory", c->name);
	for (uint64_t i = 0; i < n; i++)
		if ((st = parse_array(g, c, key, depth + 1, &idx[i])))
			return st;
	out->priv_ = idx;
	return ALICE_OK;
}

static enum alice_status parse_kv(struct alice_gguf *g, struct cur *c, int64_t i)
{
	struct kv *kv = &g->kvs[i];
	struct alice_gguf_str k;
	uint64_t at = c->pos;
	uint32_t t;
	enum alice_status st;
	if ((st = cur_str(c, "metadata key", &k)))
		return st;
	if (memchr(k.ptr, 0, k.len))
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: metadata key %" PRId64 " at offset %" PRIu64 " contains a NUL byte",
				  c->name, i, at);
	char *key = arena_alloc(&g->arena, k.len + 1);
	if (!key)
		return alice_fail(c->err, ALICE_ERR_NOMEM, "%s: out of memory", c->name);
	memcpy(key, k.ptr, k.len);
	key[k.len] = 0;
	kv->key = key;
	kv->key_len = k.len;
	uint64_t tat = c->pos;
	if ((st = cur_u32(c, "metadata value type", &t)))
		return st;
	if (t >= ALICE_GGUF_TYPE_COUNT)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: key '%s': invalid value type %" PRIu32 " at offset %" PRIu64,
				  c->name, key, t, tat);
	kv->type = (enum alice_gguf_type)t;
	if (t == ALICE_GGUF_STRING)
		st = cur_str(c, "metadata string value", &kv->str);
	else if (t == ALICE_GGUF_ARRAY)
		st = parse_array(g, c, key, 0, &kv->arr);
	else
		st = cur_take(c, scalar_size(t), "metadata value", &kv->val);
	if (st)
		return st;
	int64_t dup = htab_insert(g, &g->key_index, kv_name, i);
	if (dup >= 0)
		return alice_fail(c->err, ALICE_ERR_INVALID, "%s: duplicate metadata key '%s' (entries %" PRId64
				  " and %" PRId64 ")", c->name, key, dup, i);
	return ALICE_OK;
}

/* ---- tensors ------------------------------------------------------------------- */

static enum alice_status parse_tensor_info(struct alice_gguf *g, struct cur *c, int64_t i)
{
	struct alice_gguf_tensor_info *ti = &g->tensors[i];
	struct alice_gguf_str nm;
	uint64_t at = c->pos;
	enum alice_status st;
	if ((st = cur_str(c, "tensor name", &nm)))
		return st;
	if (memchr(nm.ptr, 0, nm.len))
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: tensor %" PRId64 " at offset %" PRIu64 ": name contains a NUL byte",
				  c->name, i, at);
	char *name = arena_alloc(&g->arena, nm.len + 1);
	if (!name)
		return alice_fail(c->err, ALICE_ERR_NOMEM, "%s: out of memory", c->name);
	memcpy(name, nm.ptr, nm.len);
	name[nm.len] = 0;
	ti->name = name;
	if ((st = cur_u32(c, "tensor n_dims", &ti->n_dims)))
		return st;
	if (ti->n_dims < 1 || ti->n_dims > ALICE_GGUF_MAX_DIMS)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: tensor '%s': n_dims %" PRIu32 " is not in 1..%d",
				  c->name, name, ti->n_dims, ALICE_GGUF_MAX_DIMS);
	for (int d = 0; d < ALICE_GGUF_MAX_DIMS; d++)
		ti->ne[d] = 1;
	int64_t nel = 1;
	for (uint32_t d = 0; d < ti->n_dims; d++) {
		uint64_t v;
		if ((st = cur_u64(c, "tensor dimension", &v)))
			return st;
		if (v > (uint64_t)INT64_MAX)
			return alice_fail(c->err, ALICE_ERR_INVALID,
					  "%s: tensor '%s': dimension %" PRIu32 " is negative (%" PRId64 ")",
					  c->name, name, d, (int64_t)v);
		ti->ne[d] = (int64_t)v;
		if (v != 0 && nel > INT64_MAX / (int64_t)v)
			return alice_fail(c->err, ALICE_ERR_INVALID,
					  "%s: tensor '%s': element count overflows (dims product > 2^63)",
					  c->name, name);
		nel *= (int64_t)v;
	}
	if ((st = cur_u32(c, "tensor type", &ti->type)) || (st = cur_u64(c, "tensor offset", &ti->offset)))
		return st;
	const struct alice_type_info *info = alice_type_info(ti->type);
	if (!info || info->block_size == 0 || info->type_size == 0)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: tensor '%s': unknown ggml type id %" PRIu32, c->name, name, ti->type);
	if (ti->ne[0] % info->block_size != 0)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: tensor '%s': row of %" PRId64 " elements is not a multiple of the %s block size %" PRIu32,
				  c->name, name, ti->ne[0], info->name, info->block_size);
	/* nbytes = ne0/bs*type_size * ne1*ne2*ne3, overflow-checked. */
	uint64_t nb = (uint64_t)(ti->ne[0] / info->block_size);
	if (nb > UINT64_MAX / info->type_size)
		goto overflow;
	nb *= info->type_size;
	for (uint32_t d = 1; d < ti->n_dims; d++) {
		uint64_t v = (uint64_t)ti->ne[d];
		if (v != 0 && nb > UINT64_MAX / v)
			goto overflow;
		nb *= v;
	}
	ti->nbytes = nb;
	if (ti->offset % g->alignment != 0)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "%s: tensor '%s': data offset %" PRIu64 " is not aligned to %" PRIu32,
				  c->name, name, ti->offset, g->alignment);
	int64_t dup = htab_insert(g, &g->tensor_index, tensor_name, i);
	if (dup >= 0)
		return alice_fail(c->err, ALICE_ERR_INVALID, "%s: duplicate tensor name '%s' (tensors %" PRId64
				  " and %" PRId64 ")", c->name, name, dup, i);
	return ALICE_OK;
overflow:
	return alice_fail(c->err, ALICE_ERR_INVALID, "%s: tensor '%s': byte size overflows", c->name, name);
}

struct span {
	uint64_t offset;
	int64_t idx;
};

static int cmp_span(const void *a, const void *b)
{
	uint64_t x = ((const struct span *)a)->offset, y = ((const struct span *)b)->offset;
	return x < y ? -1 : x > y;
}

/* Every tensor's data inside the file, and no two overlapping. */
static enum alice_status check_tensor_ranges(struct alice_gguf *g, struct alice_error *err)
{
	uint64_t data_size = g->size - g->data_offset;
	for (int64_t i = 0; i < g->n_tensors; i++) {
		struct alice_gguf_tensor_info *ti = &g->tensors[i];
		if (ti->offset > data_size || ti->nbytes > data_size - ti->offset)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "%s: tensor '%s': data [%" PRIu64 ", +%" PRIu64
					  ") is outside the file's data section (%" PRIu64 " bytes)",
					  g->path, ti->name, ti->offset, ti->nbytes, data_size);
		ti->data = g->base + g->data_offset + ti->offset;
	}
	if (g->n_tensors < 2)
		return ALICE_OK;
	struct span *order = malloc((size_t)g->n_tensors * sizeof(*order));
	if (!order)
		return alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory", g->path);
	for (int64_t i = 0; i < g->n_tensors; i++)
		order[i] = (struct span){g->tensors[i].offset, i};
	qsort(order, (size_t)g->n_tensors, sizeof(*order), cmp_span);
	/* Running end of the data seen so far (zero-size tensors occupy nothing). */
	enum alice_status st = ALICE_OK;
	uint64_t end = 0;
	const struct alice_gguf_tensor_info *last = NULL;
	for (int64_t k = 0; k < g->n_tensors; k++) {
		const struct alice_gguf_tensor_info *b = &g->tensors[order[k].idx];
		if (!b->nbytes)
			continue;
		if (last && b->offset < end) {
			st = alice_fail(err, ALICE_ERR_INVALID,
					"%s: tensors '%s' and '%s' have overlapping data ([%" PRIu64 ", +%" PRIu64
					") and [%" PRIu64 ", +%" PRIu64 "))",
					g->path, last->name, b->name, last->offset, last->nbytes, b->offset, b->nbytes);
			break;
		}
		end = b->offset + b->nbytes;
		last = b;
	}
	free(order);
	return st;
}

/* ---- open ------------------------------------------------------------------------ */

static enum alice_status parse(struct alice_gguf *g, struct alice_error *err)
{
	struct cur c = {.p = g->base, .size = g->size, .pos = 0, .name = g->path, .err = err};
	enum alice_status st;
	const void *magic;
	if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: not a GGUF file (bad magic)", g->path);
	(void)cur_take(&c, 4, "magic", &magic);
	if ((st = cur_u32(&c, "version", &g->version)))
		return st;
	if (g->version == 1)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: GGUF version 1 is not supported (only v2 and v3; re-convert the model)", g->path);
	if (g->version != 2 && g->version != 3) {
		if ((g->version & 0xffff) == 0 && g->version != 0)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "%s: big-endian GGUF (version 0x%08" PRIx32 ") is not supported",
					  g->path, g->version);
		return alice_fail(err, ALICE_ERR_INVALID, "%s: unsupported GGUF version %" PRIu32,
				  g->path, g->version);
	}
	uint64_t n_tensors, n_kv;
	if ((st = cur_u64(&c, "tensor count", &n_tensors)) || (st = cur_u64(&c, "metadata count", &n_kv)))
		return st;
	/* A kv takes at least 13 bytes (key length, type, 1-byte value), a tensor info 32. */
	if (n_kv > cur_left(&c) / 13)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: metadata count %" PRIu64 " is larger than the file can hold", g->path, n_kv);
	if (n_tensors > cur_left(&c) / 32)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: tensor count %" PRIu64 " is larger than the file can hold", g->path, n_tensors);
	g->n_kv = (int64_t)n_kv;
	g->n_tensors = (int64_t)n_tensors;
	g->kvs = arena_alloc(&g->arena, (n_kv ? n_kv : 1) * sizeof(*g->kvs));
	g->tensors = arena_alloc(&g->arena, (n_tensors ? n_tensors : 1) * sizeof(*g->tensors));
	if (!g->kvs || !g->tensors || !htab_init(&g->key_index, &g->arena, g->n_kv) ||
	    !htab_init(&g->tensor_index, &g->arena, g->n_tensors))
		return alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory", g->path);
	memset(g->kvs, 0, (n_kv ? n_kv : 1) * sizeof(*g->kvs));
	memset(g->tensors, 0, (n_tensors ? n_tensors : 1) * sizeof(*g->tensors));

	for (int64_t i = 0; i < g->n_kv; i++)
		if ((st = parse_kv(g, &c, i)))
			return st;

	g->alignment = ALICE_GGUF_DEFAULT_ALIGNMENT;
	int64_t ai = alice_gguf_find_key(g, "general.alignment");
	if (ai >= 0) {
		if (g->kvs[ai].type != ALICE_GGUF_UINT32)
			return alice_fail(err, ALICE_ERR_INVALID, "%s: general.alignment has type %s, not uint32",
					  g->path, alice_gguf_type_name(g->kvs[ai].type));
		uint32_t a;
		memcpy(&a, g->kvs[ai].val, 4);
		if (a == 0 || (a & (a - 1)) != 0)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "%s: general.alignment %" PRIu32 " is not a power of two", g->path, a);
		g->alignment = a;
	}

	for (int64_t i = 0; i < g->n_tensors; i++)
		if ((st = parse_tensor_info(g, &c, i)))
			return st;

	/* Data section: header end rounded up to the alignment. A file with no
	 * tensors may end without the padding. */
	uint64_t end = c.pos, pad = (g->alignment - end % g->alignment) % g->alignment;
	g->data_offset = end + pad; /* end <= size < 2^63: no overflow */
	if (g->data_offset > g->size) {
		if (g->n_tensors > 0)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "%s: truncated file: data section at %" PRIu64 " starts past the end (%" PRIu64 " bytes)",
					  g->path, g->data_offset, g->size);
		g->data_offset = g->size;
	}
	return check_tensor_ranges(g, err);
}

static enum alice_status open_common(struct alice_gguf *g, struct alice_gguf **out, struct alice_error *err)
{
	enum alice_status st = parse(g, err);
	if (st != ALICE_OK) {
		alice_gguf_close(g);
		return st;
	}
	*out = g;
	return ALICE_OK;
}

static struct alice_gguf *handle_new(const char *name)
{
	struct alice_gguf *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->path = strdup(name ? name : "(memory)");
	if (!g->path) {
		free(g);
		return NULL;
	}
	return g;
}

enum alice_status alice_gguf_open_memory(const void *data, size_t size, const char *name,
					 struct alice_gguf **out, struct alice_error *err)
{
	*out = NULL;
	if (!data && size)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: no data", name ? name : "(memory)");
	if ((uint64_t)size > (uint64_t)INT64_MAX)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: buffer too large", name ? name : "(memory)");
	struct alice_gguf *g = handle_new(name);
	if (!g)
		return alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory", name ? name : "(memory)");
	g->base = data ? data : (const unsigned char *)"";
	g->size = size;
	return open_common(g, out, err);
}

enum alice_status alice_gguf_open(const char *path, struct alice_gguf **out, struct alice_error *err)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return alice_fail(err, ALICE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		int e = errno;
		close(fd);
		return alice_fail(err, ALICE_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return alice_fail(err, ALICE_ERR_IO, "%s: not a regular file", path);
	}
	if (sb.st_size < 8) {
		close(fd);
		return alice_fail(err, ALICE_ERR_INVALID, "%s: not a GGUF file (only %lld bytes)", path,
				  (long long)sb.st_size);
	}
	void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (m == MAP_FAILED)
		return alice_fail(err, ALICE_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
	struct alice_gguf *g = handle_new(path);
	if (!g) {
		munmap(m, (size_t)sb.st_size);
		return alice_fail(err, ALICE_ERR_NOMEM, "%s: out of memory", path);
	}
	g->base = m;
	g->size = (uint64_t)sb.st_size;
	g->mapped = true;
	return open_common(g, out, err);
}

void alice_gguf_close(struct alice_gguf *g)
{
	if (!g)
		return;
	if (g->mapped)
		munmap((void *)g->base, (size_t)g->size);
	arena_free(&g->arena);
	free(g->path);
	free(g);
}

void alice_gguf_release(struct alice_gguf *g, const void *p, uint64_t n)
{
	if (!g || !g->mapped || !n)
		return;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)g->base + (uintptr_t)g->data_offset,
		  hi = (uintptr_t)g->base + (uintptr_t)g->size;
	uintptr_t b = (uintptr_t)p < lo ? lo : (uintptr_t)p, e = (uintptr_t)p + (uintptr_t)n;
	b = (b + page - 1) & ~(page - 1); /* whole pages inside the range only */
	e = e >= hi ? hi : e & ~(page - 1);
	if (b < e) /* read-only private mapping: the pages are dropped, a later read faults them in again */
		madvise((void *)b, e - b, MADV_DONTNEED);
}

/* ---- accessors --------------------------------------------------------------------- */

const char *alice_gguf_path(const struct alice_gguf *g) { return g->path; }
uint32_t alice_gguf_version(const struct alice_gguf *g) { return g->version; }
uint32_t alice_gguf_alignment(const struct alice_gguf *g) { return g->alignment; }
uint64_t alice_gguf_data_offset(const struct alice_gguf *g) { return g->data_offset; }
const void *alice_gguf_base(const struct alice_gguf *g) { return g->base; }
uint64_t alice_gguf_size(const struct alice_gguf *g) { return g->size; }
int64_t alice_gguf_n_kv(const struct alice_gguf *g) { return g->n_kv; }
int64_t alice_gguf_n_tensors(const struct alice_gguf *g) { return g->n_tensors; }

int64_t alice_gguf_find_key(const struct alice_gguf *g, const char *key)
{
	return htab_find(g, &g->key_index, kv_name, key);
}

const char *alice_gguf_key(const struct alice_gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL;
}

enum alice_gguf_type alice_gguf_kv_type(const struct alice_gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_kv ? g->kvs[i].type : ALICE_GGUF_TYPE_COUNT;
}

const char *alice_gguf_type_name(enum alice_gguf_type t)
{
	static const char *const names[ALICE_GGUF_TYPE_COUNT] = {
		"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
		"bool", "string", "array", "uint64", "int64", "float64",
	};
	return (unsigned)t < ALICE_GGUF_TYPE_COUNT ? names[t] : "invalid";
}

int64_t alice_gguf_find_tensor(const struct alice_gguf *g, const char *name)
{
	return htab_find(g, &g->tensor_index, tensor_name, name);
}

const struct alice_gguf_tensor_info *alice_gguf_tensor(const struct alice_gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

/* ---- typed getters ----------------------------------------------------------------- */

static enum alice_status lookup(const struct alice_gguf *g, const char *key, enum alice_gguf_type want,
				const struct kv **out, struct alice_error *err)
{
	int64_t i = alice_gguf_find_key(g, key);
	if (i < 0)
		return alice_fail(err, ALICE_ERR_NOT_FOUND, "%s: key '%s' not found", g->path, key);
	*out = &g->kvs[i];
	if (want != ALICE_GGUF_TYPE_COUNT && (*out)->type != want)
		return alice_fail(err, ALICE_ERR_TYPE, "%s: key '%s' has type %s, not %s", g->path, key,
				  alice_gguf_type_name((*out)->type), alice_gguf_type_name(want));
	return ALICE_OK;
}

#define SCALAR_GETTER(fn, ctype, tag)                                                        \
	enum alice_status fn(const struct alice_gguf *g, const char *key, ctype *out,        \
			     struct alice_error *err)                                        \
	{                                                                                    \
		const struct kv *kv = NULL;                                                         \
		enum alice_status st = lookup(g, key, tag, &kv, err);                        \
		if (st == ALICE_OK)                                                          \
			memcpy(out, kv->val, sizeof(ctype));                                 \
		return st;                                                                   \
	}

SCALAR_GETTER(alice_gguf_get_u8, uint8_t, ALICE_GGUF_UINT8)
SCALAR_GETTER(alice_gguf_get_i8, int8_t, ALICE_GGUF_INT8)
SCALAR_GETTER(alice_gguf_get_u16, uint16_t, ALICE_GGUF_UINT16)
SCALAR_GETTER(alice_gguf_get_i16, int16_t, ALICE_GGUF_INT16)
SCALAR_GETTER(alice_gguf_get_u32, uint32_t, ALICE_GGUF_UINT32)
SCALAR_GETTER(alice_gguf_get_i32, int32_t, ALICE_GGUF_INT32)
SCALAR_GETTER(alice_gguf_get_u64, uint64_t, ALICE_GGUF_UINT64)
SCALAR_GETTER(alice_gguf_get_i64, int64_t, ALICE_GGUF_INT64)
SCALAR_GETTER(alice_gguf_get_f32, float, ALICE_GGUF_FLOAT32)
SCALAR_GETTER(alice_gguf_get_f64, double, ALICE_GGUF_FLOAT64)

enum alice_status alice_gguf_get_bool(const struct alice_gguf *g, const char *key, bool *out,
				      struct alice_error *err)
{
	const struct kv *kv = NULL;
	enum alice_status st = lookup(g, key, ALICE_GGUF_BOOL, &kv, err);
	if (st == ALICE_OK)
		*out = *(const unsigned char *)kv->val != 0;
	return st;
}

enum alice_status alice_gguf_get_str(const struct alice_gguf *g, const char *key, struct alice_gguf_str *out,
				     struct alice_error *err)
{
	const struct kv *kv = NULL;
	enum alice_status st = lookup(g, key, ALICE_GGUF_STRING, &kv, err);
	if (st == ALICE_OK)
		*out = kv->str;
	return st;
}

enum alice_status alice_gguf_get_arr(const struct alice_gguf *g, const char *key, struct alice_gguf_arr *out,
				     struct alice_error *err)
{
	const struct kv *kv = NULL;
	enum alice_status st = lookup(g, key, ALICE_GGUF_ARRAY, &kv, err);
	if (st == ALICE_OK)
		*out = kv->arr;
	return st;
}

/* Read one integer element of type t at p. Returns false if t is not an
 * integer (or bool) type; *range is set when a uint64 does not fit int64. */
static bool read_int(enum alice_gguf_type t, const void *p, int64_t *out, bool *range)
{
	*range = false;
	switch (t) {
	case ALICE_GGUF_UINT8: { uint8_t v; memcpy(&v, p, 1); *out = v; return true; }
	case ALICE_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); *out = v; return true; }
	case ALICE_GGUF_BOOL: { uint8_t v; memcpy(&v, p, 1); *out = v != 0; return true; }
	case ALICE_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return true; }
	case ALICE_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return true; }
	case ALICE_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return true; }
	case ALICE_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return true; }
	case ALICE_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; return true; }
	case ALICE_GGUF_UINT64: {
		uint64_t v;
		memcpy(&v, p, 8);
		*range = v > (uint64_t)INT64_MAX;
		*out = (int64_t)(v & (uint64_t)INT64_MAX);
		return true;
	}
	default: return false;
	}
}

static bool read_float(enum alice_gguf_type t, const void *p, double *out)
{
	if (t == ALICE_GGUF_FLOAT32) {
		float v;
		memcpy(&v, p, 4);
		*out = v;
		return true;
	}
	if (t == ALICE_GGUF_FLOAT64) {
		memcpy(out, p, 8);
		return true;
	}
	int64_t i;
	bool range;
	if (t == ALICE_GGUF_UINT64) {
		uint64_t v;
		memcpy(&v, p, 8);
		*out = (double)v;
		return true;
	}
	if (t != ALICE_GGUF_BOOL && read_int(t, p, &i, &range)) {
		*out = (double)i;
		return true;
	}
	return false;
}

enum alice_status alice_gguf_get_int(const struct alice_gguf *g, const char *key, int64_t *out,
				     struct alice_error *err)
{
	const struct kv *kv = NULL;
	enum alice_status st = lookup(g, key, ALICE_GGUF_TYPE_COUNT, &kv, err);
	if (st != ALICE_OK)
		return st;
	bool range;
	if (kv->type == ALICE_GGUF_BOOL || !read_int(kv->type, kv->val, out, &range))
		return alice_fail(err, ALICE_ERR_TYPE, "%s: key '%s' has type %s, not an integer", g->path, key,
				  alice_gguf_type_name(kv->type));
	if (range)
		return alice_fail(err, ALICE_ERR_RANGE, "%s: key '%s': value does not fit int64", g->path, key);
	return ALICE_OK;
}

enum alice_status alice_gguf_get_float(const struct alice_gguf *g, const char *key, double *out,
				       struct alice_error *err)
{
	const struct kv *kv = NULL;
	enum alice_status st = lookup(g, key, ALICE_GGUF_TYPE_COUNT, &kv, err);
	if (st != ALICE_OK)
		return st;
	if (kv->type == ALICE_GGUF_STRING || kv->type == ALICE_GGUF_ARRAY || !read_float(kv->type, kv->val, out))
		return alice_fail(err, ALICE_ERR_TYPE, "%s: key '%s' has type %s, not a number", g->path, key,
				  alice_gguf_type_name(kv->type));
	return ALICE_OK;
}

/* ---- array elements ---------------------------------------------------------------- */

enum alice_status alice_gguf_arr_str(const struct alice_gguf_arr *arr, uint64_t i, struct alice_gguf_str *out)
{
	if (arr->type != ALICE_GGUF_STRING)
		return ALICE_ERR_TYPE;
	if (i >= arr->n || !arr->priv_)
		return ALICE_ERR_RANGE;
	*out = ((const struct alice_gguf_str *)arr->priv_)[i];
	return ALICE_OK;
}

enum alice_status alice_gguf_arr_arr(const struct alice_gguf_arr *arr, uint64_t i, struct alice_gguf_arr *out)
{
	if (arr->type != ALICE_GGUF_ARRAY)
		return ALICE_ERR_TYPE;
	if (i >= arr->n || !arr->priv_)
		return ALICE_ERR_RANGE;
	*out = ((const struct alice_gguf_arr *)arr->priv_)[i];
	return ALICE_OK;
}

enum alice_status alice_gguf_arr_int(const struct alice_gguf_arr *arr, uint64_t i, int64_t *out)
{
	uint64_t esz = scalar_size(arr->type);
	if (!esz || arr->type == ALICE_GGUF_FLOAT32 || arr->type == ALICE_GGUF_FLOAT64)
		return ALICE_ERR_TYPE;
	if (i >= arr->n)
		return ALICE_ERR_RANGE;
	bool range;
	read_int(arr->type, (const unsigned char *)arr->data + i * esz, out, &range);
	return range ? ALICE_ERR_RANGE : ALICE_OK;
}

enum alice_status alice_gguf_arr_float(const struct alice_gguf_arr *arr, uint64_t i, double *out)
{
	uint64_t esz = scalar_size(arr->type);
	if (!esz || arr->type == ALICE_GGUF_BOOL)
		return ALICE_ERR_TYPE;
	if (i >= arr->n)
		return ALICE_ERR_RANGE;
	read_float(arr->type, (const unsigned char *)arr->data + i * esz, out);
	return ALICE_OK;
}
