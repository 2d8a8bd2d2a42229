/* Tests for core/tool_call.c and core/tool_grammar.c: format detection on
 * real templates, each format's parse (whole text, every prefix of it as a
 * stream would see it, malformed blocks), reasoning split, and the forced
 * call grammar (accepts the format's well-formed calls with valid
 * arguments, rejects the rest; what it accepts parses back). */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"
#include "alice/tool_call.h"

/* struct want literals leave stream_args out when false */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static char *read_template(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", ALICE_TEMPLATES_DIR, name);
	FILE *f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	return s;
}

static void detect(const char *file, enum alice_tool_format want, bool think)
{
	char *t = read_template(file);
	cr_expect_eq(alice_tool_format_detect(t), want, "%s: got %s", file,
		     alice_tool_format_name(alice_tool_format_detect(t)));
	cr_expect_eq(alice_tool_reasoning_detect(t), think, "%s: reasoning", file);
	free(t);
}

Test(tool_call, detect_real_templates)
{
	detect("Qwen-Qwen3-0.6B.jinja", ALICE_TOOL_FORMAT_HERMES, true);
	detect("Qwen-Qwen2.5-7B-Instruct.jinja", ALICE_TOOL_FORMAT_HERMES, false);
	detect("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ALICE_TOOL_FORMAT_HERMES, false);
	detect("Qwen3.5-4B.jinja", ALICE_TOOL_FORMAT_QWEN35, true);
	detect("Qwen-QwQ-32B.jinja", ALICE_TOOL_FORMAT_HERMES, true);
	detect("meta-llama-Llama-3.1-8B-Instruct.jinja", ALICE_TOOL_FORMAT_LLAMA3, false);
	detect("meta-llama-Llama-3.2-3B-Instruct.jinja", ALICE_TOOL_FORMAT_LLAMA3, false);
	detect("mistralai-Mistral-Nemo-Instruct-2407.jinja", ALICE_TOOL_FORMAT_MISTRAL, false);
	detect("Mistral-Small-3.2-24B-Instruct-2506.jinja", ALICE_TOOL_FORMAT_MISTRAL_ARGS, false);
	detect("google-gemma-2-2b-it.jinja", ALICE_TOOL_FORMAT_NONE, false);
	cr_expect_eq(alice_tool_format_detect(NULL), ALICE_TOOL_FORMAT_NONE);
}

static const char TOOLS[] =
	"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
	"\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},\"days\":{\"type\":\"integer\","
	"\"minimum\":1,\"maximum\":7},\"metric\":{\"type\":\"boolean\"}},\"required\":[\"city\",\"days\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"ping\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";

struct want {
	const char *reasoning, *content; /* NULL: empty */
	size_t n_calls;
	const char *names[4], *args[4];
	bool stream_args; /* some prefix reports a call being written */
};

static void check_parsed(const struct alice_chat_parsed *p, const struct want *w, const char *text)
{
	cr_expect_str_eq(p->reasoning.p ? p->reasoning.p : "", w->reasoning ? w->reasoning : "", "reasoning of %s", text);
	cr_expect_str_eq(p->content.p ? p->content.p : "", w->content ? w->content : "", "content of %s", text);
	cr_assert_eq(p->n_calls, w->n_calls, "calls of %s: %zu", text, p->n_calls);
	for (size_t i = 0; i < w->n_calls; i++) {
		cr_expect_str_eq(p->calls[i].name, w->names[i]);
		cr_expect_str_eq(p->calls[i].arguments, w->args[i], "arguments of call %zu of %s", i, text);
	}
}

static bool is_prefix(const struct alice_sbuf *a, const struct alice_sbuf *b)
{
	return a->n <= b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

/* The whole text parses to w; every prefix, parsed as partial, gives a
 * prefix of the final reasoning and content and a prefix of its calls. */
static void check(enum alice_tool_format f, bool think_open, const char *text, const struct want *w)
{
	struct json_object *tools = json_tokener_parse(TOOLS);
	struct alice_chat_parse_opts o = {f, true, think_open, tools};
	struct alice_chat_parsed full = {0};
	struct alice_error err = {{0}};
	size_t n = strlen(text), n_partial = 0;
	cr_assert_eq(alice_chat_parse(&o, text, n, false, &full, &err), ALICE_OK);
	check_parsed(&full, w, text);
	for (size_t k = 0; k <= n; k++) {
		struct alice_chat_parsed p = {0};
		cr_assert_eq(alice_chat_parse(&o, text, k, true, &p, &err), ALICE_OK);
		cr_expect(is_prefix(&p.reasoning, &full.reasoning), "reasoning of prefix %zu of %s", k, text);
		cr_expect(is_prefix(&p.content, &full.content), "content of prefix %zu of %s: '%s'", k, text,
			  p.content.p ? p.content.p : "");
		cr_expect(p.n_calls <= full.n_calls);
		for (size_t i = 0; i < p.n_calls; i++)
			cr_expect_str_eq(p.calls[i].arguments, full.calls[i].arguments);
		/* a call being written: the next call's name, a prefix of its
		 * arguments (when it completes: text that breaks off later, as in
		 * the malformed cases, cannot be known here) */
		if (p.has_partial && p.n_calls < full.n_calls) {
			const struct alice_tool_call *f = &full.calls[p.n_calls];
			cr_expect_str_eq(p.partial.name, f->name);
			cr_expect(strncmp(f->arguments, p.partial.arguments, strlen(p.partial.arguments)) == 0,
				  "prefix %zu of %s: arguments so far '%s' start '%s'", k, text, p.partial.arguments, f->arguments);
			n_partial++;
		}
		alice_chat_parsed_clear(&p);
	}
	if (w->stream_args)
		cr_expect(n_partial > 0, "%s: a call's arguments stream before it is complete", text);
	alice_chat_parsed_clear(&full);
	json_object_put(tools);
}

Test(tool_call, hermes)
{
	check(ALICE_TOOL_FORMAT_HERMES, false,
	      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
	      &(struct want){NULL, NULL, 1, {"get_weather"}, {"{\"city\": \"Paris\", \"days\": 3}"}, true});
	/* text before, two parallel calls, a tag-like text that is no call */
	check(ALICE_TOOL_FORMAT_HERMES, false,
	      "Let me check <tool. <tool_call>{\"name\":\"ping\",\"arguments\":{}}</tool_call>\n<tool_call>\n"
	      "{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\", \\\"days\\\": 1}\"}\n</tool_call>",
	      &(struct want){NULL, "Let me check <tool. \n", 2, {"ping", "get_weather"},
			     {"{}", "{\"city\": \"Oslo\", \"days\": 1}"}});
	/* malformed JSON and a missing name stay text; a call cut off at the end too */
	check(ALICE_TOOL_FORMAT_HERMES, false, "<tool_call>{\"name\": }</tool_call> ok",
	      &(struct want){NULL, "<tool_call>{\"name\": }</tool_call> ok", 0, {0}, {0}});
	check(ALICE_TOOL_FORMAT_HERMES, false, "<tool_call>{\"arguments\": {}}</tool_call>",
	      &(struct want){NULL, "<tool_call>{\"arguments\": {}}</tool_call>", 0, {0}, {0}});
	check(ALICE_TOOL_FORMAT_HERMES, false, "a <tool_call>{\"name\": \"ping\", \"argu",
	      &(struct want){NULL, "a <tool_call>{\"name\": \"ping\", \"argu", 0, {0}, {0}});
	/* no close tag at the very end (the model stopped): still a call */
	check(ALICE_TOOL_FORMAT_HERMES, false, "<tool_call>{\"name\": \"ping\", \"arguments\": {}}",
	      &(struct want){NULL, NULL, 1, {"ping"}, {"{}"}});
}

Test(tool_call, hermes_with_reasoning)
{
	check(ALICE_TOOL_FORMAT_HERMES, false,
	      "<think>\nI should ping.\n</think>\n\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>",
	      &(struct want){"\nI should ping.\n", NULL, 1, {"ping"}, {"{}"}});
	/* the prompt opened the block */
	check(ALICE_TOOL_FORMAT_HERMES, true, "hmm </thin k>\n</think>\n\nThe answer is 4.",
	      &(struct want){"hmm </thin k>\n", "The answer is 4.", 0, {0}, {0}});
	/* never closed: all reasoning */
	check(ALICE_TOOL_FORMAT_HERMES, true, "still thinking </thi",
	      &(struct want){"still thinking </thi", NULL, 0, {0}, {0}});
}

Test(tool_call, reasoning_off_keeps_text)
{
	struct alice_chat_parse_opts o = {ALICE_TOOL_FORMAT_NONE, false, false, NULL};
	struct alice_chat_parsed p = {0};
	struct alice_error err;
	const char *t = "<think>x</think>y <tool_call>{}";
	cr_assert_eq(alice_chat_parse(&o, t, strlen(t), false, &p, &err), ALICE_OK);
	cr_expect_str_eq(p.content.p, t);
	cr_expect_eq(p.n_calls, 0);
	alice_chat_parsed_clear(&p);
}

Test(tool_call, qwen35_xml)
{
	check(ALICE_TOOL_FORMAT_QWEN35, true,
	      "Need weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n"
	      "</parameter>\n<parameter=days>\n2\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n</function>\n"
	      "</tool_call>",
	      &(struct want){"Need weather.\n", NULL, 1, {"get_weather"},
			     {"{\"city\":\"New York\",\"days\":2,\"metric\":true}"}, true});
	/* a string parameter that looks like a number stays a string; two calls */
	check(ALICE_TOOL_FORMAT_QWEN35, false,
	      "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>\n"
	      "<tool_call>\n<function=ping>\n</function>\n</tool_call>",
	      &(struct want){NULL, NULL, 2, {"get_weather", "ping"}, {"{\"city\":\"42\"}", "{}"}});
	check(ALICE_TOOL_FORMAT_QWEN35, false, "<tool_call>\n<function=ping>\n<param=x>1</param></function></tool_call>",
	      &(struct want){NULL, "<tool_call>\n<function=ping>\n<param=x>1</param></function></tool_call>", 0, {0},
			     {0}});
}

Test(tool_call, llama3_mistral_generic)
{
	check(ALICE_TOOL_FORMAT_LLAMA3, false, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 1}}",
	      &(struct want){NULL, NULL, 1, {"get_weather"}, {"{\"city\": \"Rome\", \"days\": 1}"}, true});
	check(ALICE_TOOL_FORMAT_LLAMA3, false, "<|python_tag|>{\"name\": \"ping\", \"parameters\": {}}",
	      &(struct want){NULL, NULL, 1, {"ping"}, {"{}"}});
	check(ALICE_TOOL_FORMAT_LLAMA3, false, "Sure: {\"name\": \"ping\"}",
	      &(struct want){NULL, "Sure: {\"name\": \"ping\"}", 0, {0}, {0}});
	check(ALICE_TOOL_FORMAT_MISTRAL, false,
	      "[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": "
	      "{\"city\": \"Lyon\", \"days\": 2}}]",
	      &(struct want){NULL, NULL, 2, {"ping", "get_weather"}, {"{}", "{\"city\":\"Lyon\",\"days\":2}"}});
	check(ALICE_TOOL_FORMAT_MISTRAL_ARGS, false, "[TOOL_CALLS]ping[ARGS]{}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"A\", \"days\": 1}",
	      &(struct want){NULL, NULL, 2, {"ping", "get_weather"}, {"{}", "{\"city\": \"A\", \"days\": 1}"}});
	check(ALICE_TOOL_FORMAT_GENERIC, false, "{\"tool_calls\": [{\"name\": \"ping\", \"arguments\": {}}]}",
	      &(struct want){NULL, NULL, 1, {"ping"}, {"{}"}});
	check(ALICE_TOOL_FORMAT_GENERIC, false, "{\"response\": \"hi\"}",
	      &(struct want){NULL, "{\"response\": \"hi\"}", 0, {0}, {0}});
}

