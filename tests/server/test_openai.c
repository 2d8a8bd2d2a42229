// ctest-labels: unit;server
/* Request parsing and validation of server/openai.c, without a model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/tokenizer.h"
#include "openai.h"

static int parse(enum srv_kind k, const char *json, struct srv_gen_request *r, struct srv_api_error *e)
{
	return srv_openai_parse(k, json, strlen(json), NULL, r, e);
}

static void expect_400(enum srv_kind k, const char *json, const char *param)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	memset(&e, 0, sizeof(e));
	cr_assert_eq(parse(k, json, &r, &e), -1, "accepted: %s", json);
	cr_assert_eq(e.status, 400, "%s -> %d", json, e.status);
	cr_assert_str_eq(e.type, "invalid_request_error");
	cr_assert_str_eq(e.param, param, "%s: param '%s', message %s", json, e.param, e.message);
	cr_assert(e.message[0], "empty message for %s", json);
}

Test(openai, chat_defaults)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	cr_assert_eq(parse(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e), 0);
	cr_assert_eq(r.n_messages, 1);
	cr_assert_str_eq(r.messages[0].role, "user");
	cr_assert_str_eq(r.messages[0].content, "hi");
	cr_assert_eq(r.max_tokens, -1);
	cr_assert_float_eq(r.sampling.temperature, 1.0, 1e-9);
	cr_assert_float_eq(r.sampling.top_p, 1.0, 1e-9);
	cr_assert_float_eq(r.sampling.repeat_penalty, 1.0, 1e-9);
	/* the request's defaults are the core's, field for field */
	struct alice_sampling_params def;
	alice_sampling_params_default(&def);
	cr_assert(r.sampling.temperature == def.temperature && r.sampling.top_p == def.top_p &&
		  r.sampling.min_p == def.min_p && r.sampling.top_k == def.top_k &&
		  r.sampling.repeat_penalty == def.repeat_penalty && r.sampling.penalty_last_n == def.penalty_last_n &&
		  r.sampling.frequency_penalty == def.frequency_penalty &&
		  r.sampling.presence_penalty == def.presence_penalty);
	cr_assert_eq(r.n, 1);
	cr_assert(!r.stream && !r.sampling.logprobs && !r.has_seed && r.n_stop == 0 && !r.grammar && !r.ignore_eos);
	srv_gen_request_clear(&r);
}

