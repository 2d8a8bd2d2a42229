/* test_jinja.c — the Jinja interpreter (core/jinja/, alice/jinja.h).
 *
 * 1. Language cases: each expected output (or error) below is what Python's
 *    jinja2 3.1 renders the transformers way (scripts/jinja_ref.py), generated
 *    by scripts/gen_jinja_cases.py, never hand-written.
 * 2. Goldens: every template x context pair of $ALICE_TEMPLATES_DIR
 *    (../shared/templates: 53 real chat templates, 7 contexts) rendered and
 *    compared byte for byte with goldens/<template>__<context>.txt; for a
 *    .err golden the render must fail and carry jinja2's message.
 * 3. Limits and hostile templates: errors, never crashes. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/jinja.h"
#include "support/files.h"
#include "support/paths.h"

#define NOW_2026_01_15_103000 1768473000 /* the goldens' strftime_now clock, UTC */

struct lang_case {
	const char *name, *tpl, *ctx;
	const char *out; /* NULL: the render (or compile) must fail */
	const char *err; /* when failing: jinja2's message, which ours must contain ("" = any) */
};

static const struct lang_case lang_cases[] = {
	{"text", "hello", "{}", "hello", NULL},
	{"var", "{{ a }}-{{ b }}", "{\"a\": \"x\", \"b\": 3}", "x-3", NULL},
	{"undef_prints_empty", "[{{ nope }}]", "{}", "[]", NULL},
	{"none_true_float", "{{ none }} {{ true }} {{ 1.0 }} {{ 0.1 }} {{ 1e-7 }} {{ 1e20 }} {{ 2.5e3 }}", "{}", "None True 1.0 0.1 1e-07 1e+20 2500.0", NULL},
	{"if_elif_else", "{% for x in [1,2,3] %}{% if x == 1 %}a{% elif x == 2 %}b{% else %}c{% endif %}{% endfor %}", "{}", "abc", NULL},
	{"loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", "{}", "103TrueFalse3;212FalseFalse3;321FalseTrue3;", NULL},
	{"loop_prev_next", "{% for x in [1,2,3] %}{{ loop.previtem }}|{{ loop.nextitem }};{% endfor %}", "{}", "|2;1|3;2|;", NULL},
	{"for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", "{}", "empty", NULL},
	{"for_if_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", "{}", "15 35 55 75 95 ", NULL},
	{"for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1,a=2,", NULL},
	{"for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}", "ba", NULL},
	{"break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{}", "0134", NULL},
	{"set_scope", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", "{}", "21", NULL},
	{"namespace", "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", "6", NULL},
	{"block_set", "{% set x %}  a{{ 1 }}b  {% endset %}[{{ x }}]", "{}", "[  a1b  ]", NULL},
	{"block_set_filter", "{% set x | upper %}abc{% endset %}{{ x }}", "{}", "ABC", NULL},
	{"macro", "{% macro f(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}{{ f('x', 'y') }}", "{}", "<1B><23><xy>", NULL},
	{"macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", "{}", "54321", NULL},
	{"filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", "{}", "ABC D", NULL},
	{"ws_control", "a  {{- ' b ' -}}  c\n  {%- if true -%}  d  {%- endif -%}\n e", "{}", "a b cde", NULL},
	{"trim_lstrip", "<\n  {% if true %}\n    x\n  {% endif %}\n>", "{}", "<\n    x\n>", NULL},
	{"lstrip_plus", "<\n  {%+ if true %}y{% endif %}>", "{}", "<\n  y>", NULL},
	{"comment", "a {# c #}b\n  {# line #}\nc", "{}", "a b\nc", NULL},
	{"trailing_newline", "x\n", "{}", "x", NULL},
	{"crlf", "a\r\nb\r\n{% if true %}\r\nc{% endif %}", "{}", "a\nb\nc", NULL},
	{"str_methods", "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}", "{}", "a b|a|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a-b', 'c']", NULL},
	{"str_methods2", "{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x','c')) }}{{ 'aXa'.replace('a','b') }}{{ 'hello world'.title() }}{{ 'ABC'.lower() }}{{ 'abc'.upper() }}{{ 'hELLO'.capitalize() }}{{ 'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}{{ '-'.join(['a','b']) }}", "{}", "TrueTruebXbHello WorldabcABCHello13a-b", NULL},
	{"dict_methods", "{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}", "{\"d\": {\"a\": 1, \"b\": [1, \"x\"]}}", "1None5['a', 'b'][1, [1, 'x']][('a', 1), ('b', [1, 'x'])]", NULL},
	{"slicing", "{{ 'abcdef'[1:3] }}{{ 'abcdef'[::-1] }}{{ [1,2,3,4][-2:] }}{{ [1,2,3,4][::2] }}{{ [1,2,3][5:] }}{{ 'abc'[-1] }}", "{}", "bcfedcba[3, 4][1, 3][]c", NULL},
	{"in_ops", "{{ 'a' in 'cat' }}{{ 2 in [1,2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}", "{}", "TrueTrueTrueTrue", NULL},
	{"arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1.5 + 1 }} {{ 'ab' * 3 }}", "{}", "3 -4 1 2 3.5 1024 7 9 2.5 ababab", NULL},
	{"concat_tilde", "{{ 1 ~ 'a' ~ none ~ true ~ nope }}", "{}", "1aNoneTrue", NULL},
	{"str_percent", "{{ '%s-%d-%05.2f-%r' % ('a', 3, 2.5, 'q') }}|{{ '%s!' % 'x' }}|{{ '%(a)s' % {'a': 1} }}", "{}", "a-3-02.50-'q'|x!|1", NULL},
	{"compare", "{{ 1 < 2 }}{{ 'a' < 'b' }}{{ 1 == 1.0 }}{{ [1] == [1] }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 5 }}{{ none == none }}{{ true == 1 }}", "{}", "TrueTrueTrueTrueTrueFalseTrueTrue", NULL},
	{"and_or_not", "{{ 0 or 'x' }}{{ 1 and 'y' }}{{ not 0 }}{{ '' or [] }}{{ none and 1 }}", "{}", "xyTrue[]None", NULL},
	{"cond_expr", "{{ 'a' if true else 'b' }}{{ 'a' if false else 'b' }}[{{ 'a' if false }}]", "{}", "ab[]", NULL},
	{"tests", "{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ [] is sequence }}{{ 1 is equalto 1 }}{{ 2 is eq 3 }}{{ 1 is in [1] }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is not string }}", "{\"x\": 1}", "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrue", NULL},
	{"tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}", "{\"d\": {\"b\": \"\303\251\\n\\\"q\\\"\", \"a\": [1, 2.5, true, null, {}], \"c\": []}}", "{\"b\": \"\303\251\\n\\\"q\\\"\", \"a\": [1, 2.5, true, null, {}], \"c\": []}|{\n  \"b\": \"\303\251\\n\\\"q\\\"\",\n  \"a\": [\n    1,\n    2.5,\n    true,\n    null,\n    {}\n  ],\n  \"c\": []\n}|{\"b\":\"\303\251\\n\\\"q\\\"\",\"a\":[1,2.5,true,null,{}],\"c\":[]}|{\"a\": [1, 2.5, true, null, {}], \"b\": \"\303\251\\n\\\"q\\\"\", \"c\": []}", NULL},
	{"tojson_indent_nested", "{{ d|tojson(indent=4) }}", "{\"d\": {\"x\": [[1, {\"y\": []}], {}], \"s\": \"\342\200\250\\u0001\"}}", "{\n    \"x\": [\n        [\n            1,\n            {\n                \"y\": []\n            }\n        ],\n        {}\n    ],\n    \"s\": \"\342\200\250\\u0001\"\n}", NULL},
	{"filters1", "{{ '  x '|trim }}|{{ [1,2,3]|length }}|{{ 'h\303\251llo'|length }}|{{ [1,2]|join(',') }}|{{ [3,1]|first }}|{{ [3,1]|last }}|{{ nope|default('d') }}|{{ ''|default('e', true) }}|{{ 'abc'|capitalize }}|{{ 5|string }}|{{ '42'|int + 1 }}|{{ '1.5'|float }}|{{ 'ab'|list }}", "{}", "x|3|5|1,2|3|1|d|e|Abc|5|43|1.5|['a', 'b']", NULL},
	{"filters2", "{{ ['a','B','b','A']|unique|list }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'aaa'|replace('a','b',2) }}|{{ {'b':1,'A':2,'a':3}|dictsort }}|{{ {'x':1}|items|list }}|{{ 'a b  c'|wordcount }}|{{ -3|abs }}|{{ 2.567|round(2) }}|{{ [1,2,3]|sum }}|{{ [3,1,2]|sort }}|{{ [3,1,2]|max }}|{{ [1,2]|reverse|list }}", "{}", "['a', 'B']|ABC|abc|bba|[('A', 2), ('a', 3), ('b', 1)]|[('x', 1)]|3|3|2.57|6|[1, 2, 3]|3|[2, 1]", NULL},
	{"map_select", "{{ users|map(attribute='name')|join(',') }}|{{ users|selectattr('admin')|map(attribute='name')|list }}|{{ users|rejectattr('admin')|list|length }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('odd')|list }}|{{ users|selectattr('name', 'equalto', 'b')|list }}|{{ ['a','b']|map('upper')|list }}", "{\"users\": [{\"name\": \"a\", \"admin\": true}, {\"name\": \"b\", \"admin\": false}]}", "a,b|['a']|1|[1, 3]|[2, 4]|[{'name': 'b', 'admin': False}]|['A', 'B']", NULL},
	{"indent", "[{{ 'a\nb\n\nc'|indent(2) }}]|[{{ 'a\nb'|indent(2, true) }}]|[{{ 'a\n\nb'|indent(2, blank=true) }}]|[{{ 'x'|indent('--', first=true) }}]", "{}", "[a\n  b\n\n  c]|[  a\n  b]|[a\n  \n  b]|[--x]", NULL},
	{"raise_exception", "{{ raise_exception('bad ' ~ 1) }}", "{}", NULL, "TemplateError: bad 1"},
	{"strftime", "{{ strftime_now('%Y-%m-%d %H:%M %B %d') }}", "{}", "2026-01-15 10:30 January 15", NULL},
	{"undefined_attr_err", "{{ x.y.z }}", "{\"x\": {}}", NULL, "UndefinedError: 'dict object' has no attribute 'y'"},
	{"undefined_attr_ok", "{{ x.y }}|{{ x.y is defined }}|{{ x['y'] is defined }}", "{\"x\": {}}", "|False|False", NULL},
	{"none_attr", "{{ x.y }}", "{\"x\": null}", "", NULL},
	{"list_append_unsafe", "{% set l = [] %}{{ l.append(1) }}", "{}", NULL, "SecurityError: access to attribute 'append' of 'list' object is unsafe."},
	{"map_tojson_generator", "{{ [1]|map('string')|tojson }}", "{}", NULL, "TypeError: Object of type generator is not JSON serializable"},
	{"list_repr", "{{ [1, 'a', none, true, 1.5, {'k': 'v'}, ['x']] }}|{{ ('a',) }}|{{ (1, 2) }}|{{ \"it's\" }}|{{ ['it\\'s'] }}", "{}", "[1, 'a', None, True, 1.5, {'k': 'v'}, ['x']]|('a',)|(1, 2)|it's|[\"it's\"]", NULL},
	{"unknown_filter", "{% if false %}{{ x|from_json }}{% endif %}ok", "{}", "ok", NULL},
	{"unknown_filter_run", "{{ 'x'|from_json }}", "{}", NULL, "TemplateAssertionError: No filter named 'from_json'."},
	{"generation", "a{% generation %}b{{ 1 }}{% endgeneration %}c", "{}", "ab1c", NULL},
	{"dict_literal", "{% set d = {'a': 1, 'b': [1, 2]} %}{{ d.a }}{{ d['b'][1] }}{{ d|length }}", "{}", "122", NULL},
	{"string_escapes", "{{ 'a\\nb\\t\\u00e9\\x41' }}", "{}", "a\nb\t\303\251A", NULL},
	{"adjacent_strings", "{{ 'a' 'b' }}", "{}", "ab", NULL},
	{"messages_loop", "{% for m in messages %}<{{ m.role }}>{{ m['content'] | trim }}{% if not loop.last %}\n{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", \"content\": \"yo\"}], \"add_generation_prompt\": true}", "<user>hi<assistant>yo<assistant>", NULL},
	{"safe_markup", "{{ 'a<'|safe + '<b>' }}|{{ 'x' + '&'|safe }}|{{ ('<'|safe + 1|string) }}", "{}", "a<&lt;b&gt;|x&|<1", NULL},
	{"syntax_error", "{% if x %}unterminated", "{}", NULL, ""},
	{"syntax_error2", "{{ 1 + }}", "{}", NULL, ""},
	{"int_div_zero", "{{ 1 // 0 }}", "{}", NULL, "ZeroDivisionError: integer division or modulo by zero"},
	{"neg_index", "{{ messages[-1].role }}", "{\"messages\": [{\"role\": \"u\"}, {\"role\": \"a\"}]}", "a", NULL},
	{"is_not", "{{ x is not none }}{{ x is not defined }}", "{\"x\": 0}", "TrueFalse", NULL},
	{"nested_loops", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", "{}", "113 214 1|123 224 2|", NULL},
	{"loop_in_macro", "{% macro m(xs) %}{% for x in xs %}{{ x }}{% endfor %}{% endmacro %}{{ m([1,2]) }}{{ m('ab') }}", "{}", "12ab", NULL},
	{"macro_globals", "{% macro m() %}{{ g }}{% endmacro %}{% set g = 5 %}{{ m() }}", "{\"g\": 1}", "5", NULL},
	{"count_tests", "{{ 'abcabc'.count('bc') }}{{ [1,1,2].count(1) }}", "{}", "22", NULL},
	{"int_float_filters", "{{ 3.7|int }}{{ 'x'|int(7) }}{{ '0x1A'|int }}{{ 3|float }}", "{}", "3703.0", NULL},
	{"float_repr", "{{ 1/3 }} {{ 10/2 }} {{ 1e16 }} {{ 123456789012345.6 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}", "{}", "0.3333333333333333 5.0 1e+16 123456789012345.6 0.0001 1e-05 -0.0", NULL},
	{"title_mixed", "{{ 'hello-world foo_bar 3rd'.title() }}", "{}", "Hello-World Foo_Bar 3Rd", NULL},
	{"length_dict_none_err", "{{ none|length }}", "{}", NULL, "TypeError: object of type 'NoneType' has no len()"},
	{"tuple_set", "{% set a, b = [1, 2] %}{{ b }}{{ a }}", "{}", "21", NULL},
	{"utf8_index_slice", "{{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s|length }}|{{ s|list }}", "{\"s\": \"h\303\251llo w\303\266rld \342\202\254\"}", "h|\342\202\254|\303\251l|\342\202\254 dlr\303\266w oll\303\251h|13|['h', '\303\251', 'l', 'l', 'o', ' ', 'w', '\303\266', 'r', 'l', 'd', ' ', '\342\202\254']", NULL},
	{"raw_block", "{% raw %}{{ x }}{% endraw %}", "{}", "{{ x }}", NULL},
	{"loop_cycle", "{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}", "{}", "aba", NULL},
	{"recursive_loop", "{% for n in tree recursive %}{{ n.name }}({{ loop(n.kids) if n.kids }}){% endfor %}", "{\"tree\": [{\"name\": \"a\", \"kids\": [{\"name\": \"b\", \"kids\": []}]}]}", "a(b())", NULL},
	{"call_block", "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}", "{}", "[in]", NULL},
	{"unicode_case", "{{ '\303\251a'.upper() }}{{ '\303\211A'|lower }}", "{}", "\303\211A\303\251a", NULL},
	{"join_attr", "{{ users|join(', ', attribute='name') }}", "{\"users\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}", "a, b", NULL},
	{"dict_iter_items_filter", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}", "{\"d\": {\"z\": 1, \"a\": 2}}", "z1a2", NULL},
	{"set_ns_in_macro", "{% set ns = namespace(v=[]) %}{% macro add(x) %}{% set ns.v = ns.v + [x] %}{% endmacro %}{{ add(1) }}{{ add(2) }}{{ ns.v }}", "{}", "[1, 2]", NULL},
	{"tojson_ints_floats", "{{ [1, 1.0, 1e100, -0.5, 3.14159]|tojson }}", "{}", "[1, 1.0, 1e+100, -0.5, 3.14159]", NULL},
	{"tojson_unicode", "{{ '\303\274\342\202\254\360\237\230\200\\u0000\\x7f'|tojson }}", "{}", "\"\303\274\342\202\254\360\237\230\200\\u0000\177\"", NULL},
	{"string_compare_eq_types", "{{ 1 == '1' }}{{ none == false }}{{ [] == {} }}", "{}", "FalseFalseFalse", NULL},
	{"default_none", "{{ none|default('x') }}|{{ none|default('x', true) }}", "{}", "None|x", NULL},
	{"split_then_index", "{{ content.split('</think>')[-1].lstrip('\\n') }}", "{\"content\": \"<think>hm</think>\\n\\nanswer\"}", "answer", NULL},
	{"items_sorted_keys", "{{ d|dictsort(reverse=true) }}{{ d|dictsort(by='value') }}", "{\"d\": {\"a\": 3, \"b\": 1, \"c\": 2}}", "[('c', 2), ('b', 1), ('a', 3)][('b', 1), ('c', 2), ('a', 3)]", NULL},
	{"bool_arith", "{{ true + 1 }}{{ -true }}", "{}", "2-1", NULL},
	{"nested_macro_default_ref", "{% macro f(x, y=x) %}{{ y }}{% endmacro %}{{ f(3) }}", "{}", "3", NULL},
	{"whitespace_comment_trim", "a\n{#- c -#}\n b\n  {# x #}  \nc", "{}", "ab\n  \nc", NULL},
	{"lstrip_var", "a\n   {{ 'v' }}\n   {% if true %}x{% endif %}", "{}", "a\n   v\nx", NULL},
	{"unicode_case2", "{{ '\303\261and\303\272 \303\200\303\211\303\216 \303\277'.upper() }}|{{ '\316\221\316\222\316\223 \320\237\320\240\320\230\320\222\320\225\320\242 \320\201\320\266 \305\201\303\223D\305\271'.lower() }}|{{ '\303\251lan vital \303\261u'.title() }}|{{ '\303\251COLE'.capitalize() }}|{{ 'x3y z'.title() }}", "{}", "\303\221AND\303\232 \303\200\303\211\303\216 \305\270|\316\261\316\262\316\263 \320\277\321\200\320\270\320\262\320\265\321\202 \321\221\320\266 \305\202\303\263d\305\272|\303\211lan Vital \303\221u|\303\211cole|X3Y Z", NULL},
	{"call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}{% call(v, i) each(['a','b']) %}{{ i }}={{ v }};{% endcall %}", "{}", "1=a;2=b;", NULL},
	{"recursive_depth", "{% for n in t recursive %}{{ loop.depth }}{{ n.k }}[{% if n.c %}{{ loop(n.c) }}{% endif %}]{% endfor %}", "{\"t\": [{\"k\": \"a\", \"c\": [{\"k\": \"b\", \"c\": [{\"k\": \"c\"}]}]}, {\"k\": \"d\"}]}", "1a[2b[3c[]]]1d[]", NULL},
	{"macro_closure_loopvar", "{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}", "{}", "12", NULL},
	{"raw_ws", "a\n  {% raw %}\n{{ x }}\n  {%- endraw %}\nb", "{}", "a\n\n{{ x }}b", NULL},
	{"differential_fixes", "{{ 3|round }}|{{ 'v' % [1] }}|{{ true is odd }}|{{ 2.0 is even }}|{{ \"{'role': 'x'} a-b (c\"|title }}|{{ 2 * 'ab' }}|{{ 'x'|map(attribute='a')|list }}|{{ 'stra\303\237e'|upper }}", "{}", "3|v|True|True|{'role': 'x'} A-B (C|abab|[Undefined]|STRASSE", NULL},
	{"str_percent_unused", "{{ 'abc' % 1 }}", "{}", NULL, "TypeError: not all arguments converted during string formatting"},
	{"indent_non_string", "{{ [1]|indent }}", "{}", NULL, "AttributeError: 'list' object has no attribute 'splitlines'"},
	{"unhashable_in", "{{ {} in {} }}", "{}", NULL, "TypeError: unhashable type: 'dict'"},
};

/* compile + render; returns the status, *out the output (caller frees) */
static enum alice_status render(const char *tpl, size_t tlen, const char *ctx_json,
				const struct alice_jinja_options *opt, char **out, size_t *n,
				struct alice_error *err)
{
	struct alice_jinja *t = NULL;
	*out = NULL;
	enum alice_status st = alice_jinja_compile(tpl, tlen, &t, err);
	if (st != ALICE_OK)
		return st;
	struct json_object *ctx = json_tokener_parse(ctx_json);
	cr_assert(ctx, "bad test context %s", ctx_json);
	st = alice_jinja_render(t, ctx, opt, out, n, err);
	json_object_put(ctx);
	alice_jinja_free(t);
	return st;
}

Test(jinja, language_cases_match_jinja2)
{
	struct alice_jinja_options opt = {.now = NOW_2026_01_15_103000};
	for (size_t i = 0; i < sizeof lang_cases / sizeof lang_cases[0]; i++) {
		const struct lang_case *c = &lang_cases[i];
		struct alice_error err = {{0}};
		char *out;
		size_t n;
		enum alice_status st = render(c->tpl, strlen(c->tpl), c->ctx, &opt, &out, &n, &err);
		if (c->out) {
			cr_expect_eq(st, ALICE_OK, "%s: %s", c->name, err.msg);
			if (st == ALICE_OK)
				cr_expect_str_eq(out, c->out, "%s", c->name);
		} else {
			cr_expect_neq(st, ALICE_OK, "%s: rendered '%s' where jinja2 fails", c->name, out ? out : "");
			cr_expect(strstr(err.msg, c->err) != NULL, "%s: error '%s' lacks jinja2's '%s'", c->name,
				  err.msg, c->err);
		}
		free(out);
	}
}

Test(jinja, syntax_errors_name_the_line)
{
	struct alice_jinja *t;
	struct alice_error err = {{0}};
	const char *src = "line one\n{% if x %}\n{{ 1 + }}\n{% endif %}";
	cr_assert_eq(alice_jinja_compile(src, strlen(src), &t, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "line 3") != NULL, "%s", err.msg);
	src = "a\n\n{% for x in y %}";
	cr_assert_eq(alice_jinja_compile(src, strlen(src), &t, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "endfor") != NULL, "%s", err.msg);
	src = "{% frobnicate %}";
	cr_assert_eq(alice_jinja_compile(src, strlen(src), &t, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "frobnicate") != NULL, "%s", err.msg);
}

Test(jinja, runtime_errors_name_the_line)
{
	struct alice_error err = {{0}};
	char *out;
	const char *src = "a\nb\n{{ raise_exception('no system role') }}";
	cr_assert_eq(render(src, strlen(src), "{}", NULL, &out, NULL, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "TemplateError: no system role") != NULL, "%s", err.msg);
	cr_expect(strstr(err.msg, "line 3") != NULL, "%s", err.msg);
	cr_expect_null(out);
}

Test(jinja, limits_stop_runaway_templates)
{
	struct alice_error err = {{0}};
	char *out;
	/* step budget */
	const char *loop = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
	struct alice_jinja_options opt = {.now = -1, .max_steps = 1000000};
	cr_expect_eq(render(loop, strlen(loop), "{}", &opt, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
	cr_expect(strstr(err.msg, "step") != NULL, "%s", err.msg);
	/* unbounded recursion */
	const char *rec = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
	cr_expect_eq(render(rec, strlen(rec), "{}", NULL, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
	/* output size */
	const char *big = "{% for a in range(100000) %}0123456789{% endfor %}";
	opt = (struct alice_jinja_options){.now = -1, .max_output = 4096};
	cr_expect_eq(render(big, strlen(big), "{}", &opt, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
	/* memory */
	const char *mem = "{% set ns = namespace(s='x') %}{% for a in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}";
	opt = (struct alice_jinja_options){.now = -1, .max_memory = 1 << 20};
	cr_expect_eq(render(mem, strlen(mem), "{}", &opt, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
	/* deep nesting in the source */
	char deep[4096];
	size_t k = 0;
	k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
	for (int i = 0; i < 1000; i++)
		deep[k++] = '(';
	deep[k] = 0;
	struct alice_jinja *t;
	cr_expect_eq(alice_jinja_compile(deep, k, &t, &err), ALICE_ERR_INVALID, "%s", err.msg);
	/* long operator and filter chains parse flat but evaluate recursively */
	size_t cap = 600000;
	char *chain = malloc(cap);
	cr_assert(chain);
	k = (size_t)snprintf(chain, cap, "{{ 1");
	for (int i = 0; i < 100000; i++)
		k += (size_t)snprintf(chain + k, cap - k, "+1");
	k += (size_t)snprintf(chain + k, cap - k, " }}{{ 'a'");
	for (int i = 0; i < 50000; i++)
		k += (size_t)snprintf(chain + k, cap - k, "|e");
	k += (size_t)snprintf(chain + k, cap - k, " }}");
	cr_expect_eq(render(chain, k, "{}", NULL, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
	free(chain);
	/* values nested a million deep, then printed, compared and serialised */
	const char *nest = "{% set ns = namespace(x=[]) %}{% for i in range(1000000) %}{% set ns.x = [ns.x] %}{% endfor %}"
			   "{{ ns.x == ns.x }}{{ ns.x }}";
	cr_expect_eq(render(nest, strlen(nest), "{}", NULL, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
	const char *nest2 = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
			    "{{ ns.x|tojson }}";
	cr_expect_eq(render(nest2, strlen(nest2), "{}", NULL, &out, NULL, &err), ALICE_ERR_RANGE, "%s", err.msg);
}

Test(jinja, hostile_bytes_are_errors_not_crashes)
{
	static const char *const srcs[] = {
		"{{", "{%", "{#", "{{ 'abc", "{% for %}", "{% set %}", "{{ a[ }}", "{{ a.1.b }}", "{{ (((( }}",
		"{% macro m( %}", "{{ x|map(attribute='a')|tojson }}", "{{ [1,2][1:2:0] }}", "{{ 'x' * -5 }}",
		"{{ '%' % 1 }}", "{{ '%(a)s' % 1 }}", "{{ 1 < 'a' }}", "{{ {}['a'].b }}", "{% endif %}",
		"{{ '\\u12' }}", "{% for x in 5 %}{% endfor %}", "{{ range(1, 2, 0) }}", "{{ none() }}",
	};
	for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
		struct alice_error err = {{0}};
		char *out = NULL;
		render(srcs[i], strlen(srcs[i]), "{\"x\": [1]}", NULL, &out, NULL, &err);
		free(out);
	}
	/* embedded NUL bytes are text like any other */
	struct alice_error err = {{0}};
	char *out;
	size_t n;
	cr_assert_eq(render("a\0b{{ 1 }}", 10, "{}", NULL, &out, &n, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(n, 4);
	cr_expect(memcmp(out, "a\0b1", 4) == 0);
	free(out);
}

Test(jinja, template_renders_concurrently_reusable)
{
	/* a compiled template is immutable: render it twice, same bytes */
	const char *src = "{% for m in messages %}{{ m.content }}{% endfor %}";
	struct alice_jinja *t;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_jinja_compile(src, strlen(src), &t, &err), ALICE_OK, "%s", err.msg);
	struct json_object *ctx = json_tokener_parse("{\"messages\":[{\"content\":\"a\"},{\"content\":\"b\"}]}");
	for (int i = 0; i < 2; i++) {
		char *out;
		cr_assert_eq(alice_jinja_render(t, ctx, NULL, &out, NULL, &err), ALICE_OK, "%s", err.msg);
		cr_expect_str_eq(out, "ab");
		free(out);
	}
	json_object_put(ctx);
	alice_jinja_free(t);
}

/* ---- the goldens ---- */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

Test(jinja, real_templates_match_their_goldens, .timeout = 600)
{
	const char *dir = alice_test_templates_dir();
	char gdir[4096];
	snprintf(gdir, sizeof gdir, "%s/goldens", dir);
	DIR *d = opendir(gdir);
	cr_assert(d, "no goldens at %s (set ALICE_TEMPLATES_DIR)", gdir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (len < 5 || (strcmp(e->d_name + len - 4, ".txt") && strcmp(e->d_name + len - 4, ".err")))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 512;
			names = realloc(names, cap * sizeof *names);
			cr_assert(names);
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_str);
	cr_assert_gt(n, 0, "no goldens in %s", gdir);
	struct alice_jinja_options opt = {.now = NOW_2026_01_15_103000};
	size_t pass = 0;
	for (size_t i = 0; i < n; i++) {
		char stem[1024], tpl_name[1024], ctx_name[1024];
		size_t len = strlen(names[i]);
		bool want_err = !strcmp(names[i] + len - 4, ".err");
		snprintf(stem, sizeof stem, "%.*s", (int)(len - 4), names[i]);
		char *sep = strstr(stem, "__");
		cr_assert(sep, "golden %s is not <template>__<context>", names[i]);
		snprintf(tpl_name, sizeof tpl_name, "%.*s.jinja", (int)(sep - stem), stem);
		snprintf(ctx_name, sizeof ctx_name, "contexts/%s.json", sep + 2);
		size_t tlen;
		char *src = alice_test_read_file(alice_test_path(dir, tpl_name), &tlen);
		char *ctx = alice_test_read_file(alice_test_path(dir, ctx_name), NULL);
		char *golden = alice_test_read_file(alice_test_path(gdir, names[i]), NULL);
		struct alice_error err = {{0}};
		char *out = NULL;
		size_t on = 0;
		enum alice_status st = render(src, tlen, ctx, &opt, &out, &on, &err);
		bool ok;
		if (want_err) {
			char *nl = strchr(golden, '\n');
			if (nl)
				*nl = 0;
			ok = st != ALICE_OK && strstr(err.msg, golden) != NULL;
			cr_expect(ok, "%s: want the error '%s', got status %d '%s'", stem, golden, st, err.msg);
		} else {
			ok = st == ALICE_OK && on == strlen(golden) && memcmp(out, golden, on) == 0;
			cr_expect(st == ALICE_OK, "%s: %s", stem, err.msg);
			if (st == ALICE_OK)
				cr_expect(ok, "%s: output differs from the golden (%zu vs %zu bytes)", stem, on,
					  strlen(golden));
		}
		pass += ok;
		free(out);
		free(src);
		free(ctx);
		free(golden);
		free(names[i]);
	}
	free(names);
	cr_log_info("jinja goldens: %zu of %zu match", pass, n);
	cr_assert_eq(pass, n, "%zu of %zu goldens match", pass, n);
}
