/* Tests for core/json_schema.c: schema -> GBNF -> the grammar accepts valid
 * documents and rejects invalid ones; unsupported keywords and regex
 * constructs are errors that name them. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"
#include "alice/json_schema.h"

static struct alice_grammar *compile(const char *schema)
{
	char *gbnf = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err);
	cr_assert_eq(st, ALICE_OK, "schema should convert: %s\n%s", err.msg, schema);
	struct alice_grammar *g = NULL;
	st = alice_grammar_parse(gbnf, strlen(gbnf), &g, &err, NULL);
	cr_assert_eq(st, ALICE_OK, "grammar should parse: %s\n%s", err.msg, gbnf);
	free(gbnf);
	return g;
}

static int accepts(const struct alice_grammar *g, const char *doc)
{
	struct alice_grammar_state *st;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	int ok = alice_grammar_state_accept_bytes(st, doc, strlen(doc), &err) == ALICE_OK &&
		 alice_grammar_state_can_end(st);
	alice_grammar_state_free(st);
	return ok;
}

#define OK(g, doc) cr_expect(accepts(g, doc), "should accept: %s", doc)
#define NO(g, doc) cr_expect(!accepts(g, doc), "should reject: %s", doc)

static void expect_error(const char *schema, enum alice_status want, const char *needle)
{
	char *gbnf = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err);
	cr_expect_eq(st, want, "schema %s: status %d (%s), want %d", schema, st, err.msg, want);
	cr_expect_null(gbnf);
	cr_expect(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
	free(gbnf);
}

Test(json_schema, object_properties_required_order)
{
	struct alice_grammar *g = compile(
		"{\"type\":\"object\",\"properties\":{"
		"\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},\"ok\":{\"type\":\"boolean\"}},"
		"\"required\":[\"name\",\"ok\"]}");
	OK(g, "{\"name\": \"Al\", \"age\": 7, \"ok\": true}");
	OK(g, "{\"name\":\"Al\",\"ok\":false}");
	OK(g, "{\n  \"name\": \"Al\",\n  \"ok\": false\n}");
	NO(g, "{\"name\": \"Al\"}");                        /* ok missing */
	NO(g, "{\"ok\": true, \"name\": \"Al\"}");          /* order as given */
	NO(g, "{\"name\": \"Al\", \"ok\": true, \"x\": 1}"); /* additionalProperties absent: none */
	NO(g, "{\"name\": 1, \"ok\": true}");
	NO(g, "{\"name\": \"Al\", \"age\": 7.5, \"ok\": true}");
	NO(g, "{\"name\": \"Al\",    \"ok\": true}"); /* bounded whitespace */
	alice_grammar_free(g);

	g = compile("{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"number\"}}}");
	OK(g, "{}");
	OK(g, "{\"a\": null}");
	OK(g, "{\"b\": -1.5e3}");
	OK(g, "{\"a\": null, \"b\": 0}");
	NO(g, "{\"b\": 0, \"a\": null}");
	NO(g, "{,}");
	alice_grammar_free(g);
}

Test(json_schema, additional_properties)
{
	struct alice_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
					  "\"additionalProperties\":true}");
	OK(g, "{\"a\": 1, \"zz\": [1, {\"q\": null}]}");
	OK(g, "{\"zz\": \"x\"}");
	OK(g, "{}");
	alice_grammar_free(g);
	g = compile("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}");
	OK(g, "{\"k\": \"v\", \"k2\": \"w\"}");
	NO(g, "{\"k\": 1}");
	alice_grammar_free(g);
	g = compile("{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":false}");
	OK(g, "{\"a\": [true]}");
	NO(g, "{\"b\": 1}");
	alice_grammar_free(g);
	g = compile("{\"type\":\"object\"}");
	OK(g, "{\"anything\": {\"goes\": [1, \"x\"]}}");
	NO(g, "[1]");
	alice_grammar_free(g);
	g = compile("{\"type\":\"json_object\"}");
	OK(g, "{\"a\": 1}");
	NO(g, "\"a\"");
	alice_grammar_free(g);
}