Test(openai, chat_all_fields)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	const char *j = "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"s\"},"
			"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
			"{\"role\":\"assistant\",\"content\":null}],"
			"\"max_tokens\":5,\"max_completion_tokens\":7,\"temperature\":0,\"top_k\":3,\"top_p\":0.5,"
			"\"min_p\":0.1,\"seed\":-3,\"stop\":[\"x\",\"yy\"],\"presence_penalty\":1,"
			"\"frequency_penalty\":-1,\"repeat_penalty\":1.1,\"logit_bias\":{\"12\":-100,\"7\":2.5},"
			"\"n\":3,\"logprobs\":true,\"top_logprobs\":4,\"stream\":true,"
			"\"stream_options\":{\"include_usage\":true},\"grammar\":\"root ::= \\\"a\\\"\",\"unknown\":[1]}";
	cr_assert_eq(parse(SRV_KIND_CHAT, j, &r, &e), 0, "%s", e.message);
	cr_assert_str_eq(r.model, "m");
	cr_assert_str_eq(r.messages[0].role, "system");
	cr_assert_str_eq(r.messages[1].content, "ab");
	cr_assert_str_eq(r.messages[2].content, "");
	cr_assert_eq(r.max_tokens, 7); /* max_completion_tokens wins */
	cr_assert_eq(r.sampling.top_k, 3);
	cr_assert_float_eq(r.sampling.top_p, 0.5, 1e-6);
	cr_assert_float_eq(r.sampling.min_p, 0.1, 1e-6);
	cr_assert_float_eq(r.sampling.temperature, 0.0, 1e-9);
	cr_assert_float_eq(r.sampling.presence_penalty, 1.0, 1e-6);
	cr_assert_float_eq(r.sampling.frequency_penalty, -1.0, 1e-6);
	cr_assert_float_eq(r.sampling.repeat_penalty, 1.1, 1e-6);
	cr_assert(r.has_seed && r.sampling.seed == (uint64_t)-3);
	cr_assert_eq(r.n_stop, 2);
	cr_assert_str_eq(r.stop[1], "yy");
	cr_assert_eq(r.n_logit_bias, 2);
	cr_assert(r.sampling.logit_bias == r.logit_bias && r.sampling.n_logit_bias == 2);
	cr_assert_eq(r.n, 3);
	cr_assert(r.sampling.logprobs && r.sampling.n_probs == 4 && r.stream && r.include_usage);
	/* the grammar arrives compiled: the 12 bytes of root ::= "a", matching "a" and nothing more */
	cr_assert_not_null(r.grammar);
	cr_assert_eq(alice_grammar_source_bytes(r.grammar), 12);
	struct alice_grammar_state *gs = NULL;
	cr_assert_eq(alice_grammar_state_create(r.grammar, &gs, NULL), ALICE_OK);
	cr_assert(!alice_grammar_state_check_bytes(gs, "b", 1));
	cr_assert_eq(alice_grammar_state_accept_bytes(gs, "a", 1, NULL), ALICE_OK);
	cr_assert(alice_grammar_state_must_end(gs));
	alice_grammar_state_free(gs);
	srv_gen_request_clear(&r);
}

Test(openai, completion_prompts)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	cr_assert_eq(parse(SRV_KIND_COMPLETION, "{\"prompt\":[\"a\",[1,2,3],\"c\"],\"logprobs\":2,\"echo\":true}", &r, &e), 0);
	cr_assert_eq(r.n_prompts, 3);
	cr_assert_str_eq(r.prompts[0].text, "a");
	cr_assert_eq(r.prompts[1].n_tokens, 3);
	cr_assert_eq(r.prompts[1].tokens[2], 3);
	cr_assert(r.sampling.logprobs && r.sampling.n_probs == 2 && r.echo);
	srv_gen_request_clear(&r);
	cr_assert_eq(parse(SRV_KIND_COMPLETION, "{\"prompt\":[5,6],\"logprobs\":null}", &r, &e), 0);
	cr_assert_eq(r.n_prompts, 1);
	cr_assert_eq(r.prompts[0].n_tokens, 2);
	cr_assert(!r.sampling.logprobs);
	srv_gen_request_clear(&r);
}

Test(openai, rejects_bad_json)
{
	expect_400(SRV_KIND_CHAT, "", "");
	expect_400(SRV_KIND_CHAT, "{", "");
	expect_400(SRV_KIND_CHAT, "[]", "");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[]} junk", "");
	expect_400(SRV_KIND_CHAT, "{\"a\":\"\xff\xfe\"}", ""); /* invalid UTF-8 */
	/* a valid object nested beyond the depth limit */
	char deep[700];
	strcpy(deep, "{\"a\":");
	memset(deep + 5, '[', 300);
	memset(deep + 305, ']', 300);
	strcpy(deep + 605, "}");
	expect_400(SRV_KIND_CHAT, deep, "");
	struct srv_api_error e;
	cr_assert_null(srv_json_parse_object(deep, strlen(deep), &e));
	cr_assert(strstr(e.message, "depth") || strstr(e.message, "nest"), "%s", e.message);
}

