/* json_schema_internal.h — what the JSON Schema converter's files share
 * (json_schema.c: the schema walk; json_schema_regex.c: `pattern` -> GBNF).
 * Private to the core. Strings returned are the caller's to free unless
 * marked borrowed; NULL means the conversion failed (the error is set). */
#ifndef ALICE_JSON_SCHEMA_INTERNAL_H
#define ALICE_JSON_SCHEMA_INTERNAL_H

#include <stddef.h>

#include "alice/status.h"
#include "alice/sbuf.h"

#define JS_MAX_DEPTH 64     /* schema and regex group nesting */
#define JS_MAX_BOUND 100000 /* largest repetition count */

/* The shared primitive rules (js_use adds one to the grammar). */
enum js_prim {
	P_SPACE = 1 << 0,
	P_BOOLEAN = 1 << 1,
	P_NULL = 1 << 2,
	P_CHAR = 1 << 3,
	P_STRING = 1 << 4,
	P_NUMBER = 1 << 5,
	P_INTEGER = 1 << 6,
	P_VALUE = 1 << 7,
	P_OBJECT = 1 << 8,
	P_ARRAY = 1 << 9,
	P_DATE = 1 << 10,
	P_TIME = 1 << 11,
	P_UUID = 1 << 12,
};

struct js_conv; /* the converter's state (json_schema.c) */

/* Record the first failure (later ones are ignored); returns NULL. */
__attribute__((format(printf, 3, 4))) char *js_fail(struct js_conv *c, enum alice_status st,
						     const char *fmt, ...);
char *js_oom(struct js_conv *c);
/* Add rule `hint` ::= body (takes body). Same body as an earlier rule with
 * the same hint -> that rule. Returns the unique name (borrowed). */
const char *js_add_rule(struct js_conv *c, const char *hint, char *body);
/* Mark primitive `bit` used; returns its rule name. */
char *js_use(struct js_conv *c, unsigned bit);
/* A GBNF literal for raw bytes. */
void js_sb_lit(struct alice_sbuf *s, const char *t, size_t n);

/* json_schema_regex.c: GBNF for a JSON string whose content matches the
 * regex pat[0..n) (the subset json_schema.h lists), quotes and trailing
 * space included. */
char *js_pattern_to_gbnf(struct js_conv *c, const char *pat, size_t n);

#endif
