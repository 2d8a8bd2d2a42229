/* Tests for core/grammar_*.c: GBNF parsing (valid grammars, errors with
 * line:column), the matcher (repetition, classes, `.`, Unicode, partial UTF-8,
 * end conditions, hostile ambiguity) and token masks (trie walk == one-by-one
 * check, on a synthetic vocab and on the 128k llama-bpe vocab fixture). */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"
#include "core/grammar_fixture_vocab.h"

static const char *JSON_GBNF =
	"root   ::= object\n"
	"value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
	"object ::=\n"
	"  \"{\" ws (\n"
	"    string \":\" ws value\n"
	"    (\",\" ws string \":\" ws value)*\n"
	"  )? \"}\" ws\n"
	"array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws   # arrays\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
	"number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,15})? ws\n"
	"ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static struct alice_grammar *parse_ok(const char *text)
{
	struct alice_grammar *g = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_grammar_parse(text, strlen(text), &g, &err, NULL);
	cr_assert_eq(st, ALICE_OK, "grammar should parse: %s\n--\n%s", err.msg, text);
	cr_assert_not_null(g);
	return g;
}

static void parse_err(const char *text, int line, int col, const char *needle)
{
	struct alice_grammar *g = NULL;
	struct alice_error err = {{0}};
	struct alice_grammar_errpos pos = {-1, -1};
	enum alice_status st = alice_grammar_parse(text, strlen(text), &g, &err, &pos);
	cr_assert_neq(st, ALICE_OK, "grammar should fail: %s", text);
	cr_assert_null(g);
	cr_expect_eq(pos.line, line, "line: got %d want %d (%s) for: %s", pos.line, line, err.msg, text);
	cr_expect_eq(pos.col, col, "col: got %d want %d (%s) for: %s", pos.col, col, err.msg, text);
	cr_expect(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
}

/* Does the grammar accept exactly `text` (all of it, and may end there)? */
static int accepts_n(const char *grammar, const char *text, size_t n)
{
	struct alice_grammar *g = parse_ok(grammar);
	struct alice_grammar_state *st;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK, "%s", err.msg);
	int ok = alice_grammar_state_accept_bytes(st, text, n, &err) == ALICE_OK &&
		 alice_grammar_state_can_end(st);
	alice_grammar_state_free(st);
	alice_grammar_free(g);
	return ok;
}

static int accepts(const char *grammar, const char *text)
{
	return accepts_n(grammar, text, strlen(text));
}

/* Is `text` a viable prefix (accepted so far, maybe not complete)? */
static int prefix_ok(const char *grammar, const char *text, size_t n)
{
	struct alice_grammar *g = parse_ok(grammar);
	struct alice_grammar_state *st;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK, "%s", err.msg);
	int ok = alice_grammar_state_check_bytes(st, text, n);
	alice_grammar_state_free(st);
	alice_grammar_free(g);
	return ok;
}

/* ---- parser ------------------------------------------------------------------ */

Test(grammar_parse, valid_grammars)
{
	struct alice_grammar *g = parse_ok(JSON_GBNF);
	cr_expect_gt(alice_grammar_rule_count(g), 7);
	alice_grammar_free(g);
	alice_grammar_free(parse_ok("# leading comment\n\nroot ::= a b # trailing\na ::= \"x\"\nb ::= [0-9]+ | \"\"\n"));
	alice_grammar_free(parse_ok("root ::= (\n  \"v\" num\n  # comment inside\n  | \"none\"\n)\nnum ::= [0-9] [0-9]?"));
	alice_grammar_free(parse_ok("root ::=\n  \"a\" |\n  \"b\"\n"));
	alice_grammar_free(parse_ok("root ::= \"\\n\\r\\t\\\\\\\"\\[\\]\\x41\\u00e9\\U0001F600\" [\\]\\[\\x00-\\x1f]"));
	alice_grammar_free(parse_ok("root ::= x{2} x{0,} x{1,3} x{ 2 , 5 } x? x* x+ [^] .\nx ::= \"x\""));
	alice_grammar_free(parse_ok("root ::= \"\"")); /* matches only the empty string */
	alice_grammar_free(parse_ok("root ::= ( \"a\"? )* \"b\"")); /* loop over a nullable body */
	alice_grammar_free(parse_ok("root ::= a-b1\r\na-b1 ::= [-a]\r\n"));
}