Test(openai, rejects_wrong_types_and_ranges)
{
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
	char buf[512];
	struct {
		const char *field;
		const char *param;
	} cases[] = {
		{"\"temperature\":\"1\"", "temperature"}, {"\"temperature\":2.5", "temperature"},
		{"\"top_p\":-0.1", "top_p"},		 {"\"top_k\":1.5", "top_k"},
		{"\"min_p\":true", "min_p"},		 {"\"max_tokens\":0", "max_tokens"},
		{"\"max_tokens\":1e30", "max_tokens"},	 {"\"n\":17", "n"},
		{"\"n\":0", "n"},			 {"\"seed\":\"s\"", "seed"},
		{"\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]", "stop"},
		{"\"stop\":[\"\"]", "stop"},		 {"\"stop\":{}", "stop"},
		{"\"presence_penalty\":2.1", "presence_penalty"},
		{"\"frequency_penalty\":-3", "frequency_penalty"},
		{"\"repeat_penalty\":0", "repeat_penalty"},
		{"\"logit_bias\":[]", "logit_bias"},	 {"\"logit_bias\":{\"-1\":1}", "logit_bias"},
		{"\"logit_bias\":{\"1x\":1}", "logit_bias"},
		{"\"logit_bias\":{\"1\":\"a\"}", "logit_bias"},
		{"\"logit_bias\":{\"1\":101}", "logit_bias"},
		{"\"logprobs\":1", "logprobs"},	 {"\"logprobs\":true,\"top_logprobs\":21", "top_logprobs"},
		{"\"top_logprobs\":1", "top_logprobs"},
		{"\"stream\":1", "stream"},		 {"\"stream_options\":{\"include_usage\":true}", "stream_options"},
		{"\"stream\":true,\"stream_options\":{\"include_usage\":1}", "stream_options.include_usage"},
		{"\"grammar\":1", "grammar"},		 {"\"model\":[]", "model"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(buf, sizeof(buf), "{%s,%s}", m, cases[i].field);
		expect_400(SRV_KIND_CHAT, buf, cases[i].param);
	}
}

Test(openai, rejects_bad_messages)
{
	expect_400(SRV_KIND_CHAT, "{}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":{}}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[]}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[1]}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", "messages");

	struct srv_gen_request r;
	struct srv_api_error e;
	cr_assert_eq(parse(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}", &r, &e), -1);
	cr_assert(strstr(e.message, "input_audio") && strstr(e.message, "only 'text'"), "%s", e.message);
}

Test(openai, rejects_bad_prompts)
{
	expect_400(SRV_KIND_COMPLETION, "{}", "prompt");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":1}", "prompt");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":[]}", "prompt");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":[\"a\",{}]}", "prompt");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":[1,-2]}", "prompt");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":[[]]}", "prompt");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":true}", "logprobs");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":21}", "logprobs");
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":\"a\",\"echo\":\"yes\"}", "echo");
}

Test(openai, error_json_shape)
{
	struct srv_api_error e;
	srv_api_error_invalid(&e, "temperature", "bad %d", 3);
	struct json_object *o = srv_api_error_json(&e), *err, *v;
	cr_assert(json_object_object_get_ex(o, "error", &err));
	cr_assert(json_object_object_get_ex(err, "message", &v));
	cr_assert_str_eq(json_object_get_string(v), "bad 3");
	cr_assert(json_object_object_get_ex(err, "param", &v));
	cr_assert_str_eq(json_object_get_string(v), "temperature");
	cr_assert(json_object_object_get_ex(err, "code", &v));
	cr_assert_null(v); /* present, null */
	cr_assert(json_object_object_get_ex(err, "type", &v));
	cr_assert_str_eq(json_object_get_string(v), "invalid_request_error");
	json_object_put(o);
}

/* The server's token texts go through the core's one repair policy
 * (alice_utf8_repair): one U+FFFD per maximal invalid subpart, as Python's
 * errors="replace" (b"a\xe2\x82" -> "a\ufffd"). */
