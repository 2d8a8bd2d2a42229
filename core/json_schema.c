/* json_schema.c — JSON Schema -> GBNF (see json_schema.h for the subset).
 * The converter walks the schema and emits one rule per schema node that
 * needs a name (objects, arrays, refs, patterns), plus the shared primitive
 * rules it used. Errors name the JSON pointer of the offending node. */
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"
#include "alice/json_schema.h"
#include "json_schema_internal.h"

/* ---- GBNF text ------------------------------------------------------------------ */

void js_sb_lit(struct alice_sbuf *s, const char *t, size_t n)
{
	alice_sb_add(s, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c == '"')
			alice_sb_add(s, "\\\"");
		else if (c == '\\')
			alice_sb_add(s, "\\\\");
		else if (c == '\n')
			alice_sb_add(s, "\\n");
		else if (c == '\r')
			alice_sb_add(s, "\\r");
		else if (c == '\t')
			alice_sb_add(s, "\\t");
		else if (c < 0x20 || c == 0x7f)
			alice_sb_addf(s, "\\x%02X", c);
		else
			alice_sb_addn(s, (const char *)&c, 1);
	}
	alice_sb_add(s, "\"");
}

/* ---- converter state ------------------------------------------------------------ */

struct rule {
	char *name;
	char *body;
	char *base;      /* the cleaned hint the name was made from (for dedupe) */
	uint32_t next_k; /* when this rule's name is a base: next "-k" suffix to try */
};

struct refent {
	char *ref;
	char *name;
};

struct js_conv {
	struct json_object *root;
	struct rule *rules;
	size_t n_rules, cap_rules;
	struct refent *refs;
	size_t n_refs, cap_refs;
	/* hash tables (open addressing, rule index + 1; 0 = empty) so adding a
	 * rule is O(1) expected: rules by name, and by (base, body) for dedupe */
	uint32_t *by_name, *by_body;
	uint32_t cap_hash;
	size_t max_bytes; /* 0 = no cap; else the GBNF may not grow past this */
	size_t bytes;     /* GBNF bytes of the rules added so far */
	unsigned prims;
	int depth;
	int failed;
	enum alice_status st;
	struct alice_error *err;
	char path[256];
};

char *js_fail(struct js_conv *c, enum alice_status st, const char *fmt, ...)
{
	if (c->failed)
		return NULL;
	c->failed = 1;
	c->st = st;
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	alice_error_set(c->err, "json schema at '%s': %s", c->path[0] ? c->path : "/", msg);
	return NULL;
}

char *js_oom(struct js_conv *c)
{
	return js_fail(c, ALICE_ERR_NOMEM, "out of memory");
}

/* Push a path segment; returns the old length to restore. */
static size_t path_push(struct js_conv *c, const char *seg)
{
	size_t old = strlen(c->path);
	snprintf(c->path + old, sizeof c->path - old, "/%s", seg);
	return old;
}

static void path_pop(struct js_conv *c, size_t old)
{
	c->path[old] = 0;
}

static uint32_t str_hash(const char *t, uint32_t h)
{
	for (; *t; t++)
		h = (h ^ (unsigned char)*t) * 16777619u; /* FNV-1a */
	return h;
}

static uint32_t body_key(const char *base, const char *body)
{
	return str_hash(body, str_hash(base, 2166136261u) ^ 0x9e3779b9u);
}

static void hash_put(uint32_t *tab, uint32_t cap, uint32_t h, uint32_t idx)
{
	for (h &= cap - 1; tab[h]; h = (h + 1) & (cap - 1))
		;
	tab[h] = idx + 1;
}

/* Keep both tables at most half full. */
static int hash_reserve(struct js_conv *c)
{
	if ((uint64_t)(c->n_rules + 1) * 2 <= c->cap_hash)
		return 0;
	uint32_t nc = c->cap_hash ? c->cap_hash * 2 : 256;
	uint32_t *a = calloc(nc, sizeof *a), *b = calloc(nc, sizeof *b);
	if (!a || !b) {
		free(a);
		free(b);
		return -1;
	}
	for (size_t i = 0; i < c->n_rules; i++) {
		hash_put(a, nc, str_hash(c->rules[i].name, 2166136261u), (uint32_t)i);
		hash_put(b, nc, body_key(c->rules[i].base, c->rules[i].body), (uint32_t)i);
	}
	free(c->by_name);
	free(c->by_body);
	c->by_name = a;
	c->by_body = b;
	c->cap_hash = nc;
	return 0;
}

static int64_t find_name(const struct js_conv *c, const char *name)
{
	if (!c->cap_hash)
		return -1;
	for (uint32_t h = str_hash(name, 2166136261u) & (c->cap_hash - 1); c->by_name[h];
	     h = (h + 1) & (c->cap_hash - 1))
		if (strcmp(c->rules[c->by_name[h] - 1].name, name) == 0)
			return c->by_name[h] - 1;
	return -1;
}

/* Count `n` more bytes of GBNF; past the cap, fail with ALICE_ERR_RANGE. */
static int count_bytes(struct js_conv *c, size_t n)
{
	c->bytes += n;
	if (c->max_bytes && c->bytes > c->max_bytes) {
		js_fail(c, ALICE_ERR_RANGE, "the grammar made from this schema is larger than %zu bytes",
			c->max_bytes);
		return -1;
	}
	return 0;
}

/* Add rule `hint` ::= body (takes body). Same body as an earlier rule with
 * the same hint -> that rule. Returns the (borrowed) unique name. O(1)
 * expected per call, and the GBNF size is counted against the cap here, so a
 * big schema fails as soon as its grammar passes the cap. */