Test(grammar_parse, errors_have_line_and_column)
{
	parse_err("root ::= foo", 1, 10, "undefined rule 'foo'");
	parse_err("root ::= \"a\"\nx ::= y\n", 2, 7, "undefined rule 'y'");
	parse_err("root ::= \"abc", 1, 10, "unterminated string");
	parse_err("root ::= \"abc\nx ::= \"d\"", 1, 10, "unterminated string");
	parse_err("root ::= [abc", 1, 10, "missing ']'");
	parse_err("root ::= (\"a\" | \"b\"", 1, 10, "missing ')'");
	parse_err("root ::= \"a\")", 1, 13, "unbalanced ')'");
	parse_err("root ::= \"a\" ]", 1, 14, "unbalanced ']'");
	parse_err("root ::= \"a\\q\"", 1, 12, "bad escape");
	parse_err("root ::= \"\\u12\"", 1, 11, "hex digits");
	parse_err("root ::= \"\\UFFFFFFFF\"", 1, 11, "not a valid code point");
	parse_err("root ::= [\\ud800]", 1, 11, "not a valid code point");
	parse_err("foo ::= \"a\"", 0, 0, "missing 'root'");
	parse_err("", 0, 0, "empty grammar");
	parse_err("  # only a comment\n\n", 0, 0, "empty grammar");
	parse_err("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]", 2, 1,
		  "left recursion in rule 'expr'");
	parse_err("root ::= a \"x\"\na ::= b \"y\" | \"z\"\nb ::= \"\" | a", 2, 1, "left recursion");
	parse_err("root ::= opt root \"a\" | \"b\"\nopt ::= \"\" | \"c\"", 1, 1,
		  "left recursion in rule 'root'");
	parse_err("root ::= \"a\"{3,2}", 1, 13, "invalid repetition bounds");
	parse_err("root ::= \"a\"{,2}", 1, 14, "expected a number");
	parse_err("root ::= \"a\"{2", 1, 13, "missing '}'");
	parse_err("root ::= \"a\"{99999999}", 1, 14, "too large");
	parse_err("root ::= \"a\"\n  | \"b\"", 2, 3, "newline ends a rule");
	parse_err("root ::= [z-a]", 1, 11, "bad class range");
	parse_err("root ::= []", 1, 10, "empty character class");
	parse_err("root ::= \"a\" root", 1, 1, "can never finish");
	parse_err("root ::= *", 1, 10, "without a preceding symbol");
	parse_err("root ::= \"a\"\nroot ::= \"b\"", 2, 1, "defined twice");
	parse_err("root = \"a\"", 1, 6, "expected '::='");
	parse_err("root ::= \"a\" @", 1, 14, "unexpected character");
	parse_err("root ::= \"\xff\"", 1, 11, "invalid UTF-8");
	parse_err("root ::= \"a\"\n\n  x y ::= \"b\"", 3, 5, "expected '::='");
}

Test(grammar_parse, hostile_nesting_and_size)
{
	/* 300 nested groups: over the depth limit, an error not a crash */
	char buf[1024];
	size_t o = (size_t)snprintf(buf, sizeof buf, "root ::= ");
	for (int i = 0; i < 300; i++)
		buf[o++] = '(';
	o += (size_t)snprintf(buf + o, sizeof buf - o, "\"a\"");
	for (int i = 0; i < 300; i++)
		buf[o++] = ')';
	buf[o] = 0;
	parse_err(buf, 1, 10 + ALICE_GRAMMAR_MAX_DEPTH, "nesting too deep");
	/* bounded repetitions are expanded: the total is capped */
	struct alice_grammar *g = NULL;
	struct alice_error err;
	const char *big = "root ::= \"a\"{900000} \"bc\"{900000} \"d\"{900000}";
	cr_expect_eq(alice_grammar_parse(big, strlen(big), &g, &err, NULL), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "grammar too large") != NULL, "%s", err.msg);
	cr_expect_null(g);
}

/* ---- matcher ----------------------------------------------------------------- */

Test(grammar_match, literals_and_alternation)
{
	const char *g = "root ::= \"cat\" | \"dog\" \"s\"?";
	cr_expect(accepts(g, "cat"));
	cr_expect(accepts(g, "dog"));
	cr_expect(accepts(g, "dogs"));
	cr_expect(!accepts(g, "cats"));
	cr_expect(!accepts(g, "ca"));
	cr_expect(!accepts(g, ""));
	cr_expect(accepts("root ::= \"\"", ""));
	cr_expect(!accepts("root ::= \"\"", "a"));
}

Test(grammar_match, repetition_bounds)
{
	const char *g = "root ::= \"a\"{2,4}";
	cr_expect(!accepts(g, "a"));
	cr_expect(accepts(g, "aa"));
	cr_expect(accepts(g, "aaa"));
	cr_expect(accepts(g, "aaaa"));
	cr_expect(!accepts(g, "aaaaa"));
	cr_expect(accepts("root ::= \"ab\"{3}", "ababab"));
	cr_expect(!accepts("root ::= \"ab\"{3}", "abab"));
	cr_expect(!accepts("root ::= \"ab\"{3}", "abababab"));
	cr_expect(accepts("root ::= \"x\"{2,} \"y\"", "xxxxxxy"));
	cr_expect(!accepts("root ::= \"x\"{2,} \"y\"", "xy"));
	cr_expect(accepts("root ::= \"x\"{0} \"y\"", "y"));
	cr_expect(accepts("root ::= [0-9]+", "0123"));
	cr_expect(!accepts("root ::= [0-9]+", ""));
	cr_expect(accepts("root ::= [0-9]*", ""));
	cr_expect(accepts("root ::= (\"a\" | \"bc\"){2,3}", "bca"));
	cr_expect(!accepts("root ::= (\"a\" | \"bc\"){2,3}", "abcabc"));
	cr_expect(accepts("root ::= ( \"a\"? )* \"b\"", "aab"));
	cr_expect(accepts("root ::= ( \"a\"? )* \"b\"", "b"));
}