Test(openai, utf8_repair)
{
	size_t n;
	char *s = alice_utf8_repair("a\xe2\x82", 3, &n);
	cr_assert_str_eq(s, "a\xef\xbf\xbd");
	free(s);
	s = alice_utf8_repair("\xe2\x82\xac!", 4, &n);
	cr_assert_str_eq(s, "\xe2\x82\xac!");
	cr_assert_eq(n, 4);
	free(s);
	s = alice_utf8_repair("\xed\xa0\x80", 3, &n); /* surrogate: three maximal subparts */
	cr_assert_eq(n, 9);
	free(s);
	s = alice_utf8_repair("\xe2\x28\xa1", 3, &n); /* bad continuation: lead alone, '(' kept, stray byte */
	cr_assert_str_eq(s, "\xef\xbf\xbd(\xef\xbf\xbd");
	free(s);
}

Test(openai, ignore_eos)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	cr_assert_eq(parse(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"ignore_eos\":true}",
			   &r, &e), 0, "%s", e.message);
	cr_assert(r.ignore_eos);
	srv_gen_request_clear(&r);
	cr_assert_eq(parse(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"ignore_eos\":true}", &r, &e), 0, "%s", e.message);
	cr_assert(r.ignore_eos);
	srv_gen_request_clear(&r);
	expect_400(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"ignore_eos\":1}", "ignore_eos");
}

Test(openai, response_format)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
	char buf[512];
	snprintf(buf, sizeof(buf), "{%s,\"response_format\":{\"type\":\"text\"}}", m);
	cr_assert_eq(parse(SRV_KIND_CHAT, buf, &r, &e), 0, "%s", e.message);
	cr_assert_null(r.grammar);
	srv_gen_request_clear(&r);
	snprintf(buf, sizeof(buf), "{%s,\"response_format\":{\"type\":\"json_object\"}}", m);
	cr_assert_eq(parse(SRV_KIND_CHAT, buf, &r, &e), 0, "%s", e.message);
	cr_assert_not_null(r.grammar);
	cr_assert_gt(alice_grammar_rule_count(r.grammar), 0);
	cr_assert_gt(alice_grammar_source_bytes(r.grammar), 0);
	struct alice_grammar_state *gs = NULL; /* any JSON object, nothing else */
	cr_assert_eq(alice_grammar_state_create(r.grammar, &gs, NULL), ALICE_OK);
	cr_assert(!alice_grammar_state_check_bytes(gs, "[", 1));
	cr_assert_eq(alice_grammar_state_accept_bytes(gs, "{}", 2, NULL), ALICE_OK);
	cr_assert(alice_grammar_state_can_end(gs));
	alice_grammar_state_free(gs);
	srv_gen_request_clear(&r);
	snprintf(buf, sizeof(buf),
		 "{%s,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
		 "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}}", m);
	cr_assert_eq(parse(SRV_KIND_CHAT, buf, &r, &e), 0, "%s", e.message);
	cr_assert_not_null(r.grammar);
	srv_gen_request_clear(&r);
	const char *bad[] = {
		"\"response_format\":\"json\"",
		"\"response_format\":{}",
		"\"response_format\":{\"type\":\"yaml\"}",
		"\"response_format\":{\"type\":\"json_schema\"}",
		"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":5}}",
		"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"tuple\"}}}",
		"\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "{%s,%s}", m, bad[i]);
		expect_400(SRV_KIND_CHAT, buf, "response_format");
	}
}

/* The operator caps applied by the parser: a GBNF grammar over the size cap
 * is a 413 before it is compiled (an invalid one too: the compiler never
 * sees it), and the other caps as srv_limits_check. */