const char *js_add_rule(struct js_conv *c, const char *hint, char *body)
{
	if (!body)
		return js_oom(c);
	if (c->failed) {
		free(body);
		return NULL;
	}
	char base[80];
	size_t o = 0;
	for (const char *h = hint; *h && o < sizeof base - 12; h++) {
		char ch = *h;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
		if (ok)
			base[o++] = ch;
		else if (o && base[o - 1] != '-')
			base[o++] = '-';
	}
	while (o && base[o - 1] == '-')
		o--;
	base[o] = 0;
	if (!o)
		strcpy(base, "r");
	if (c->cap_hash) {
		for (uint32_t h = body_key(base, body) & (c->cap_hash - 1); c->by_body[h];
		     h = (h + 1) & (c->cap_hash - 1)) {
			const struct rule *r = &c->rules[c->by_body[h] - 1];
			if (strcmp(r->base, base) == 0 && strcmp(r->body, body) == 0) {
				free(body);
				return r->name;
			}
		}
	}
	char name[96];
	snprintf(name, sizeof name, "%s", base);
	int64_t b = find_name(c, name);
	if (b >= 0) {
		uint32_t k = c->rules[b].next_k ? c->rules[b].next_k : 1;
		for (;; k++) {
			snprintf(name, sizeof name, "%s-%u", base, k);
			if (find_name(c, name) < 0)
				break;
		}
		c->rules[b].next_k = k + 1;
	}
	if (count_bytes(c, strlen(name) + strlen(body) + 6) < 0) { /* "name ::= body\n" */
		free(body);
		return NULL;
	}
	if (!alice_grow((void **)&c->rules, &c->cap_rules, c->n_rules + 1, sizeof *c->rules) ||
	    hash_reserve(c) < 0) {
		free(body);
		return js_oom(c);
	}
	char *nm = strdup(name), *bs = strdup(base);
	if (!nm || !bs) {
		free(nm);
		free(bs);
		free(body);
		return js_oom(c);
	}
	struct rule *r = &c->rules[c->n_rules];
	r->name = nm;
	r->body = body;
	r->base = bs;
	r->next_k = 0;
	hash_put(c->by_name, c->cap_hash, str_hash(nm, 2166136261u), (uint32_t)c->n_rules);
	hash_put(c->by_body, c->cap_hash, body_key(bs, body), (uint32_t)c->n_rules);
	return c->rules[c->n_rules++].name;
}

/* ---- primitives --------------------------------------------------------------------- */

static const struct {
	unsigned bit, deps;
	const char *name, *body;
} prim_rules[] = {
	{P_SPACE, 0, "space", "| \" \" | \"\\n\" [ \\t]{0,20}"},
	{P_BOOLEAN, P_SPACE, "boolean", "(\"true\" | \"false\") space"},
	{P_NULL, P_SPACE, "null", "\"null\" space"},
	{P_CHAR, 0, "char", "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"},
	{P_STRING, P_CHAR | P_SPACE, "string", "\"\\\"\" char* \"\\\"\" space"},
	{P_NUMBER, P_SPACE, "number",
	 "\"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,15})? space"},
	{P_INTEGER, P_SPACE, "integer", "\"-\"? ([0-9] | [1-9] [0-9]{1,15}) space"},
	{P_VALUE, P_OBJECT | P_ARRAY | P_STRING | P_NUMBER | P_BOOLEAN | P_NULL, "value",
	 "object | array | string | number | boolean | null"},
	{P_OBJECT, P_STRING | P_VALUE | P_SPACE, "object",
	 "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space"},
	{P_ARRAY, P_VALUE | P_SPACE, "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space"},
	{P_DATE, 0, "date",
	 "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])"},
	{P_TIME, 0, "time",
	 "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? "
	 "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
	{P_UUID, 0, "uuid",
	 "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"},
};

char *js_use(struct js_conv *c, unsigned bit)
{
	c->prims |= bit;
	for (size_t i = 0; i < sizeof prim_rules / sizeof *prim_rules; i++)
		if (prim_rules[i].bit == bit)
			return strdup(prim_rules[i].name);
	return NULL;
}

/* ---- helpers on json -------------------------------------------------------------- */

static char *json_compact(struct json_object *o)
{
	const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE);
	return t ? strdup(t) : NULL;
}

/* GBNF for one exact JSON value followed by space. */
static char *literal_value(struct js_conv *c, struct json_object *v)
{
	char *t = json_compact(v);
	if (!t)
		return js_oom(c);
	struct alice_sbuf s = {0};
	js_sb_lit(&s, t, strlen(t));
	free(t);
	alice_sb_add(&s, " space");
	free(js_use(c, P_SPACE));
	char *r = alice_sb_take(&s);
	return r ? r : js_oom(c);
}

static int get_nonneg_int(struct js_conv *c, struct json_object *o, const char *key, int64_t *out)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
	    json_object_get_int64(v) > JS_MAX_BOUND) {
		js_fail(c, ALICE_ERR_INVALID, "'%s' must be an integer in 0..%d", key, JS_MAX_BOUND);
		return -1;
	}
	*out = json_object_get_int64(v);
	return 1;
}

/* ---- keyword check ------------------------------------------------------------------- */

static const char *const annotations[] = {"title", "description", "examples", "default", "$schema",
					  "$id", "$comment", "deprecated", "readOnly", "writeOnly",
					  NULL};
static const char *const supported[] = {
	"type", "properties", "required", "additionalProperties", "enum", "const", "items",
	"minItems", "maxItems", "$ref", "$defs", "definitions", "anyOf", "oneOf", "minLength",
	"maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", NULL};

static int in_list(const char *k, const char *const *l)
{
	for (; *l; l++)
		if (strcmp(k, *l) == 0)
			return 1;
	return 0;
}

static int check_keywords(struct js_conv *c, struct json_object *o)
{
	json_object_object_foreach(o, k, v)
	{
		(void)v;
		if (!in_list(k, supported) && !in_list(k, annotations)) {
			js_fail(c, ALICE_ERR_UNSUPPORTED, "unsupported keyword '%.60s'", k);
			return -1;
		}
	}
	return 0;
}

/* ---- integer ranges ------------------------------------------------------------------- */