Test(grammar_match, classes_negation_any)
{
	cr_expect(accepts("root ::= [^abc]+", "xyz"));
	cr_expect(!accepts("root ::= [^abc]+", "xay"));
	cr_expect(accepts("root ::= [^abc]+", "\xc3\xa9\xe2\x82\xac")); /* é€ */
	cr_expect(accepts("root ::= [a-cx-z-]+", "a-z"));
	cr_expect(!accepts("root ::= [a-cx-z-]+", "m"));
	cr_expect(accepts("root ::= . .", "\xc3\xa9\xe2\x82\xac"));
	cr_expect(accepts("root ::= . .", "\n\t"));
	cr_expect(!accepts("root ::= . .", "abc"));
	cr_expect(accepts("root ::= [^]", "q"));
	cr_expect(accepts("root ::= \"\\x41\\u00e9\"", "A\xc3\xa9"));
}

Test(grammar_match, unicode_ranges)
{
	cr_expect(accepts("root ::= [α-ω]+", "λογος"));
	cr_expect(!accepts("root ::= [α-ω]+", "logos"));
	cr_expect(accepts("root ::= [\\u4e00-\\u9fff]+", "中文"));
	cr_expect(!accepts("root ::= [\\u4e00-\\u9fff]+", "中a"));
	cr_expect(accepts("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x98\x80"));
	cr_expect(!accepts("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x98\x7f"));
}

Test(grammar_match, partial_utf8_tokens)
{
	/* 一 = U+4E00 = E4 B8 80 */
	const char *one = "root ::= \"\\u4e00\"";
	cr_expect(prefix_ok(one, "\xe4", 1));
	cr_expect(prefix_ok(one, "\xe4\xb8", 2));
	cr_expect(!prefix_ok(one, "\xe4\xbf", 2)); /* U+4FC0.. only */
	cr_expect(!prefix_ok(one, "\xe5", 1));
	cr_expect(prefix_ok(one, "\xe4\xb8\x80", 3));
	cr_expect(!accepts_n(one, "\xe4\xb8", 2)); /* pending character: cannot end */
	const char *cjk = "root ::= [\\u4e00-\\u9fff]";
	cr_expect(prefix_ok(cjk, "\xe5", 1));
	cr_expect(prefix_ok(cjk, "\xe9\xbe", 2));  /* U+9F80..9FBF */
	cr_expect(!prefix_ok(cjk, "\xea", 1));     /* U+A000.. */
	cr_expect(!prefix_ok("root ::= [a-z]", "\xe4", 1));
	/* negated class: partial accepted iff some completion is outside the class */
	cr_expect(prefix_ok("root ::= [^\\u4e00-\\u4e1f]", "\xe4\xb8", 2));
	cr_expect(!prefix_ok("root ::= [^\\u4e00-\\u4e1f]", "\xe4\xb8\x80", 3));
	cr_expect(!prefix_ok("root ::= [^\\u4e00-\\u4e3f]", "\xe4\xb8", 2)); /* E4 B8 xx: all excluded */
	/* invalid UTF-8 never matches, even for `.` */
	cr_expect(!prefix_ok("root ::= .", "\x80", 1));
	cr_expect(!prefix_ok("root ::= .", "\xc0\x80", 2));     /* overlong */
	cr_expect(!prefix_ok("root ::= .", "\xe0\x80", 2));     /* overlong prefix */
	cr_expect(!prefix_ok("root ::= .", "\xed\xa0", 2));     /* surrogate prefix */
	cr_expect(!prefix_ok("root ::= .", "\xf4\x90", 2));     /* > U+10FFFF */
	cr_expect(!prefix_ok("root ::= .", "\xf8", 1));
	cr_expect(prefix_ok("root ::= .", "\xf4\x8f\xbf", 3));
	/* a split character completed by the next token */
	struct alice_grammar *g = parse_ok("root ::= \"a\" [\\u4e00-\\u9fff] \"b\"");
	struct alice_grammar_state *st;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	cr_expect_eq(alice_grammar_state_accept_bytes(st, "a\xe4", 2, &err), ALICE_OK);
	cr_expect(!alice_grammar_state_can_end(st));
	cr_expect_neq(alice_grammar_state_accept_bytes(st, "b", 1, &err), ALICE_OK);
	cr_expect_eq(alice_grammar_state_accept_bytes(st, "\xb8\xad" "b", 3, &err), ALICE_OK);
	cr_expect(alice_grammar_state_can_end(st));
	cr_expect(alice_grammar_state_must_end(st));
	alice_grammar_state_free(st);
	alice_grammar_free(g);
}