Test(openai, caps_in_the_parser)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	const struct srv_limits lim = {.max_n = 2, .max_tokens = 8, .max_messages = 3, .max_grammar_bytes = 16};
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
	char buf[512];
	snprintf(buf, sizeof(buf), "{%s,\"grammar\":\"root ::= [z-a] this is not GBNF at all\"}", m);
	cr_assert_eq(srv_openai_parse(SRV_KIND_CHAT, buf, strlen(buf), &lim, &r, &e), -1);
	cr_assert_eq(e.status, 413, "%d %s", e.status, e.message);
	cr_assert_str_eq(e.param, "grammar");
	cr_assert_null(r.grammar);
	snprintf(buf, sizeof(buf), "{%s,\"grammar\":\"root ::= [z-a]\"}", m); /* small and invalid: 400 */
	cr_assert_eq(srv_openai_parse(SRV_KIND_CHAT, buf, strlen(buf), &lim, &r, &e), -1);
	cr_assert_eq(e.status, 400);
	snprintf(buf, sizeof(buf), "{%s,\"grammar\":\"root ::= \\\"a\\\"\"}", m);
	cr_assert_eq(srv_openai_parse(SRV_KIND_CHAT, buf, strlen(buf), &lim, &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.max_tokens, 8); /* absent: the cap */
	srv_gen_request_clear(&r);
	snprintf(buf, sizeof(buf), "{%s,\"n\":3}", m);
	cr_assert_eq(srv_openai_parse(SRV_KIND_CHAT, buf, strlen(buf), &lim, &r, &e), -1);
	cr_assert_eq(e.status, 400);
	cr_assert_str_eq(e.param, "n");
	snprintf(buf, sizeof(buf), "{%s,\"response_format\":{\"type\":\"json_object\"}}", m); /* schema GBNF counts */
	cr_assert_eq(srv_openai_parse(SRV_KIND_CHAT, buf, strlen(buf), &lim, &r, &e), -1);
	cr_assert_eq(e.status, 413);
}

/* tools, tool_choice and the tool fields of messages (openai_tools.c) */
Test(openai, tools_and_tool_messages)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	const char *ok = "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},"
			 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
			 "\"function\":{\"name\":\"wx\",\"arguments\":\"{\\\"c\\\": 1}\"}}]},"
			 "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"name\":\"wx\",\"content\":\"sunny\"}],"
			 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"wx\",\"parameters\":{\"type\":\"object\"}}}],"
			 "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"wx\"}},\"parallel_tool_calls\":true}";
	cr_assert_eq(parse(SRV_KIND_CHAT, ok, &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.tool_choice, SRV_TOOL_CHOICE_NAMED);
	cr_expect_str_eq(r.tool_name, "wx");
	cr_expect(r.parallel_tool_calls);
	cr_expect_eq(json_object_array_length(r.tools), 1);
	cr_expect_str_eq(r.messages[2].role, "tool");
	cr_expect_str_eq(r.messages[1].content, "");
	/* arguments reach the template as an object */
	cr_expect_str_eq(json_object_to_json_string_ext(r.extra[1], JSON_C_TO_STRING_PLAIN),
			 "{\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"wx\","
			 "\"arguments\":{\"c\":1}}}]}");
	cr_expect_str_eq(json_object_to_json_string_ext(r.extra[2], JSON_C_TO_STRING_PLAIN),
			 "{\"tool_call_id\":\"call_1\",\"name\":\"wx\"}");
	cr_expect_null(r.extra[0]);
	srv_gen_request_clear(&r);

	const char *m = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
	char buf[1024];
#define BAD(tail, param)                                 \
	do {                                             \
		snprintf(buf, sizeof(buf), "%s%s}", m, tail); \
		expect_400(SRV_KIND_CHAT, buf, param);   \
	} while (0)
	BAD("\"tools\":{}", "tools");
	BAD("\"tools\":[{\"type\":\"function\"}]", "tools");
	BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]", "tools");
	BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]", "tools");
	BAD("\"tool_choice\":\"required\"", "tool_choice");
	BAD("\"tool_choice\":\"maybe\"", "tool_choice");
	BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\","
	    "\"function\":{\"name\":\"g\"}}", "tool_choice");
	BAD("\"parallel_tool_calls\":1", "parallel_tool_calls");
#undef BAD
	expect_400(SRV_KIND_CHAT,
		   "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
		   "\"arguments\":\"[1]\"}}]}]}",
		   "messages");
	expect_400(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":5,\"content\":\"x\"}]}", "messages");
}