/* GBNF for the decimal numbers x..y, both with the same number of digits. */
static void digits_range(struct alice_sbuf *s, const char *x, const char *y, size_t n)
{
	if (n == 0)
		return;
	if (n == 1) {
		if (x[0] == y[0])
			alice_sb_addf(s, "\"%c\"", x[0]);
		else
			alice_sb_addf(s, "[%c-%c]", x[0], y[0]);
		return;
	}
	if (x[0] == y[0]) {
		alice_sb_addf(s, "\"%c\" ", x[0]);
		digits_range(s, x + 1, y + 1, n - 1);
		return;
	}
	char nines[24], zeros[24];
	memset(nines, '9', n - 1);
	memset(zeros, '0', n - 1);
	int alts = 0;
	alice_sb_add(s, "(");
	/* x0 followed by x[1..]..99 */
	if (memcmp(x + 1, zeros, n - 1) == 0) {
		/* whole block x0 000..999 merges with the middle */
	} else {
		alice_sb_addf(s, "\"%c\" (", x[0]);
		digits_range(s, x + 1, nines, n - 1);
		alice_sb_add(s, ")");
		alts++;
	}
	char lo = memcmp(x + 1, zeros, n - 1) == 0 ? x[0] : (char)(x[0] + 1);
	char hi = memcmp(y + 1, nines, n - 1) == 0 ? y[0] : (char)(y[0] - 1);
	if (lo <= hi) {
		alice_sb_add(s, alts++ ? " | " : "");
		if (lo == hi)
			alice_sb_addf(s, "\"%c\" [0-9]{%zu}", lo, n - 1);
		else
			alice_sb_addf(s, "[%c-%c] [0-9]{%zu}", lo, hi, n - 1);
	}
	if (memcmp(y + 1, nines, n - 1) != 0) {
		alice_sb_add(s, alts++ ? " | " : "");
		alice_sb_addf(s, "\"%c\" (", y[0]);
		digits_range(s, zeros, y + 1, n - 1);
		alice_sb_add(s, ")");
	}
	alice_sb_add(s, ")");
}

/* Non-negative a..b (b < 0: unbounded); alternatives appended with " | ". */
static void nonneg_range(struct alice_sbuf *s, int64_t a, int64_t b, int *alts)
{
	char xa[24], xb[24];
	int la = snprintf(xa, sizeof xa, "%lld", (long long)a);
	int lb = b < 0 ? 16 : snprintf(xb, sizeof xb, "%lld", (long long)b);
	for (int len = la; len <= lb; len++) {
		char lo[24], hi[24];
		if (len == la) {
			memcpy(lo, xa, (size_t)la + 1);
		} else {
			lo[0] = '1';
			memset(lo + 1, '0', (size_t)len - 1);
			lo[len] = 0;
		}
		if (b >= 0 && len == lb) {
			memcpy(hi, xb, (size_t)lb + 1);
		} else {
			memset(hi, '9', (size_t)len);
			hi[len] = 0;
		}
		alice_sb_add(s, (*alts)++ ? " | " : "");
		digits_range(s, lo, hi, (size_t)len);
	}
}

static char *integer_range(struct js_conv *c, int64_t lo, int has_lo, int64_t hi, int has_hi)
{
	const int64_t LIM = 999999999999999LL; /* 15 digits, like the integer rule */
	if ((has_lo && (lo < -LIM || lo > LIM)) || (has_hi && (hi < -LIM || hi > LIM)))
		return js_fail(c, ALICE_ERR_UNSUPPORTED, "integer bounds beyond 15 digits");
	if (has_lo && has_hi && lo > hi)
		return js_fail(c, ALICE_ERR_INVALID, "minimum is greater than maximum: no integer matches");
	struct alice_sbuf s = {0};
	int alts = 0;
	alice_sb_add(&s, "(");
	/* negative part: -(max(1,-hi) .. -lo) */
	if (!has_lo || lo < 0) {
		int64_t a = has_hi && hi < 0 ? -hi : 1;
		int64_t b = has_lo ? -lo : -1;
		alice_sb_add(&s, alts++ ? " | " : "");
		alice_sb_add(&s, "\"-\" (");
		int in = 0;
		nonneg_range(&s, a, b, &in);
		alice_sb_add(&s, ")");
	}
	if (!has_hi || hi >= 0) {
		int64_t a = has_lo && lo > 0 ? lo : 0;
		nonneg_range(&s, a, has_hi ? hi : -1, &alts);
	}
	alice_sb_add(&s, ") space");
	free(js_use(c, P_SPACE));
	char *t = alice_sb_take(&s);
	return t ? t : js_oom(c);
}

static int bound_value(struct js_conv *c, struct json_object *o, const char *key, int upper,
		       int exclusive, int64_t *out)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
		js_fail(c, ALICE_ERR_UNSUPPORTED, "'%s' must be a number", key);
		return -1;
	}
	double d = json_object_get_double(v);
	if (!isfinite(d) || fabs(d) > 1e15) {
		js_fail(c, ALICE_ERR_UNSUPPORTED, "'%s' is out of range", key);
		return -1;
	}
	double r = upper ? floor(d) : ceil(d);
	if (exclusive && r == d)
		r += upper ? -1 : 1;
	*out = json_object_is_type(v, json_type_int) && !exclusive ? json_object_get_int64(v) : (int64_t)r;
	return 1;
}

/* ---- the visitor ------------------------------------------------------------------------- */

static char *visit(struct js_conv *c, struct json_object *schema, const char *name);

static char *resolve_ref(struct js_conv *c, const char *ref)
{
	for (size_t i = 0; i < c->n_refs; i++)
		if (strcmp(c->refs[i].ref, ref) == 0)
			return strdup(c->refs[i].name);
	const char *rest;
	if (strcmp(ref, "#") == 0)
		rest = ""; /* the whole schema (recursive structures) */
	else if (strncmp(ref, "#/$defs/", 8) == 0)
		rest = ref + 2;
	else if (strncmp(ref, "#/definitions/", 14) == 0)
		rest = ref + 2;
	else
		return js_fail(c, ALICE_ERR_UNSUPPORTED,
			     "$ref '%.80s': only local #, #/$defs/... and #/definitions/... are supported", ref);
	/* walk the JSON pointer */
	struct json_object *cur = c->root;
	char seg[256];
	while (*rest) {
		size_t o = 0;
		while (*rest && *rest != '/') {
			char ch = *rest++;
			if (ch == '~' && (*rest == '0' || *rest == '1'))
				ch = *rest++ == '0' ? '~' : '/';
			if (o < sizeof seg - 1)
				seg[o++] = ch;
		}
		seg[o] = 0;
		if (*rest == '/')
			rest++;
		if (!json_object_is_type(cur, json_type_object) ||
		    !json_object_object_get_ex(cur, seg, &cur))
			return js_fail(c, ALICE_ERR_INVALID, "$ref '%.80s' does not resolve", ref);
	}
	if (!alice_grow((void **)&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs))
		return js_oom(c);
	/* reserve the rule name first so recursive references find it */
	char hint[128];
	snprintf(hint, sizeof hint, "ref-%s", rest[0] ? strrchr(ref, '/') + 1 : "root");
	size_t rl = strlen(ref);
	char *placeholder = malloc(rl + 2); /* unique until the body is known; no real body starts with '#' */
	if (placeholder) {
		placeholder[0] = '#';
		memcpy(placeholder + 1, ref, rl + 1);
	}
	const char *nm = js_add_rule(c, hint, placeholder);
	if (!nm)
		return NULL;
	size_t idx = c->n_rules - 1;
	char *nmc = strdup(nm);
	char *refc = strdup(ref);
	if (!nmc || !refc) {
		free(nmc);
		free(refc);
		return js_oom(c);
	}
	c->refs[c->n_refs].ref = refc;
	c->refs[c->n_refs].name = nmc;
	c->n_refs++;
	char saved[256];
	memcpy(saved, c->path, sizeof saved);
	snprintf(c->path, sizeof c->path, "%s", ref + 1);
	char *body = visit(c, cur, nmc);
	memcpy(c->path, saved, sizeof saved);
	if (!body)
		return NULL;
	size_t old_len = strlen(c->rules[idx].body);
	free(c->rules[idx].body);
	c->rules[idx].body = body; /* the by_body entry keeps the placeholder's key: it is never found */
	if (count_bytes(c, strlen(body)) < 0)
		return NULL;
	c->bytes -= old_len;
	return strdup(nmc);
}