Test(json_schema, arrays_and_bounds)
{
	struct alice_grammar *g = compile("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}");
	NO(g, "[]");
	NO(g, "[1]");
	OK(g, "[1, 2]");
	OK(g, "[1,2,3]");
	NO(g, "[1, 2, 3, 4]");
	NO(g, "[1, \"2\"]");
	alice_grammar_free(g);
	g = compile("{\"type\":\"array\"}");
	OK(g, "[]");
	OK(g, "[1, \"a\", null, [], {}]");
	alice_grammar_free(g);
	g = compile("{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":0}");
	OK(g, "[]");
	NO(g, "[\"a\"]");
	alice_grammar_free(g);
}

Test(json_schema, strings)
{
	struct alice_grammar *g = compile("{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}");
	NO(g, "\"a\"");
	OK(g, "\"ab\"");
	OK(g, "\"a\\nc\""); /* an escape is one character */
	OK(g, "\"\xc3\xa9t\xc3\xa9\"");
	NO(g, "\"abcde\"");
	alice_grammar_free(g);
	g = compile("{\"type\":\"string\",\"format\":\"date\"}");
	OK(g, "\"2024-02-29\"");
	NO(g, "\"2024-13-01\"");
	alice_grammar_free(g);
	g = compile("{\"type\":\"string\",\"format\":\"date-time\"}");
	OK(g, "\"2024-02-29T23:59:01Z\"");
	OK(g, "\"2024-02-29T23:59:01.123+02:00\"");
	NO(g, "\"2024-02-29 23:59:01Z\"");
	alice_grammar_free(g);
	g = compile("{\"type\":\"string\",\"format\":\"uuid\"}");
	OK(g, "\"123e4567-e89b-12d3-a456-426614174000\"");
	NO(g, "\"123e4567e89b12d3a456426614174000\"");
	alice_grammar_free(g);
}

Test(json_schema, patterns)
{
	struct alice_grammar *g = compile("{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]+-\\\\d{2,3}(x|yz)?$\"}");
	OK(g, "\"Ab-12\"");
	OK(g, "\"Abc-123yz\"");
	NO(g, "\"ab-12\"");
	NO(g, "\"Ab-1\"");
	NO(g, "\"Ab-12y\"");
	NO(g, "\"xAb-12\"");
	alice_grammar_free(g);
	/* unanchored: the pattern may appear anywhere */
	g = compile("{\"type\":\"string\",\"pattern\":\"ab+c\"}");
	OK(g, "\"abbc\"");
	OK(g, "\"xxabcyy\"");
	NO(g, "\"ac\"");
	alice_grammar_free(g);
	/* characters JSON escapes, written literally in the pattern */
	g = compile("{\"type\":\"string\",\"pattern\":\"^a\\\"b\\\\\\\\c[\\\\s]d$\"}");
	OK(g, "\"a\\\"b\\\\c d\"");
	OK(g, "\"a\\\"b\\\\c\\td\"");
	NO(g, "\"a\\\"b\\\\cxd\"");
	alice_grammar_free(g);
	g = compile("{\"type\":\"string\",\"pattern\":\"^(?:[^0-9]|\\\\.)*\\\\d{3}$\"}");
	OK(g, "\"x.y123\"");
	NO(g, "\"x1y23\"");
	alice_grammar_free(g);
	g = compile("{\"type\":\"string\",\"pattern\":\"^.{2}$\"}");
	OK(g, "\"\xc3\xa9\\\"\"");
	NO(g, "\"a\\nb\"");
	alice_grammar_free(g);
}

Test(json_schema, integers_with_bounds)
{
	struct alice_grammar *g = compile("{\"type\":\"integer\",\"minimum\":-15,\"maximum\":1234}");
	for (int v = -40; v <= 1300; v++) {
		char buf[32];
		snprintf(buf, sizeof buf, "%d", v);
		int want = v >= -15 && v <= 1234;
		cr_expect_eq(accepts(g, buf), want, "%d: want %d", v, want);
	}
	NO(g, "-0");
	NO(g, "007");
	alice_grammar_free(g);
	g = compile("{\"type\":\"integer\",\"exclusiveMinimum\":99}");
	NO(g, "99");
	OK(g, "100");
	OK(g, "123456789");
	NO(g, "-5");
	alice_grammar_free(g);
	g = compile("{\"type\":\"integer\",\"maximum\":-3}");
	OK(g, "-3");
	OK(g, "-1000");
	NO(g, "-2");
	NO(g, "0");
	alice_grammar_free(g);
	g = compile("{\"type\":\"integer\",\"minimum\":0}");
	OK(g, "0");
	OK(g, "10");
	NO(g, "-1");
	alice_grammar_free(g);
}