Test(tool_call, think_open)
{
	cr_expect(alice_tool_think_open("<|im_start|>assistant\n<think>\n", 29));
	cr_expect(!alice_tool_think_open("<think>\n\n</think>\n\n", 19));
	cr_expect(!alice_tool_think_open("", 0));
}

/* ---- grammar ---- */

static struct alice_grammar *tool_grammar(enum alice_tool_format f, const char *tools, bool parallel, bool think)
{
	struct json_object *t = json_tokener_parse(tools);
	struct alice_grammar *g = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_tool_grammar(f, t, parallel, think, 0, &g, &err);
	json_object_put(t);
	cr_assert_eq(st, ALICE_OK, "%s", err.msg);
	return g;
}

static bool accepts(const struct alice_grammar *g, const char *doc)
{
	struct alice_grammar_state *st;
	struct alice_error err;
	cr_assert_eq(alice_grammar_state_create(g, &st, &err), ALICE_OK);
	bool ok = alice_grammar_state_accept_bytes(st, doc, strlen(doc), &err) == ALICE_OK &&
		  alice_grammar_state_can_end(st);
	alice_grammar_state_free(st);
	return ok;
}

#define OK(g, doc) cr_expect(accepts(g, doc), "should accept: %s", doc)
#define NO(g, doc) cr_expect(!accepts(g, doc), "should reject: %s", doc)