Test(grammar_match, end_conditions_and_state_ops)
{
	struct alice_grammar *g = parse_ok("root ::= \"a\" \"b\"? | \"c\"+");
	struct alice_grammar_state *st, *cl;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	cr_expect(!alice_grammar_state_can_end(st));
	cr_expect(!alice_grammar_state_must_end(st));
	cr_expect_eq(alice_grammar_state_accept_bytes(st, "a", 1, &err), ALICE_OK);
	cr_expect(alice_grammar_state_can_end(st));
	cr_expect(!alice_grammar_state_must_end(st));
	cr_assert_eq(alice_grammar_state_clone(st, &cl, &err), ALICE_OK);
	/* a rejected token leaves the state where it was */
	cr_expect_eq(alice_grammar_state_accept_bytes(st, "bx", 2, &err), ALICE_ERR_INVALID);
	cr_expect(alice_grammar_state_can_end(st));
	cr_expect_eq(alice_grammar_state_accept_bytes(st, "b", 1, &err), ALICE_OK);
	cr_expect(alice_grammar_state_must_end(st));
	cr_expect(!alice_grammar_state_check_bytes(st, "b", 1));
	/* the clone did not move */
	cr_expect(!alice_grammar_state_must_end(cl));
	cr_expect(alice_grammar_state_check_bytes(cl, "b", 1));
	alice_grammar_state_free(cl);
	alice_grammar_state_free(st);
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	cr_expect_eq(alice_grammar_state_accept_bytes(st, "ccc", 3, &err), ALICE_OK);
	cr_expect(alice_grammar_state_can_end(st));
	cr_expect(!alice_grammar_state_must_end(st)); /* more c's may follow */
	alice_grammar_state_free(st);
	alice_grammar_free(g);
	alice_grammar_state_free(NULL);
	alice_grammar_free(NULL);
	alice_grammar_vocab_free(NULL);
}

Test(grammar_match, json_documents)
{
	cr_expect(accepts(JSON_GBNF, "{}"));
	cr_expect(accepts(JSON_GBNF, "{\"a\": [1, -2.5e10, true, null, {\"b\": \"\\u00e9\\n\"}], \"c\": \"x\"}"));
	cr_expect(accepts(JSON_GBNF, "{\n  \"k\": 0\n}\n"));
	cr_expect(!accepts(JSON_GBNF, "{\"a\": 01}"));
	cr_expect(!accepts(JSON_GBNF, "{\"a\" 1}"));
	cr_expect(!accepts(JSON_GBNF, "{\"a\": [1,]}"));
	cr_expect(!accepts(JSON_GBNF, "{\"a\": \"\\q\"}"));
	cr_expect(!accepts(JSON_GBNF, "{\"a\": \"x\ny\"}"));
	cr_expect(!accepts(JSON_GBNF, "{\"a\":  1}")); /* bounded whitespace: one space or a newline + indent */
	/* deep nesting of the text is fine (no recursion on the C stack) */
	size_t depth = 20000;
	char *doc = malloc(depth * 6 + 32);
	size_t o = 0;
	o += (size_t)sprintf(doc + o, "{\"a\":");
	for (size_t i = 0; i < depth; i++)
		doc[o++] = '[';
	for (size_t i = 0; i < depth; i++)
		doc[o++] = ']';
	doc[o++] = '}';
	doc[o] = 0;
	cr_expect(accepts(JSON_GBNF, doc));
	free(doc);
}

Test(grammar_match, hostile_ambiguity_errors_out)
{
	/* every prefix a^k has k+1 parses with different pending "b" counts:
	 * the live stacks grow until the cap, which must be an error */
	struct alice_grammar *g = parse_ok("root ::= a*\na ::= \"a\" | \"a\" a \"b\"");
	struct alice_grammar_state *st;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	enum alice_status rc = ALICE_OK;
	for (int i = 0; i < 2 * ALICE_GRAMMAR_MAX_STACKS && rc == ALICE_OK; i++)
		rc = alice_grammar_state_accept_bytes(st, "a", 1, &err);
	cr_expect_eq(rc, ALICE_ERR_RANGE, "%s", err.msg);
	cr_expect(strstr(err.msg, "ambiguous") != NULL);
	alice_grammar_state_free(st);
	alice_grammar_free(g);
}

/* ---- masks ------------------------------------------------------------------- */