static char *visit_object(struct js_conv *c, struct json_object *o, const char *name)
{
	struct json_object *props = NULL, *req = NULL, *addl = NULL;
	json_object_object_get_ex(o, "properties", &props);
	json_object_object_get_ex(o, "required", &req);
	int has_addl = json_object_object_get_ex(o, "additionalProperties", &addl);
	if (props && !json_object_is_type(props, json_type_object))
		return js_fail(c, ALICE_ERR_INVALID, "'properties' must be an object");
	if (req && !json_object_is_type(req, json_type_array))
		return js_fail(c, ALICE_ERR_INVALID, "'required' must be an array");
	int addl_any = 0; /* extra keys allowed, value = addl_expr */
	char *addl_expr = NULL;
	if (has_addl) {
		if (json_object_is_type(addl, json_type_boolean)) {
			addl_any = json_object_get_boolean(addl);
		} else if (json_object_is_type(addl, json_type_object)) {
			size_t old = path_push(c, "additionalProperties");
			char hint[128];
			snprintf(hint, sizeof hint, "%s-additional-value", name);
			addl_expr = visit(c, addl, hint);
			path_pop(c, old);
			if (!addl_expr)
				return NULL;
			addl_any = 1;
		} else {
			return js_fail(c, ALICE_ERR_INVALID, "'additionalProperties' must be a boolean or a schema");
		}
	}
	/* check required names; reqset: the names as keys (O(1) lookups below) */
	size_t n_req = req ? json_object_array_length(req) : 0;
	struct json_object *reqset = json_object_new_object();
	if (!reqset) {
		free(addl_expr);
		return js_oom(c);
	}
	for (size_t i = 0; i < n_req; i++) {
		struct json_object *e = json_object_array_get_idx(req, i);
		if (!json_object_is_type(e, json_type_string)) {
			free(addl_expr);
			json_object_put(reqset);
			return js_fail(c, ALICE_ERR_INVALID, "'required' entries must be strings");
		}
		struct json_object *dummy;
		if (!props || !json_object_object_get_ex(props, json_object_get_string(e), &dummy)) {
			free(addl_expr);
			json_object_put(reqset);
			return js_fail(c, ALICE_ERR_UNSUPPORTED,
				     "required property '%.60s' is not declared in 'properties'",
				     json_object_get_string(e));
		}
		if (json_object_object_add(reqset, json_object_get_string(e), NULL) != 0) {
			free(addl_expr);
			json_object_put(reqset);
			return js_oom(c);
		}
	}
	if (!props && (!has_addl || (addl_any && !addl_expr))) {
		json_object_put(reqset);
		return js_use(c, P_OBJECT); /* any object */
	}
	if (addl_any && !addl_expr)
		addl_expr = js_use(c, P_VALUE);
	free(js_use(c, P_SPACE));
	/* items: one "key": value rule per property, then optional extras */
	size_t n_items = props ? (size_t)json_object_object_length(props) : 0;
	char **kv = calloc(n_items + 2, sizeof *kv);
	int *required = calloc(n_items + 2, sizeof *required);
	char *res = NULL;
	if (!kv || !required) {
		js_oom(c);
		goto out;
	}
	size_t k = 0;
	if (props) {
		json_object_object_foreach(props, key, val)
		{
			size_t old = path_push(c, "properties");
			size_t old2 = path_push(c, key);
			char hint[160];
			snprintf(hint, sizeof hint, "%s-%s", name, key);
			char *ve = visit(c, val, hint);
			path_pop(c, old2);
			path_pop(c, old);
			if (!ve)
				goto out;
			struct alice_sbuf s = {0};
			struct json_object *ks = json_object_new_string(key);
			char *kj = ks ? json_compact(ks) : NULL;
			json_object_put(ks);
			if (!kj) {
				free(ve);
				js_oom(c);
				goto out;
			}
			js_sb_lit(&s, kj, strlen(kj));
			free(kj);
			alice_sb_add(&s, " space \":\" space ");
			alice_sb_add(&s, ve);
			free(ve);
			snprintf(hint, sizeof hint, "%s-%s-kv", name, key);
			const char *nm = js_add_rule(c, hint, alice_sb_take(&s));
			if (!nm || !(kv[k] = strdup(nm))) {
				js_oom(c);
				goto out;
			}
			struct json_object *dummy;
			required[k] = json_object_object_get_ex(reqset, key, &dummy);
			k++;
		}
	}
	if (addl_expr) {
		free(js_use(c, P_STRING));
		struct alice_sbuf s = {0};
		alice_sb_addf(&s, "string \":\" space %s (\",\" space string \":\" space %s)*", addl_expr, addl_expr);
		char hint[160];
		snprintf(hint, sizeof hint, "%s-additional", name);
		const char *nm = js_add_rule(c, hint, alice_sb_take(&s));
		if (!nm || !(kv[k] = strdup(nm))) {
			js_oom(c);
			goto out;
		}
		required[k] = 0;
		k++;
	}
	/* Items in order; a required one cannot be skipped. rest_j is what may
	 * follow once an item before j was written: item j (after a comma; optional
	 * unless required) then rest_{j+1}. The object is kv_i rest_{i+1} for each
	 * i up to the first required item: one rule per item and one alternative
	 * per leading optional item, so the GBNF grows linearly with the number
	 * of properties (listing every tail in every alternative was quadratic). */
	char **rest = calloc(k + 1, sizeof *rest);
	if (!rest) {
		js_oom(c);
		goto out;
	}
	for (size_t j = k; j-- > 1;) {
		struct alice_sbuf rs = {0};
		alice_sb_addf(&rs, required[j] ? "\",\" space %s" : "(\",\" space %s)?", kv[j]);
		if (rest[j + 1])
			alice_sb_addf(&rs, " %s", rest[j + 1]);
		char hint[200];
		snprintf(hint, sizeof hint, "%s-rest", kv[j]);
		const char *rn = js_add_rule(c, hint, alice_sb_take(&rs));
		if (!rn || !(rest[j] = strdup(rn))) {
			if (rn)
				js_oom(c);
			for (size_t i = 0; i <= k; i++)
				free(rest[i]);
			free(rest);
			goto out;
		}
	}
	struct alice_sbuf body = {0};
	int any_required = 0;
	for (size_t i = 0; i < k; i++)
		any_required |= required[i];
	alice_sb_add(&body, "\"{\" space ");
	if (!any_required)
		alice_sb_add(&body, "( ");
	int alts = 0;
	alice_sb_add(&body, "(");
	for (size_t i = 0; i < k; i++) {
		alice_sb_add(&body, alts++ ? " | " : "");
		alice_sb_add(&body, kv[i]);
		if (rest[i + 1])
			alice_sb_addf(&body, " %s", rest[i + 1]);
		if (required[i])
			break; /* a required item cannot be skipped */
	}
	for (size_t i = 0; i <= k; i++)
		free(rest[i]);
	free(rest);
	alice_sb_add(&body, ")");
	if (!any_required)
		alice_sb_add(&body, " )?");
	alice_sb_add(&body, " \"}\" space");
	if (k == 0) { /* no properties and no extras: only {} */
		free(body.p);
		body = (struct alice_sbuf){0};
		alice_sb_add(&body, "\"{\" space \"}\" space");
	}
	const char *nm = js_add_rule(c, name, alice_sb_take(&body));
	res = nm ? strdup(nm) : NULL;
	if (nm && !res)
		js_oom(c);
out:
	if (kv)
		for (size_t i = 0; i < n_items + 2; i++)
			free(kv[i]);
	free(kv);
	free(required);
	free(addl_expr);
	json_object_put(reqset);
	return res;
}