Test(tool_grammar, hermes)
{
	struct alice_grammar *g = tool_grammar(ALICE_TOOL_FORMAT_HERMES, TOOLS, false, false);
	OK(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>");
	OK(g, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>");
	NO(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}\n</tool_call>");
	NO(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>");
	NO(g, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>");
	NO(g, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", "
	      "\"arguments\": {}}\n</tool_call>");
	NO(g, "Hello");
	alice_grammar_free(g);
	g = tool_grammar(ALICE_TOOL_FORMAT_HERMES, TOOLS, true, true);
	OK(g, "</think>\n\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
	      "\"ping\", \"arguments\": {}}\n</tool_call>");
	NO(g, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>");
	alice_grammar_free(g);
}

Test(tool_grammar, qwen35)
{
	struct alice_grammar *g = tool_grammar(ALICE_TOOL_FORMAT_QWEN35, TOOLS, false, false);
	OK(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n2\n"
	      "</parameter>\n</function>\n</tool_call>");
	OK(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\n\n</parameter>\n<parameter=days>\n7\n"
	      "</parameter>\n<parameter=metric>\nfalse\n</parameter>\n</function>\n</tool_call>");
	OK(g, "<tool_call>\n<function=ping>\n</function>\n</tool_call>");
	NO(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n</function>\n</tool_call>");
	NO(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nA very long city name\n</parameter>\n"
	      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>");
	alice_grammar_free(g);
	/* a string pattern cannot be enforced on raw text: refused, naming it */
	struct json_object *t = json_tokener_parse(
		"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
		"{\"x\":{\"type\":\"string\",\"pattern\":\"^a+$\"}}}}}]");
	struct alice_error err = {{0}};
	cr_expect_eq(alice_tool_grammar(ALICE_TOOL_FORMAT_QWEN35, t, false, false, 0, &g, &err), ALICE_ERR_UNSUPPORTED);
	cr_expect(strstr(err.msg, "pattern"), "%s", err.msg);
	json_object_put(t);
}

Test(tool_grammar, other_formats_and_errors)
{
	struct alice_grammar *g = tool_grammar(ALICE_TOOL_FORMAT_LLAMA3, TOOLS, true, false);
	OK(g, "{\"name\": \"ping\", \"parameters\": {}}");
	NO(g, "{\"name\": \"ping\", \"arguments\": {}}");
	alice_grammar_free(g);
	g = tool_grammar(ALICE_TOOL_FORMAT_MISTRAL, TOOLS, true, false);
	OK(g, "[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"ping\", \"arguments\": {}}]");
	alice_grammar_free(g);
	g = tool_grammar(ALICE_TOOL_FORMAT_MISTRAL_ARGS, TOOLS, false, false);
	OK(g, "[TOOL_CALLS]ping[ARGS]{}");
	alice_grammar_free(g);
	g = tool_grammar(ALICE_TOOL_FORMAT_GENERIC, TOOLS, false, false);
	OK(g, "{\"tool_calls\": [{\"name\": \"ping\", \"arguments\": {}}]}");
	alice_grammar_free(g);
	struct alice_error err = {{0}};
	struct json_object *t = json_tokener_parse("[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]");
	cr_expect_eq(alice_tool_grammar(ALICE_TOOL_FORMAT_HERMES, t, false, false, 0, &g, &err), ALICE_ERR_INVALID);
	json_object_put(t);
	t = json_tokener_parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"wat\"}}}]");
	cr_expect_neq(alice_tool_grammar(ALICE_TOOL_FORMAT_HERMES, t, false, false, 0, &g, &err), ALICE_OK);
	cr_expect(strstr(err.msg, "tool 'f'"), "%s", err.msg);
	json_object_put(t);
	t = json_tokener_parse(TOOLS);
	cr_expect_eq(alice_tool_grammar(ALICE_TOOL_FORMAT_HERMES, t, false, false, 100, &g, &err), ALICE_ERR_RANGE);
	json_object_put(t);
}