/* A bounded integer's GBNF is a long expression; inlined into an array's or
 * an object's rule it once lost everything past 255 bytes (unusable grammar). */
Test(json_schema, long_integer_range_inside_items_and_additional)
{
	struct alice_grammar *g = compile(
		"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"maximum\":207340374},"
		"\"minItems\":1,\"maxItems\":3}");
	OK(g, "[207340374, -5, 0]");
	OK(g, "[1]");
	NO(g, "[207340375]");
	NO(g, "[1, 2, 3, 4]");
	alice_grammar_free(g);
	g = compile("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\","
		    "\"minimum\":-123456789012,\"maximum\":987654321098}}");
	OK(g, "{\"a\": 55, \"b\": -123456789012}");
	NO(g, "{\"a\": 987654321099}");
	alice_grammar_free(g);
}

Test(json_schema, enum_const_anyof_types)
{
	struct alice_grammar *g = compile("{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}");
	OK(g, "\"red\"");
	OK(g, "1");
	OK(g, "null");
	OK(g, "{\"a\":[true]}");
	NO(g, "\"blue\"");
	NO(g, "2");
	alice_grammar_free(g);
	g = compile("{\"const\":\"a/b\"}");
	OK(g, "\"a/b\"");
	NO(g, "\"a\\/b\"");
	alice_grammar_free(g);
	g = compile("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}");
	OK(g, "5");
	OK(g, "\"x\"");
	NO(g, "\"xy\"");
	alice_grammar_free(g);
	g = compile("{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}");
	OK(g, "true");
	OK(g, "null");
	NO(g, "0");
	alice_grammar_free(g);
	g = compile("{\"type\":[\"string\",\"null\"]}");
	OK(g, "\"s\"");
	OK(g, "null");
	NO(g, "1");
	alice_grammar_free(g);
	g = compile("{}");
	OK(g, "[1, {\"a\": null}]");
	alice_grammar_free(g);
	g = compile("{\"title\":\"T\",\"description\":\"d\",\"$schema\":\"x\",\"type\":\"boolean\",\"default\":true,\"examples\":[true]}");
	OK(g, "false");
	alice_grammar_free(g);
}

Test(json_schema, refs_recursive_and_nested)
{
	struct alice_grammar *g = compile(
		"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
		"\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
		"\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}");
	OK(g, "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}");
	NO(g, "{\"v\": 1, \"next\": {\"v\": 2}}");
	alice_grammar_free(g);
	g = compile("{\"type\":\"object\",\"properties\":{\"p\":{\"$ref\":\"#/definitions/pt\"},"
		    "\"list\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/pt\"}}},"
		    "\"required\":[\"p\"],"
		    "\"definitions\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},"
		    "\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"]}}}");
	OK(g, "{\"p\": {\"x\": 1, \"y\": 2}, \"list\": [{\"x\": 0, \"y\": 0}]}");
	NO(g, "{\"p\": {\"x\": 1}}");
	alice_grammar_free(g);
	/* "#": the whole schema, for trees */
	g = compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
		    "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}},\"required\":[\"name\"]}");
	OK(g, "{\"name\": \"a\", \"children\": [{\"name\": \"b\"}, {\"name\": \"c\", \"children\": []}]}");
	NO(g, "{\"name\": \"a\", \"children\": [{}]}");
	alice_grammar_free(g);
	g = compile("{\"type\":\"string\",\"format\":\"time\"}");
	OK(g, "\"12:30:00Z\"");
	OK(g, "\"12:30:00.5-05:00\"");
	NO(g, "\"24:00:00Z\"");
	NO(g, "\"12:30Z\"");
	alice_grammar_free(g);
}