static char *visit_array(struct js_conv *c, struct json_object *o, const char *name)
{
	struct json_object *items;
	char *ie;
	if (json_object_object_get_ex(o, "items", &items)) {
		if (json_object_is_type(items, json_type_array))
			return js_fail(c, ALICE_ERR_UNSUPPORTED, "'items' as an array (tuples) is not supported");
		size_t old = path_push(c, "items");
		char hint[160];
		snprintf(hint, sizeof hint, "%s-item", name);
		ie = visit(c, items, hint);
		path_pop(c, old);
	} else {
		ie = js_use(c, P_VALUE);
	}
	if (!ie)
		return c->failed ? NULL : js_oom(c);
	int64_t mn = 0, mx = -1;
	if (get_nonneg_int(c, o, "minItems", &mn) < 0 || get_nonneg_int(c, o, "maxItems", &mx) < 0) {
		free(ie);
		return NULL;
	}
	if (mx >= 0 && mx < mn) {
		free(ie);
		return js_fail(c, ALICE_ERR_INVALID, "maxItems < minItems");
	}
	free(js_use(c, P_SPACE));
	struct alice_sbuf s = {0};
	alice_sb_add(&s, "\"[\" space ");
	if (mx != 0) {
		if (mn == 0)
			alice_sb_add(&s, "( ");
		alice_sb_add(&s, ie);
		int64_t lo = mn > 0 ? mn - 1 : 0;
		if (mx < 0)
			alice_sb_addf(&s, " (\",\" space %s){%lld,}", ie, (long long)lo);
		else if (mx - 1 > 0)
			alice_sb_addf(&s, " (\",\" space %s){%lld,%lld}", ie, (long long)lo, (long long)(mx - 1));
		if (mn == 0)
			alice_sb_add(&s, " )?");
		alice_sb_add(&s, " ");
	}
	alice_sb_add(&s, "\"]\" space");
	free(ie);
	const char *nm = js_add_rule(c, name, alice_sb_take(&s));
	return nm ? strdup(nm) : NULL;
}

static char *visit_string(struct js_conv *c, struct json_object *o)
{
	struct json_object *pat, *fmt;
	int64_t mn = 0, mx = -1;
	int has_mn = get_nonneg_int(c, o, "minLength", &mn);
	int has_mx = get_nonneg_int(c, o, "maxLength", &mx);
	if (has_mn < 0 || has_mx < 0)
		return NULL;
	int has_pat = json_object_object_get_ex(o, "pattern", &pat);
	int has_fmt = json_object_object_get_ex(o, "format", &fmt);
	if ((has_pat || has_fmt) && (has_mn || has_mx))
		return js_fail(c, ALICE_ERR_UNSUPPORTED, "minLength/maxLength together with pattern or format");
	if (has_pat && has_fmt)
		return js_fail(c, ALICE_ERR_UNSUPPORTED, "pattern together with format");
	if (has_pat) {
		if (!json_object_is_type(pat, json_type_string))
			return js_fail(c, ALICE_ERR_INVALID, "'pattern' must be a string");
		size_t old = path_push(c, "pattern");
		char *r = js_pattern_to_gbnf(c, json_object_get_string(pat),
					  (size_t)json_object_get_string_len(pat));
		path_pop(c, old);
		return r;
	}
	free(js_use(c, P_SPACE));
	if (has_fmt) {
		const char *f = json_object_is_type(fmt, json_type_string) ? json_object_get_string(fmt) : "";
		const char *body;
		if (strcmp(f, "date") == 0)
			c->prims |= P_DATE, body = "\"\\\"\" date \"\\\"\" space";
		else if (strcmp(f, "time") == 0)
			c->prims |= P_TIME, body = "\"\\\"\" time \"\\\"\" space";
		else if (strcmp(f, "date-time") == 0)
			c->prims |= P_DATE | P_TIME, body = "\"\\\"\" date \"T\" time \"\\\"\" space";
		else if (strcmp(f, "uuid") == 0)
			c->prims |= P_UUID, body = "\"\\\"\" uuid \"\\\"\" space";
		else
			return js_fail(c, ALICE_ERR_UNSUPPORTED,
				     "format '%.40s' is not supported (date, time, date-time, uuid are)", f);
		char *r = strdup(body);
		return r ? r : js_oom(c);
	}
	if (!has_mn && !has_mx)
		return js_use(c, P_STRING);
	if (mx >= 0 && mx < mn)
		return js_fail(c, ALICE_ERR_INVALID, "maxLength < minLength");
	free(js_use(c, P_CHAR));
	struct alice_sbuf s = {0};
	if (mx < 0)
		alice_sb_addf(&s, "\"\\\"\" char{%lld,} \"\\\"\" space", (long long)mn);
	else
		alice_sb_addf(&s, "\"\\\"\" char{%lld,%lld} \"\\\"\" space", (long long)mn, (long long)mx);
	char *r = alice_sb_take(&s);
	return r ? r : js_oom(c);
}