/* mask(st) must equal the one-by-one check of every token. */
static void expect_mask_matches(struct alice_grammar_state *st, const struct alice_grammar_vocab *v,
				const char *const *pieces, const size_t *lens, const uint8_t *kinds,
				size_t n, const char *where)
{
	uint8_t *mask = malloc(n), *mask2 = malloc(n);
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_mask(st, v, mask, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_state_mask(st, v, mask2, &err), ALICE_OK, "%s", err.msg);
	cr_expect_arr_eq(mask, mask2, n, "cached mask differs at %s", where);
	size_t bad = 0, allowed = 0;
	for (size_t i = 0; i < n; i++) {
		int want;
		uint8_t k = kinds ? kinds[i] : ALICE_GRAMMAR_TOKEN_TEXT;
		if (k == ALICE_GRAMMAR_TOKEN_EOG)
			want = alice_grammar_state_can_end(st);
		else if (k == ALICE_GRAMMAR_TOKEN_CONTROL || lens[i] == 0)
			want = 0;
		else
			want = alice_grammar_state_check_bytes(st, pieces[i], lens[i]);
		allowed += (size_t)want;
		if (mask[i] != want && bad++ < 5)
			cr_log_error("%s: token %zu (%.*s) mask %d brute %d", where, i, (int)lens[i],
				     pieces[i], mask[i], want);
	}
	cr_expect_eq(bad, 0, "%s: %zu tokens differ", where, bad);
	cr_log_info("%s: %zu of %zu tokens allowed", where, allowed, n);
	free(mask);
	free(mask2);
}

Test(grammar_mask, synthetic_vocab_equals_brute_force)
{
	/* all strings of length 1..3 over a small alphabet, plus UTF-8 pieces
	 * (whole and split), duplicates, an empty piece, a control and an EOG token */
	static const char alpha[] = "{}[]\":, a1\\e.-";
	const size_t na = sizeof alpha - 1;
	size_t cap = na + na * na + na * na * na + 64, n = 0;
	char **pieces = calloc(cap, sizeof *pieces);
	size_t *lens = calloc(cap, sizeof *lens);
	uint8_t *kinds = calloc(cap, 1);
	for (size_t l = 1; l <= 3; l++) {
		size_t total = 1;
		for (size_t i = 0; i < l; i++)
			total *= na;
		for (size_t k = 0; k < total; k++) {
			pieces[n] = malloc(l);
			size_t x = k;
			for (size_t i = 0; i < l; i++, x /= na)
				pieces[n][i] = alpha[x % na];
			lens[n++] = l;
		}
	}
	static const char *extra[] = {"\xc3\xa9", "\xc3", "\xa9", "\"\xc3", "\xe4\xb8", "\xe4\xb8\xad\"",
				      "\xf0\x9f", "\x98\x80\"", "\"\xe2\x82\xac", "true", "false", "null",
				      "true}", "\"a\"", "\": ", "\n  ", "\u00e9\"}", "a", "a", ""};
	for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
		lens[n] = strlen(extra[i]);
		pieces[n] = malloc(lens[n] + 1);
		memcpy(pieces[n], extra[i], lens[n] + 1);
		n++;
	}
	pieces[n] = strdup("<ctl>");
	lens[n] = 5;
	kinds[n++] = ALICE_GRAMMAR_TOKEN_CONTROL;
	pieces[n] = strdup("");
	lens[n] = 0;
	kinds[n++] = ALICE_GRAMMAR_TOKEN_EOG;

	struct alice_grammar_vocab *v;
	struct alice_error err;
	cr_assert_eq(alice_grammar_vocab_build((const char *const *)pieces, lens, kinds, n, &v, &err), ALICE_OK);
	cr_expect_eq(alice_grammar_vocab_size(v), n);
	struct alice_grammar *g = parse_ok(JSON_GBNF);
	static const char *prefixes[] = {"", "{", "{\"", "{\"a", "{\"a\":", "{\"a\": ", "{\"a\": \"\xe4",
					 "{\"a\": \"\xe4\xb8", "{\"a\": [1", "{\"a\": [1,", "{\"a\": -",
					 "{\"a\": 1.5e", "{\"a\": \"\\", "{\"a\": \"\\u00", "{\"a\": t",
					 "{\"a\": {}}", "{\"a\": {}}\n"};
	for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
		struct alice_grammar_state *st;
		cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
		cr_assert_eq(alice_grammar_state_accept_bytes(st, prefixes[i], strlen(prefixes[i]), &err),
			     ALICE_OK, "prefix '%s': %s", prefixes[i], err.msg);
		expect_mask_matches(st, v, (const char *const *)pieces, lens, kinds, n, prefixes[i]);
		alice_grammar_state_free(st);
	}
	/* the same through one state moving along a document (caches reused) */
	struct alice_grammar_state *st;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	const char *doc = "{\"a\": [1, \"e\xc3\xa9\"], \"b\": {\"c\": null}}";
	for (size_t i = 0; doc[i]; i++) {
		char where[64];
		snprintf(where, sizeof where, "doc@%zu", i);
		expect_mask_matches(st, v, (const char *const *)pieces, lens, kinds, n, where);
		cr_assert_eq(alice_grammar_state_accept_bytes(st, doc + i, 1, &err), ALICE_OK);
	}
	expect_mask_matches(st, v, (const char *const *)pieces, lens, kinds, n, "doc end");
	cr_expect(alice_grammar_state_can_end(st));
	alice_grammar_state_free(st);
	alice_grammar_free(g);
	alice_grammar_vocab_free(v);
	for (size_t i = 0; i < n; i++)
		free(pieces[i]);
	free(pieces);
	free(lens);
	free(kinds);
}

