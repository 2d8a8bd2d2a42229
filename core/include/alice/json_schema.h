/* json_schema.h — JSON Schema -> grammar, for `response_format` json_schema
 * and tool-call arguments: straight to a compiled struct alice_grammar
 * (alice_json_schema_to_grammar, ready for alice_grammar_constraint_create),
 * or as GBNF text (for display and tools).
 *
 * Supported (anything else is an error naming the keyword or construct; no
 * keyword is silently ignored):
 *   type: object, array, string, number, integer, boolean, null, a list of
 *     these, and "json_object" (any JSON object); no type = inferred from the
 *     keywords present, or any JSON value for {} / true.
 *   object: properties (emitted in the order given), required (other
 *     properties may be absent), additionalProperties:
 *       absent or false -> no other keys (llama.cpp's behaviour when
 *       properties are given); true -> any other keys with any values;
 *       a schema -> any other keys with values of that schema.
 *     An object schema with neither properties nor additionalProperties is
 *     any JSON object. Extra keys are not checked against declared names.
 *   array: items (one schema), minItems, maxItems.
 *   string: minLength, maxLength, pattern, format (date, time, date-time,
 *     uuid; other formats are an error).
 *   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers).
 *   number: no bounds (minimum/maximum on a number is an error).
 *   enum, const (values matched in compact JSON form), anyOf, oneOf (as
 *   anyOf: exclusivity is not enforced), $ref to #, #/$defs/... or
 *   #/definitions/... (recursive references allowed).
 *   Annotations are ignored: title, description, examples, default,
 *   $schema, $id, $comment, deprecated, readOnly, writeOnly.
 * pattern: an ECMA regex subset — literals, escapes (\. \\ \/ \n \t \r \d \D
 *   \w \W \s \S \xNN \uNNNN), classes [...] with ranges and negation, `.`,
 *   groups ( ) and (?: ), alternation |, ? * + {m} {m,} {m,n}, and ^ / $
 *   only at the very start / end (an unanchored side matches any text there).
 *   Errors: backreferences, lookaround, lazy quantifiers, \b, \p{..}, named
 *   groups, anchors elsewhere. Characters that JSON must escape (" \ and
 *   controls) are matched only when the pattern names them literally.
 * Whitespace between tokens: nothing, one space, or a newline and up to 20
 * spaces/tabs (bounded, so a model cannot loop on whitespace).
 */
#ifndef ALICE_JSON_SCHEMA_H
#define ALICE_JSON_SCHEMA_H

#include <stddef.h>

#include "alice/status.h"

struct json_object;
struct alice_grammar;

/* Convert a parsed schema (borrowed) into a compiled grammar the caller
 * frees with alice_grammar_free. Errors as below. */
enum alice_status alice_json_schema_to_grammar(struct json_object *schema, struct alice_grammar **out,
					       struct alice_error *err);
/* The same with a cap on the grammar's size: max_bytes of GBNF (0 = none).
 * The size is counted while converting, so an oversized schema stops as soon
 * as its grammar passes the cap: ALICE_ERR_RANGE. Conversion is linear in the
 * schema's size (hash lookups, objects' optional properties chained), so its
 * time and memory are O(schema bytes + max_bytes); the compile that follows
 * is bounded by max_bytes (see alice_grammar_parse). */
enum alice_status alice_json_schema_to_grammar_capped(struct json_object *schema, size_t max_bytes,
						      struct alice_grammar **out, struct alice_error *err);
/* The same from `len` bytes of JSON text. */
enum alice_status alice_json_schema_text_to_grammar(const char *json, size_t len, struct alice_grammar **out,
						    struct alice_error *err);

/* Convert the schema in `len` bytes of JSON text. On success *gbnf is a
 * NUL-terminated grammar the caller frees with free(). The grammar has been
 * checked with alice_grammar_parse. */
enum alice_status alice_json_schema_to_gbnf(const char *json, size_t len, char **gbnf,
					    struct alice_error *err);
/* The same from a parsed json-c object (borrowed). */
enum alice_status alice_json_schema_obj_to_gbnf(struct json_object *schema, char **gbnf,
						struct alice_error *err);

#endif