Test(json_schema, unsupported_and_invalid_are_errors)
{
	expect_error("{\"type\":\"object\",\"patternProperties\":{}}", ALICE_ERR_UNSUPPORTED, "'patternProperties'");
	expect_error("{\"allOf\":[{}]}", ALICE_ERR_UNSUPPORTED, "'allOf'");
	expect_error("{\"type\":\"array\",\"prefixItems\":[]}", ALICE_ERR_UNSUPPORTED, "'prefixItems'");
	expect_error("{\"type\":\"array\",\"items\":{\"type\":\"string\",\"uniqueItemsX\":1}}", ALICE_ERR_UNSUPPORTED,
		     "/items");
	expect_error("{\"type\":\"number\",\"minimum\":1}", ALICE_ERR_UNSUPPORTED, "integer");
	expect_error("{\"type\":\"string\",\"format\":\"email\"}", ALICE_ERR_UNSUPPORTED, "format 'email'");
	expect_error("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", ALICE_ERR_UNSUPPORTED, "backreference");
	expect_error("{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", ALICE_ERR_UNSUPPORTED, "lookaround");
	expect_error("{\"type\":\"string\",\"pattern\":\"a*?\"}", ALICE_ERR_UNSUPPORTED, "lazy");
	expect_error("{\"type\":\"string\",\"pattern\":\"\\\\bx\"}", ALICE_ERR_UNSUPPORTED, "word boundary");
	expect_error("{\"type\":\"string\",\"pattern\":\"a^b\"}", ALICE_ERR_UNSUPPORTED, "anchors");
	expect_error("{\"type\":\"string\",\"pattern\":\"\\\\p{L}\"}", ALICE_ERR_UNSUPPORTED, "unicode property");
	expect_error("{\"type\":\"strin\"}", ALICE_ERR_INVALID, "unknown type");
	expect_error("{\"$ref\":\"http://x/y\"}", ALICE_ERR_UNSUPPORTED, "only local");
	expect_error("{\"$ref\":\"#/$defs/missing\"}", ALICE_ERR_INVALID, "does not resolve");
	expect_error("{\"type\":\"object\",\"required\":[\"a\"]}", ALICE_ERR_UNSUPPORTED, "not declared");
	expect_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", ALICE_ERR_INVALID, "maxItems < minItems");
	expect_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", ALICE_ERR_INVALID, "minimum is greater");
	expect_error("{\"type\":\"string\",\"minItems\":1}", ALICE_ERR_INVALID, "does not apply");
	expect_error("false", ALICE_ERR_UNSUPPORTED, "matches nothing");
	expect_error("{\"type\":", ALICE_ERR_INVALID, "invalid JSON");
	expect_error("{} x", ALICE_ERR_INVALID, "invalid JSON");
	expect_error("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", ALICE_ERR_INVALID,
		     "unusable grammar");
	expect_error("[1]", ALICE_ERR_INVALID, "must be an object");
}

Test(json_schema, from_json_object)
{
	struct json_object *o = json_tokener_parse("{\"type\":\"boolean\"}");
	char *gbnf = NULL;
	struct alice_error err;
	cr_assert_eq(alice_json_schema_obj_to_gbnf(o, &gbnf, &err), ALICE_OK, "%s", err.msg);
	cr_expect(strstr(gbnf, "root ::= boolean") != NULL, "%s", gbnf);
	free(gbnf);
	json_object_put(o);
}

/* Straight to a compiled grammar (what the server's response_format uses):
 * it accepts what the GBNF text accepts, and reports the text's size. */