/* trie mask == one-by-one check on a real vocabulary, at several JSON states
 * and inside a CJK/emoji grammar (split multi-byte pieces, byte tokens) */
static void real_vocab_equals_brute_force(const char *file, size_t want_n)
{
	char path[512];
	snprintf(path, sizeof path, "%s/vocab/%s", ALICE_FIXTURES_DIR, file);
	struct gfx_vocab fx;
	cr_assert_eq(gfx_vocab_load(path, &fx), 0, "cannot load %s", path);
	cr_assert_eq(fx.n, want_n);
	struct alice_grammar_vocab *v;
	struct alice_error err;
	cr_assert_eq(alice_grammar_vocab_build(fx.piece, fx.len, fx.kind, fx.n, &v, &err), ALICE_OK, "%s", err.msg);
	size_t n_eog = 0;
	for (size_t i = 0; i < fx.n; i++)
		n_eog += fx.kind[i] == ALICE_GRAMMAR_TOKEN_EOG;
	cr_expect_gt(n_eog, 0, "%s: no end-of-generation token", file);
	struct alice_grammar *g = parse_ok(JSON_GBNF);
	static const char *prefixes[] = {"", "{\"na", "{\"name\":", "{\"n\": 12", "{\"s\": \"\xe4\xb8",
					 "{\"a\": [true, {\"b\": [", "{}"};
	for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
		struct alice_grammar_state *st;
		char where[128];
		snprintf(where, sizeof where, "%s '%s'", file, prefixes[i]);
		cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
		cr_assert_eq(alice_grammar_state_accept_bytes(st, prefixes[i], strlen(prefixes[i]), &err), ALICE_OK);
		expect_mask_matches(st, v, fx.piece, fx.len, fx.kind, fx.n, where);
		alice_grammar_state_free(st);
	}
	struct alice_grammar *g2 = parse_ok("root ::= ([\\u4e00-\\u9fff] | [\\U0001F600-\\U0001F64F] | \" \")+");
	struct alice_grammar_state *st;
	cr_assert_eq(alice_grammar_state_create(g2, &st, &err), ALICE_OK);
	expect_mask_matches(st, v, fx.piece, fx.len, fx.kind, fx.n, "cjk start");
	cr_assert_eq(alice_grammar_state_accept_bytes(st, "\xe4", 1, &err), ALICE_OK);
	expect_mask_matches(st, v, fx.piece, fx.len, fx.kind, fx.n, "cjk mid-char");
	cr_assert_eq(alice_grammar_state_accept_bytes(st, "\xb8\xad\xf0\x9f", 4, &err), ALICE_OK);
	expect_mask_matches(st, v, fx.piece, fx.len, fx.kind, fx.n, "emoji mid-char");
	alice_grammar_state_free(st);
	alice_grammar_free(g2);
	alice_grammar_free(g);
	alice_grammar_vocab_free(v);
	gfx_vocab_free(&fx);
}

Test(grammar_mask, llama_bpe_vocab_equals_brute_force, .timeout = 600)
{
	real_vocab_equals_brute_force("ggml-vocab-llama-bpe.gguf", 128256);
}

Test(grammar_mask, llama_spm_vocab_equals_brute_force, .timeout = 600)
{
	real_vocab_equals_brute_force("ggml-vocab-llama-spm.gguf", 32000); /* byte-fallback <0xNN> pieces */
}

Test(grammar_mask, qwen2_vocab_equals_brute_force, .timeout = 600)
{
	real_vocab_equals_brute_force("ggml-vocab-qwen2.gguf", 151936);
}