static char *visit_integer(struct js_conv *c, struct json_object *o)
{
	int64_t lo = 0, hi = 0, v;
	int has_lo = 0, has_hi = 0, rc;
	if ((rc = bound_value(c, o, "minimum", 0, 0, &v)) < 0)
		return NULL;
	if (rc)
		lo = v, has_lo = 1;
	if ((rc = bound_value(c, o, "exclusiveMinimum", 0, 1, &v)) < 0)
		return NULL;
	if (rc && (!has_lo || v > lo))
		lo = v, has_lo = 1;
	if ((rc = bound_value(c, o, "maximum", 1, 0, &v)) < 0)
		return NULL;
	if (rc)
		hi = v, has_hi = 1;
	if ((rc = bound_value(c, o, "exclusiveMaximum", 1, 1, &v)) < 0)
		return NULL;
	if (rc && (!has_hi || v < hi))
		hi = v, has_hi = 1;
	if (!has_lo && !has_hi)
		return js_use(c, P_INTEGER);
	return integer_range(c, lo, has_lo, hi, has_hi);
}

static const char *const type_names[] = {"object", "array", "string", "number", "integer",
					 "boolean", "null", "json_object", NULL};

/* Keywords that only make sense for one type: with that type absent, error. */
static int check_applicable(struct js_conv *c, struct json_object *o, const char *type)
{
	static const struct {
		const char *kw, *type;
	} kws[] = {{"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
		   {"items", "array"}, {"minItems", "array"}, {"maxItems", "array"},
		   {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"},
		   {"format", "string"}, {"minimum", "integer"}, {"maximum", "integer"},
		   {"exclusiveMinimum", "integer"}, {"exclusiveMaximum", "integer"}};
	for (size_t i = 0; i < sizeof kws / sizeof *kws; i++) {
		struct json_object *d;
		if (strcmp(kws[i].type, type) != 0 && json_object_object_get_ex(o, kws[i].kw, &d)) {
			/* allowed when the schema lists several types including the keyword's */
			struct json_object *t;
			int listed = 0;
			if (json_object_object_get_ex(o, "type", &t) && json_object_is_type(t, json_type_array))
				for (size_t j = 0; j < json_object_array_length(t); j++)
					if (strcmp(json_object_get_string(json_object_array_get_idx(t, j)),
						   kws[i].type) == 0)
						listed = 1;
			if (!listed && !(strcmp(type, "json_object") == 0 && strcmp(kws[i].type, "object") == 0)) {
				if (strcmp(type, "number") == 0 && strcmp(kws[i].type, "integer") == 0)
					js_fail(c, ALICE_ERR_UNSUPPORTED,
					      "'%s' is only supported for type integer, not number", kws[i].kw);
				else
					js_fail(c, ALICE_ERR_INVALID, "'%s' does not apply to type %s", kws[i].kw,
					      type);
				return -1;
			}
		}
	}
	return 0;
}

static char *visit_typed(struct js_conv *c, struct json_object *o, const char *type, const char *name)
{
	if (check_applicable(c, o, type) < 0)
		return NULL;
	if (strcmp(type, "object") == 0)
		return visit_object(c, o, name);
	if (strcmp(type, "json_object") == 0)
		return js_use(c, P_OBJECT);
	if (strcmp(type, "array") == 0)
		return visit_array(c, o, name);
	if (strcmp(type, "string") == 0)
		return visit_string(c, o);
	if (strcmp(type, "integer") == 0)
		return visit_integer(c, o);
	if (strcmp(type, "number") == 0)
		return js_use(c, P_NUMBER);
	if (strcmp(type, "boolean") == 0)
		return js_use(c, P_BOOLEAN);
	if (strcmp(type, "null") == 0)
		return js_use(c, P_NULL);
	return js_fail(c, ALICE_ERR_INVALID, "unknown type '%.40s'", type);
}

/* Alternation of sub-schemas (anyOf/oneOf) or enum values. */
static char *alternatives(struct js_conv *c, struct json_object *arr, const char *kw, const char *name,
			  int literal)
{
	if (!json_object_is_type(arr, json_type_array) || json_object_array_length(arr) == 0)
		return js_fail(c, ALICE_ERR_INVALID, "'%s' must be a non-empty array", kw);
	struct alice_sbuf s = {0};
	alice_sb_add(&s, "(");
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		char seg[32], hint[160];
		snprintf(seg, sizeof seg, "%zu", i);
		snprintf(hint, sizeof hint, "%s-%zu", name, i);
		size_t old = path_push(c, kw);
		size_t old2 = path_push(c, seg);
		char *e = literal ? literal_value(c, json_object_array_get_idx(arr, i))
				  : visit(c, json_object_array_get_idx(arr, i), hint);
		path_pop(c, old2);
		path_pop(c, old);
		if (!e) {
			free(s.p);
			return NULL;
		}
		alice_sb_add(&s, i ? " | " : "");
		alice_sb_add(&s, e);
		free(e);
	}
	alice_sb_add(&s, ")");
	char *r = alice_sb_take(&s);
	return r ? r : js_oom(c);
}

static char *visit(struct js_conv *c, struct json_object *schema, const char *name)
{
	if (c->failed)
		return NULL;
	if (json_object_is_type(schema, json_type_boolean)) {
		if (json_object_get_boolean(schema))
			return js_use(c, P_VALUE);
		return js_fail(c, ALICE_ERR_UNSUPPORTED, "schema 'false' matches nothing");
	}
	if (!json_object_is_type(schema, json_type_object))
		return js_fail(c, ALICE_ERR_INVALID, "a schema must be an object or a boolean");
	if (check_keywords(c, schema) < 0)
		return NULL;
	if (++c->depth > JS_MAX_DEPTH) {
		c->depth--;
		return js_fail(c, ALICE_ERR_INVALID, "schema nested too deep (more than %d)", JS_MAX_DEPTH);
	}
	char *res = NULL;
	struct json_object *v;
	if (json_object_object_get_ex(schema, "$ref", &v)) {
		json_object_object_foreach(schema, k, vv)
		{
			(void)vv;
			if (strcmp(k, "$ref") && strcmp(k, "$defs") && strcmp(k, "definitions") &&
			    !in_list(k, annotations)) {
				res = js_fail(c, ALICE_ERR_UNSUPPORTED, "'%.60s' next to '$ref' is not supported", k);
				goto out;
			}
		}
		if (!json_object_is_type(v, json_type_string)) {
			res = js_fail(c, ALICE_ERR_INVALID, "'$ref' must be a string");
			goto out;
		}
		res = resolve_ref(c, json_object_get_string(v));
		goto out;
	}
	int n_comb = 0;
	const char *combs[] = {"const", "enum", "anyOf", "oneOf"};
	for (int i = 0; i < 4; i++)
		n_comb += json_object_object_get_ex(schema, combs[i], &v);
	if (n_comb > 1) {
		res = js_fail(c, ALICE_ERR_UNSUPPORTED, "only one of const, enum, anyOf, oneOf per schema");
		goto out;
	}
	if (n_comb == 1) {
		json_object_object_foreach(schema, k, vv)
		{
			(void)vv;
			int ok = in_list(k, annotations) || !strcmp(k, "$defs") || !strcmp(k, "definitions") ||
				 !strcmp(k, "type") || !strcmp(k, "const") || !strcmp(k, "enum") ||
				 !strcmp(k, "anyOf") || !strcmp(k, "oneOf");
			if (!ok) {
				res = js_fail(c, ALICE_ERR_UNSUPPORTED,
					    "'%.60s' next to const/enum/anyOf/oneOf is not supported", k);
				goto out;
			}
		}
		if (json_object_object_get_ex(schema, "const", &v))
			res = literal_value(c, v);
		else if (json_object_object_get_ex(schema, "enum", &v))
			res = alternatives(c, v, "enum", name, 1);
		else if (json_object_object_get_ex(schema, "anyOf", &v))
			res = alternatives(c, v, "anyOf", name, 0);
		else if (json_object_object_get_ex(schema, "oneOf", &v))
			res = alternatives(c, v, "oneOf", name, 0);
		goto out;
	}
	if (json_object_object_get_ex(schema, "type", &v)) {
		if (json_object_is_type(v, json_type_string)) {
			res = visit_typed(c, schema, json_object_get_string(v), name);
		} else if (json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0) {
			struct alice_sbuf s = {0};
			alice_sb_add(&s, "(");
			for (size_t i = 0; i < json_object_array_length(v); i++) {
				struct json_object *t = json_object_array_get_idx(v, i);
				if (!json_object_is_type(t, json_type_string) ||
				    !in_list(json_object_get_string(t), type_names)) {
					free(s.p);
					res = js_fail(c, ALICE_ERR_INVALID, "'type' entries must be type names");
					goto out;
				}
				char hint[160];
				snprintf(hint, sizeof hint, "%s-%s", name, json_object_get_string(t));
				char *e = visit_typed(c, schema, json_object_get_string(t), hint);
				if (!e) {
					free(s.p);
					goto out;
				}
				alice_sb_add(&s, i ? " | " : "");
				alice_sb_add(&s, e);
				free(e);
			}
			alice_sb_add(&s, ")");
			res = alice_sb_take(&s);
			if (!res)
				js_oom(c);
		} else {
			res = js_fail(c, ALICE_ERR_INVALID, "'type' must be a string or a non-empty array");
		}
		goto out;
	}
	/* no type: infer it from the keywords */
	static const struct {
		const char *kw, *type;
	} infer[] = {{"properties", "object"}, {"additionalProperties", "object"}, {"required", "object"},
		     {"items", "array"}, {"minItems", "array"}, {"maxItems", "array"},
		     {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"},
		     {"format", "string"}, {"minimum", "integer"}, {"maximum", "integer"},
		     {"exclusiveMinimum", "integer"}, {"exclusiveMaximum", "integer"}};
	for (size_t i = 0; i < sizeof infer / sizeof *infer; i++) {
		if (json_object_object_get_ex(schema, infer[i].kw, &v)) {
			if (!strcmp(infer[i].type, "integer")) {
				res = js_fail(c, ALICE_ERR_UNSUPPORTED,
					    "'%s' without \"type\": \"integer\" is not supported", infer[i].kw);
				goto out;
			}
			res = visit_typed(c, schema, infer[i].type, name);
			goto out;
		}
	}
	res = js_use(c, P_VALUE);
out:
	c->depth--;
	if (!res && !c->failed)
		js_oom(c);
	return res;
}

/* ---- entry points ------------------------------------------------------------------------ */

static void conv_free(struct js_conv *c)
{
	for (size_t i = 0; i < c->n_rules; i++) {
		free(c->rules[i].name);
		free(c->rules[i].body);
		free(c->rules[i].base);
	}
	free(c->rules);
	free(c->by_name);
	free(c->by_body);
	for (size_t i = 0; i < c->n_refs; i++) {
		free(c->refs[i].ref);
		free(c->refs[i].name);
	}
	free(c->refs);
}

/* The schema as GBNF text and that text compiled (the compile is the check
 * that the output is usable: e.g. a $ref cycle with no base case). The
 * text is the converter's intermediate form; callers that want a grammar
 * get the compiled one and never parse the text again. */
static enum alice_status convert(struct json_object *schema, size_t max_bytes, char **gbnf,
				 struct alice_grammar **grammar, struct alice_error *err)
{
	struct js_conv c = {.root = schema, .err = err, .max_bytes = max_bytes};
	*gbnf = NULL;
	*grammar = NULL;
	char *top = visit(&c, schema, "root");
	if (!top) {
		conv_free(&c);
		return c.st ? c.st : ALICE_ERR_NOMEM;
	}
	/* close the primitive set under dependencies */
	for (int pass = 0; pass < 4; pass++)
		for (size_t i = 0; i < sizeof prim_rules / sizeof *prim_rules; i++)
			if (c.prims & prim_rules[i].bit)
				c.prims |= prim_rules[i].deps;
	struct alice_sbuf s = {0};
	/* root may already be a rule named "root" (object/array at the top) */
	int root_named = 0;
	for (size_t i = 0; i < c.n_rules; i++)
		if (strcmp(c.rules[i].name, "root") == 0)
			root_named = 1;
	if (!root_named || strcmp(top, "root") != 0) {
		if (root_named) {
			free(top);
			conv_free(&c);
			return alice_fail(err, ALICE_ERR_INVALID, "json schema: internal rule name clash");
		}
		alice_sb_add(&s, "root ::= ");
		alice_sb_add(&s, top);
		alice_sb_add(&s, "\n");
	}
	free(top);
	for (size_t i = 0; i < c.n_rules; i++) {
		alice_sb_add(&s, c.rules[i].name);
		alice_sb_add(&s, " ::= ");
		alice_sb_add(&s, c.rules[i].body);
		alice_sb_add(&s, "\n");
	}
	for (size_t i = 0; i < sizeof prim_rules / sizeof *prim_rules; i++) {
		if (c.prims & prim_rules[i].bit) {
			alice_sb_add(&s, prim_rules[i].name);
			alice_sb_add(&s, " ::= ");
			alice_sb_add(&s, prim_rules[i].body);
			alice_sb_add(&s, "\n");
		}
	}
	conv_free(&c);
	char *text = alice_sb_take(&s);
	if (!text)
		return alice_fail(err, ALICE_ERR_NOMEM, "json schema: out of memory");
	if (max_bytes && strlen(text) > max_bytes) {
		size_t n = strlen(text);
		free(text);
		return alice_fail(err, ALICE_ERR_RANGE, "json schema: the grammar made from this schema is %zu bytes, more than %zu",
				  n, max_bytes);
	}
	struct alice_grammar *g = NULL;
	struct alice_error gerr;
	enum alice_status st = alice_grammar_parse(text, strlen(text), &g, &gerr, NULL);
	if (st != ALICE_OK) {
		free(text);
		return alice_fail(err, st, "json schema: the schema gives an unusable grammar: %s", gerr.msg);
	}
	*gbnf = text;
	*grammar = g;
	return ALICE_OK;
}

enum alice_status alice_json_schema_obj_to_gbnf(struct json_object *schema, char **gbnf,
						struct alice_error *err)
{
	struct alice_grammar *g = NULL;
	enum alice_status st = convert(schema, 0, gbnf, &g, err);
	alice_grammar_free(g);
	return st;
}

enum alice_status alice_json_schema_to_grammar_capped(struct json_object *schema, size_t max_bytes,
						      struct alice_grammar **out, struct alice_error *err)
{
	char *text = NULL;
	enum alice_status st = convert(schema, max_bytes, &text, out, err);
	free(text);
	return st;
}

enum alice_status alice_json_schema_to_grammar(struct json_object *schema, struct alice_grammar **out,
					       struct alice_error *err)
{
	return alice_json_schema_to_grammar_capped(schema, 0, out, err);
}

/* One JSON document (a bare scalar too; trailing whitespace allowed). */
static enum alice_status parse_json_text(const char *json, size_t len, struct json_object **out,
					 struct alice_error *err)
{
	*out = NULL;
	if (len > INT32_MAX)
		return alice_fail(err, ALICE_ERR_INVALID, "json schema: too large");
	struct json_tokener *tok = json_tokener_new();
	if (!tok)
		return alice_fail(err, ALICE_ERR_NOMEM, "json schema: out of memory");
	struct json_object *o = json_tokener_parse_ex(tok, json, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t end = len;
	if (je == json_tokener_continue) { /* a bare scalar at the end: a NUL ends it */
		o = json_tokener_parse_ex(tok, "", 1);
		je = json_tokener_get_error(tok);
	} else if (je == json_tokener_success) {
		end = json_tokener_get_parse_end(tok);
	}
	int ok = o && je == json_tokener_success;
	for (size_t i = end; ok && i < len; i++) /* trailing whitespace is fine */
		if (json[i] != ' ' && json[i] != '\n' && json[i] != '\r' && json[i] != '\t')
			ok = 0;
	if (!ok) {
		enum alice_status st = alice_fail(err, ALICE_ERR_INVALID, "json schema: invalid JSON: %s",
						  o ? "trailing data" : json_tokener_error_desc(je));
		json_object_put(o);
		json_tokener_free(tok);
		return st;
	}
	json_tokener_free(tok);
	*out = o;
	return ALICE_OK;
}

/* convert() on a schema given as JSON text; either output may be NULL. */
static enum alice_status convert_text(const char *json, size_t len, char **gbnf, struct alice_grammar **grammar,
				      struct alice_error *err)
{
	struct json_object *o;
	char *text = NULL;
	struct alice_grammar *g = NULL;
	enum alice_status st = parse_json_text(json, len, &o, err);
	if (st != ALICE_OK)
		return st;
	st = convert(o, 0, &text, &g, err);
	json_object_put(o);
	if (gbnf)
		*gbnf = text;
	else
		free(text);
	if (grammar)
		*grammar = g;
	else
		alice_grammar_free(g);
	return st;
}

enum alice_status alice_json_schema_to_gbnf(const char *json, size_t len, char **gbnf,
					    struct alice_error *err)
{
	*gbnf = NULL;
	return convert_text(json, len, gbnf, NULL, err);
}

enum alice_status alice_json_schema_text_to_grammar(const char *json, size_t len, struct alice_grammar **out,
						    struct alice_error *err)
{
	*out = NULL;
	return convert_text(json, len, NULL, out, err);
}