Test(json_schema, to_grammar)
{
	static const char schema[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}";
	struct alice_error err;
	struct alice_grammar *g = NULL;
	char *gbnf = NULL;
	cr_assert_eq(alice_json_schema_text_to_grammar(schema, sizeof(schema) - 1, &g, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_json_schema_to_gbnf(schema, sizeof(schema) - 1, &gbnf, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_source_bytes(g), strlen(gbnf));
	struct alice_grammar_state *st = NULL;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	cr_assert(!alice_grammar_state_check_bytes(st, "{\"b\"", 4));
	cr_assert_eq(alice_grammar_state_accept_bytes(st, "{\"a\": 12}", 9, &err), ALICE_OK, "%s", err.msg);
	cr_assert(alice_grammar_state_can_end(st));
	alice_grammar_state_free(st);
	alice_grammar_free(g);
	free(gbnf);
	cr_assert_eq(alice_json_schema_text_to_grammar("{\"type\":\"tuple\"}", 16, &g, &err), ALICE_ERR_INVALID);
	cr_assert_null(g);
	cr_assert(strstr(err.msg, "tuple"), "%s", err.msg);
}

/* Optional properties chain in linear size (issue 26): every subset in the
 * given order, with required ones in between, and nothing else. */
Test(json_schema, optional_properties_chain)
{
	struct alice_grammar *g = compile(
		"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
		"\"c\":{\"type\":\"integer\"},\"d\":{\"type\":\"integer\"},\"e\":{\"type\":\"integer\"}},"
		"\"required\":[\"c\"]}");
	OK(g, "{\"c\": 3}");
	OK(g, "{\"a\": 1, \"c\": 3}");
	OK(g, "{\"b\": 2, \"c\": 3, \"e\": 5}");
	OK(g, "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5}");
	OK(g, "{\"c\": 3, \"d\": 4}");
	NO(g, "{}");
	NO(g, "{\"a\": 1}");                   /* c is required */
	NO(g, "{\"a\": 1, \"e\": 5}");         /* c skipped */
	NO(g, "{\"c\": 3, \"a\": 1}");         /* order */
	NO(g, "{\"c\": 3, \"e\": 5, \"d\": 4}"); /* order */
	NO(g, "{\"c\": 3, \"c\": 3}");         /* once */
	NO(g, "{\"c\": 3,}");
	alice_grammar_free(g);

	/* all optional: the empty object and any ordered subset */
	g = compile("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"null\"},\"y\":{\"type\":\"null\"},"
		    "\"z\":{\"type\":\"null\"}}}");
	OK(g, "{}");
	OK(g, "{\"z\": null}");
	OK(g, "{\"x\": null, \"z\": null}");
	OK(g, "{\"y\": null, \"z\": null}");
	NO(g, "{\"z\": null, \"x\": null}");
	NO(g, "{\"x\": null, \"x\": null}");
	alice_grammar_free(g);
}

static char *many_props(size_t n, int required)
{
	size_t cap = n * 64 + 128, o = 0;
	char *s = malloc(cap);
	cr_assert_not_null(s);
	o += (size_t)snprintf(s + o, cap - o, "{\"type\":\"object\",\"properties\":{");
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(s + o, cap - o, "%s\"p%zu\":{\"type\":\"string\"}", i ? "," : "", i);
	o += (size_t)snprintf(s + o, cap - o, "}");
	if (required) {
		o += (size_t)snprintf(s + o, cap - o, ",\"required\":[");
		for (size_t i = 0; i < n; i++)
			o += (size_t)snprintf(s + o, cap - o, "%s\"p%zu\"", i ? "," : "", i);
		o += (size_t)snprintf(s + o, cap - o, "]");
	}
	snprintf(s + o, cap - o, "}");
	return s;
}

/* The grammar grows linearly with the number of properties, and a cap stops
 * the conversion with ALICE_ERR_RANGE (a 20,000-property schema used to take
 * seconds and gigabytes before any cap was checked). */
Test(json_schema, many_properties_linear_and_capped)
{
	for (int req = 0; req < 2; req++) {
		size_t sizes[2] = {500, 2000}, len[2];
		for (int k = 0; k < 2; k++) {
			char *schema = many_props(sizes[k], req), *gbnf = NULL;
			struct alice_error err = {{0}};
			cr_assert_eq(alice_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err), ALICE_OK, "%s",
				     err.msg);
			len[k] = strlen(gbnf);
			free(gbnf);
			free(schema);
		}
		/* 4x the properties: about 4x the text (quadratic would be 16x) */
		cr_expect(len[1] < len[0] * 5, "required=%d: %zu bytes for 500, %zu for 2000", req, len[0], len[1]);
		cr_expect(len[1] < 2000 * 200, "required=%d: %zu bytes for 2000 properties", req, len[1]);

		char *schema = many_props(20000, req);
		struct json_object *o = json_tokener_parse(schema);
		cr_assert_not_null(o);
		struct alice_grammar *g = NULL;
		struct alice_error err = {{0}};
		enum alice_status st = alice_json_schema_to_grammar_capped(o, 131072, &g, &err);
		cr_expect_eq(st, ALICE_ERR_RANGE, "required=%d: status %d (%s)", req, st, err.msg);
		cr_expect_null(g);
		cr_expect(strstr(err.msg, "larger than 131072 bytes") != NULL, "%s", err.msg);
		/* a small schema under the same cap converts */
		struct json_object *small = json_tokener_parse("{\"properties\":{\"a\":{\"type\":\"string\"}}}");
		cr_expect_eq(alice_json_schema_to_grammar_capped(small, 131072, &g, &err), ALICE_OK, "%s", err.msg);
		alice_grammar_free(g);
		json_object_put(small);
		json_object_put(o);
		free(schema);
	}
}