Test(grammar_match, long_generation_compacts_caches)
{
	/* every position of x{0,30000} is a distinct state: the DFA cache passes
	 * its limit and is rebuilt around the current position mid-generation */
	struct alice_grammar *g = parse_ok("root ::= \"<\" [a-c]{0,30000} \">\"");
	struct alice_grammar_state *st;
	struct alice_error err;
	static const char *pieces[] = {"<", "a", "b", "c", ">", "ab", "c>", "x"};
	size_t lens[8];
	for (int i = 0; i < 8; i++)
		lens[i] = strlen(pieces[i]);
	struct alice_grammar_vocab *v;
	cr_assert_eq(alice_grammar_vocab_build(pieces, lens, NULL, 8, &v, &err), ALICE_OK);
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	cr_assert_eq(alice_grammar_state_accept_bytes(st, "<", 1, &err), ALICE_OK);
	uint8_t mask[8];
	for (int i = 0; i < 29999; i++) {
		cr_assert_eq(alice_grammar_state_accept_bytes(st, "abc" + i % 3, 1, &err), ALICE_OK,
			     "step %d: %s", i, err.msg);
		if (i % 997 == 0) {
			cr_assert_eq(alice_grammar_state_mask(st, v, mask, &err), ALICE_OK);
			static const uint8_t want[8] = {0, 1, 1, 1, 1, 1, 1, 0};
			cr_expect_arr_eq(mask, want, 8, "mask at step %d", i);
		}
	}
	/* one character left: "ab" would overflow the bound, "c>" fits */
	cr_assert_eq(alice_grammar_state_mask(st, v, mask, &err), ALICE_OK);
	static const uint8_t last[8] = {0, 1, 1, 1, 1, 0, 1, 0};
	cr_expect_arr_eq(mask, last, 8, "mask before the bound");
	cr_expect(!alice_grammar_state_check_bytes(st, "ab", 2));
	cr_assert_eq(alice_grammar_state_accept_bytes(st, "c>", 2, &err), ALICE_OK);
	cr_expect(alice_grammar_state_must_end(st));
	alice_grammar_state_free(st);
	alice_grammar_vocab_free(v);
	alice_grammar_free(g);
}

/* ---- differential check against json-c ----------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(uint32_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng_state >> 33) % n;
}

static struct json_object *random_json(int depth, int want_object)
{
	uint32_t kind = want_object ? 0 : rnd(depth >= 4 ? 5 : 7);
	switch (kind) {
	case 0: {
		struct json_object *o = json_object_new_object();
		for (uint32_t i = 0, n = rnd(4); i < n; i++) {
			char key[8];
			snprintf(key, sizeof key, "k%u", rnd(100));
			json_object_object_add(o, key, random_json(depth + 1, 0));
		}
		return o;
	}
	case 1: {
		static const char *pool[] = {"", "a", "h\xc3\xa9llo", "\xe4\xb8\xad\xe6\x96\x87", "q\"uote",
					     "back\\slash", "line\nbreak", "tab\t", "\xf0\x9f\x98\x80", "sl/ash",
					     "\x01ctl"};
		return json_object_new_string(pool[rnd(sizeof pool / sizeof *pool)]);
	}
	case 2:
		return json_object_new_int64((int64_t)rnd(2000000) - 1000000);
	case 3:
		return json_object_new_double(((double)rnd(100000) - 50000) / 64.0);
	case 4:
		return rnd(3) ? json_object_new_boolean(rnd(2)) : NULL;
	default: {
		struct json_object *a = json_object_new_array();
		for (uint32_t i = 0, n = rnd(4); i < n; i++)
			json_object_array_add(a, random_json(depth + 1, 0));
		return a;
	}
	}
}

static int jsonc_strict_ok(const char *s, size_t n)
{
	struct json_tokener *tok = json_tokener_new();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	struct json_object *o = json_tokener_parse_ex(tok, s, (int)n);
	int ok = o && json_tokener_get_error(tok) == json_tokener_success;
	if (ok)
		for (size_t i = json_tokener_get_parse_end(tok); i < n; i++)
			if (s[i] != ' ' && s[i] != '\n' && s[i] != '\t')
				ok = 0;
	json_object_put(o);
	json_tokener_free(tok);
	return ok;
}

Test(grammar_match, json_grammar_agrees_with_json_c)
{
	struct alice_grammar *g = parse_ok(JSON_GBNF);
	struct alice_grammar_state *st0;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st0, &err), ALICE_OK);
	static const char mut[] = "{}[]\",: 0123456789.eE-+tfnul\\/ax\n";
	int accepted_mutants = 0;
	for (int d = 0; d < 300; d++) {
		struct json_object *o = random_json(0, 1);
		const int flags[] = {JSON_C_TO_STRING_PLAIN, JSON_C_TO_STRING_SPACED};
		for (int f = 0; f < 2; f++) {
			const char *doc = json_object_to_json_string_ext(o, flags[f]);
			struct alice_grammar_state *st;
			cr_assert_eq(alice_grammar_state_clone(st0, &st, &err), ALICE_OK);
			cr_expect(alice_grammar_state_accept_bytes(st, doc, strlen(doc), &err) == ALICE_OK &&
					  alice_grammar_state_can_end(st),
				  "json-c output rejected: %s", doc);
			alice_grammar_state_free(st);
			/* mutants: whatever the grammar accepts must be valid JSON */
			size_t n = strlen(doc);
			char *m = malloc(n + 2);
			for (int k = 0; k < 20; k++) {
				size_t at = rnd((uint32_t)n), mn = n;
				memcpy(m, doc, n + 1);
				uint32_t op = rnd(3);
				char ch = mut[rnd(sizeof mut - 1)];
				if (op == 0) {
					m[at] = ch;
				} else if (op == 1) {
					memmove(m + at + 1, m + at, n - at + 1);
					m[at] = ch;
					mn = n + 1;
				} else {
					memmove(m + at, m + at + 1, n - at);
					mn = n - 1;
				}
				cr_assert_eq(alice_grammar_state_clone(st0, &st, &err), ALICE_OK);
				int ours = alice_grammar_state_accept_bytes(st, m, mn, &err) == ALICE_OK &&
					   alice_grammar_state_can_end(st);
				alice_grammar_state_free(st);
				if (ours) {
					accepted_mutants++;
					cr_expect(jsonc_strict_ok(m, mn), "grammar accepts invalid JSON: %.*s", (int)mn, m);
				}
			}
			free(m);
		}
		json_object_put(o);
	}
	cr_log_info("%d mutants accepted (all valid JSON)", accepted_mutants);
	cr_expect_gt(accepted_mutants, 100); /* the check had something to check */
	alice_grammar_state_free(st0);
	alice_grammar_free(g);
}

/* Classes are sorted and merged at parse time (binary-searched when
 * matching): overlapping, adjacent and unordered ranges mean the same set. */
Test(grammar_match, class_ranges_normalized)
{
	const char *g = "root ::= [x-zc-ea-cq0-3]+";
	cr_expect(accepts(g, "abcdexyzq0123"));
	cr_expect(!accepts(g, "f"));
	cr_expect(!accepts(g, "w"));
	cr_expect(!accepts(g, "4"));
	const char *n = "root ::= [^d-fa-cb-e]+";
	cr_expect(accepts(n, "gxyz`"));
	for (const char *c = "abcdef"; *c; c++) {
		char t[2] = {*c, 0};
		cr_expect(!accepts(n, t), "negated class must reject '%s'", t);
	}
	/* many ranges in one class */
	char big[8192];
	size_t o = (size_t)snprintf(big, sizeof big, "root ::= [");
	for (unsigned cp = 0x4E00; cp < 0x4E00 + 2 * 900; cp += 2)
		o += (size_t)snprintf(big + o, sizeof big - o, "\\u%04X", cp);
	snprintf(big + o, sizeof big - o, "]");
	cr_expect(accepts(big, "\xE4\xB8\x80"));  /* U+4E00 */
	cr_expect(!accepts(big, "\xE4\xB8\x81")); /* U+4E01 */
	cr_expect(accepts(big, "\xE4\xB8\x82"));  /* U+4E02 */
}

/* A grammar that keeps hundreds of stacks live, in sets that differ with
 * every letter, makes every new DFA transition scan them all: one mask is limited to a fixed budget of
 * matcher work and fails with ALICE_ERR_RANGE past it, instead of costing
 * tens of ms a step (and slowing every other sequence of the batch). */
Test(grammar_match, mask_work_is_budgeted)
{
	char *gb = malloc(64 * 1024);
	size_t o = (size_t)sprintf(gb, "root ::= (");
	for (int i = 0; i < 400; i++)
		o += (size_t)sprintf(gb + o, "%sr%d", i ? " | " : "", i);
	o += (size_t)sprintf(gb + o, ")+\n");
	for (int i = 0; i < 400; i++)
		o += (size_t)sprintf(gb + o, "r%d ::= [a-%c]{1,10} \"%d\"\n", i, 'a' + i % 26, i);
	struct alice_grammar *g = parse_ok(gb);
	free(gb);
	/* every 3-letter lowercase token */
	size_t n = 26 * 26 * 26;
	char *buf = malloc(n * 3);
	const char **pieces = malloc(n * sizeof *pieces);
	size_t *lens = malloc(n * sizeof *lens);
	for (size_t i = 0; i < n; i++) {
		buf[3 * i] = (char)('a' + i / 676);
		buf[3 * i + 1] = (char)('a' + i / 26 % 26);
		buf[3 * i + 2] = (char)('a' + i % 26);
		pieces[i] = buf + 3 * i;
		lens[i] = 3;
	}
	struct alice_grammar_vocab *v;
	struct alice_error err;
	cr_assert_eq(alice_grammar_vocab_build(pieces, lens, NULL, n, &v, &err), ALICE_OK, "%s", err.msg);
	struct alice_grammar_state *st;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK, "%s", err.msg);
	uint8_t *mask = malloc(n);
	enum alice_status rc = alice_grammar_state_mask(st, v, mask, &err);
	cr_expect_eq(rc, ALICE_ERR_RANGE, "status %d: %s", rc, err.msg);
	cr_expect(strstr(err.msg, "budget") != NULL, "%s", err.msg);
	free(mask);
	alice_grammar_state_free(st);
	alice_grammar_vocab_free(v);
	free(buf);
	free(pieces);
	free(lens);
	alice_grammar_free(g);
}
