/* test_chat_template.c — core/chat_template.c: Jinja or built-in templates,
 * the render context (messages, kwargs, bos/eos), BOS stripping, prefill,
 * typed content, errors; and every fixture GGUF's own template against
 * llama.cpp's chat prompt text (refs: `chat_jinja` where present, else `chat`). */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/chat_template.h"
#include "alice/gguf.h"

static const struct alice_chat_template_params P = {.bos_text = "<s>", .eos_text = "</s>", .arch = "llama"};

static const char KW_TMPL[] =
	"{{ bos_token }}{% if greeting is defined %}[{{ greeting }}]{% endif %}"
	"{% for m in messages %}{% if m.role == 'user' and loop.index0 > 0 and messages[loop.index0 - 1].role == 'user' %}"
	"{{ raise_exception('roles must alternate') }}{% endif %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
	"{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token if false else '' }}";

static struct alice_chat_template *jinja(const char *src)
{
	struct alice_chat_template *t = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_chat_template_jinja(src, strlen(src), ALICE_CHAT_TEMPLATE_FILE, &P, &t, &err), ALICE_OK,
		     "%s", err.msg);
	return t;
}

static char *render_ok(const struct alice_chat_template *t, const struct alice_chat_template_input *in)
{
	char *out = NULL;
	size_t n = 0;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_chat_template_render(t, in, &out, &n, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(strlen(out), n);
	return out;
}

Test(chat_template, jinja_context_kwargs_bos)
{
	struct alice_chat_template *t = jinja(KW_TMPL);
	cr_expect_str_eq(alice_chat_template_name(t), "file");
	cr_expect_eq(alice_chat_template_kind(t), ALICE_CHAT_TEMPLATE_FILE);
	cr_expect(!alice_chat_template_typed_content(t));
	struct alice_chat_message m[] = {{"user", "Hi"}};
	struct alice_chat_template_input in = {.msgs = m, .n = 1};
	char *out = render_ok(t, &in);
	cr_expect_str_eq(out, "<s><user>Hi</user><assistant>");
	free(out);
	in.strip_leading_bos = true;
	struct json_object *kw = json_tokener_parse("{\"greeting\": \"hello\"}");
	in.kwargs = kw;
	out = render_ok(t, &in);
	cr_expect_str_eq(out, "[hello]<user>Hi</user><assistant>");
	free(out);
	json_object_put(kw);
	alice_chat_template_free(t);
}

Test(chat_template, raise_exception_is_invalid)
{
	struct alice_chat_template *t = jinja(KW_TMPL);
	struct alice_chat_message m[] = {{"user", "a"}, {"user", "b"}};
	struct alice_chat_template_input in = {.msgs = m, .n = 2};
	char *out = NULL;
	struct alice_error err = {{0}};
	cr_expect_eq(alice_chat_template_render(t, &in, &out, NULL, &err), ALICE_ERR_INVALID);
	cr_expect_null(out);
	cr_expect(strstr(err.msg, "roles must alternate"), "%s", err.msg);
	alice_chat_template_free(t);
}

Test(chat_template, prefill)
{
	struct alice_chat_template *t = jinja(KW_TMPL);
	struct alice_chat_message m[] = {{"user", "Hi"}, {"assistant", "Once upon"}};
	struct alice_chat_template_input in = {.msgs = m, .n = 2, .strip_leading_bos = true};
	char *out = render_ok(t, &in);
	cr_expect_str_eq(out, "<user>Hi</user><assistant>Once upon");
	free(out);
	m[1].content = " Once upon \n"; /* the template keeps the spacing: kept */
	out = render_ok(t, &in);
	cr_expect_str_eq(out, "<user>Hi</user><assistant> Once upon \n");
	free(out);
	m[1].content = " \n"; /* empty: the generation prompt */
	out = render_ok(t, &in);
	cr_expect_str_eq(out, "<user>Hi</user><assistant>");
	free(out);
	alice_chat_template_free(t);
	/* a template that trims: the cut is after the stripped text */
	t = jinja("{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}<end>{% endfor %}");
	m[1].content = "Once upon  ";
	out = render_ok(t, &in);
	cr_expect_str_eq(out, "<user>Hi<end><assistant>Once upon");
	free(out);
	alice_chat_template_free(t);
	/* a template that drops the final message: an error, not a wrong prompt */
	t = jinja("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}");
	struct alice_error err = {{0}};
	char *bad = NULL;
	cr_expect_eq(alice_chat_template_render(t, &in, &bad, NULL, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "prefill"), "%s", err.msg);
	alice_chat_template_free(t);
}

Test(chat_template, typed_content)
{
	struct alice_chat_template *t =
		jinja("{% for m in messages %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endfor %}");
	cr_expect(alice_chat_template_typed_content(t));
	struct json_object *parts = json_tokener_parse("[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]");
	struct alice_chat_message m[] = {{"system", "S"}, {"user", "ab"}};
	struct json_object *pv[] = {NULL, parts};
	struct alice_chat_template_input in = {.msgs = m, .n = 2, .parts = pv};
	char *out = render_ok(t, &in);
	cr_expect_str_eq(out, "[S][a][b]"); /* strings wrapped, parts as given */
	free(out);
	json_object_put(parts);
	alice_chat_template_free(t);
	t = jinja("{% for m in messages %}{{ m.content }}{% endfor %}"); /* reads strings */
	cr_expect(!alice_chat_template_typed_content(t));
	alice_chat_template_free(t);
}

Test(chat_template, builtin)
{
	struct alice_chat_template *t = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_chat_template_builtin(ALICE_CHAT_FORMAT_CHATML, &P, &t, &err), ALICE_OK);
	cr_expect_str_eq(alice_chat_template_name(t), "chatml");
	struct alice_chat_message m[] = {{"user", "Hi"}, {"assistant", "Once"}};
	struct alice_chat_template_input in = {.msgs = m, .n = 2};
	char *out = render_ok(t, &in);
	cr_expect_str_eq(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce");
	free(out);
	struct json_object *kw = json_tokener_parse("{\"enable_thinking\": false}");
	in.kwargs = kw;
	cr_expect_eq(alice_chat_template_render(t, &in, &out, NULL, &err), ALICE_ERR_UNSUPPORTED);
	json_object_put(kw);
	alice_chat_template_free(t);
	/* no GGUF: the architecture's built-in family */
	cr_assert_eq(alice_chat_template_from_gguf(NULL, &P, &t, &err), ALICE_OK);
	cr_expect_eq(alice_chat_template_kind(t), ALICE_CHAT_TEMPLATE_BUILTIN);
	cr_expect_str_eq(err.msg, "");
	alice_chat_template_free(t);
}

Test(chat_template, compile_error)
{
	struct alice_chat_template *t = NULL;
	struct alice_error err = {{0}};
	const char *src = "{% for m in messages %}";
	cr_expect_eq(alice_chat_template_jinja(src, strlen(src), ALICE_CHAT_TEMPLATE_FILE, &P, &t, &err),
		     ALICE_ERR_INVALID);
	cr_expect_null(t);
	cr_expect(strstr(err.msg, "line 1"), "%s", err.msg);
}

/* The token text of a special id in a GGUF vocabulary, or "". */
static char *vocab_text(const struct alice_gguf *g, const char *key)
{
	uint32_t id = 0;
	struct alice_gguf_arr toks;
	struct alice_gguf_str s = {"", 0};
	if (alice_gguf_get_u32(g, key, &id, NULL) == ALICE_OK &&
	    alice_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, NULL) == ALICE_OK)
		alice_gguf_arr_str(&toks, id, &s);
	return strndup(s.ptr, s.len);
}

Test(chat_template, fixture_templates_match_llama_cpp)
{
	static const char *const models[] = {"llama3-bpe-F16", "qwen3-BF16", "qwen35-F16", "gemma2-F32",
					     "llama2-spm-F16", "qwen2-Q4_K_M", "llama-spm-Q8_0"};
	for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/refs/%s.json", ALICE_FIXTURES_DIR, models[k]);
		struct json_object *root = json_object_from_file(path), *prompts, *model, *add_bos;
		cr_assert(root, "fixtures missing: %s", path);
		cr_assert(json_object_object_get_ex(root, "prompts", &prompts));
		cr_assert(json_object_object_get_ex(root, "model", &model));
		cr_assert(json_object_object_get_ex(model, "add_bos", &add_bos));
		struct json_object *chat = NULL, *want = NULL, *msgs, *text;
		for (size_t i = 0; i < json_object_array_length(prompts); i++) {
			struct json_object *p = json_object_array_get_idx(prompts, i), *id;
			cr_assert(json_object_object_get_ex(p, "id", &id));
			if (!strcmp(json_object_get_string(id), "chat"))
				chat = p;
			if (!strcmp(json_object_get_string(id), "chat_jinja"))
				want = p;
		}
		cr_assert(chat);
		if (!want)
			want = chat;
		snprintf(path, sizeof(path), "%s/models/%s.gguf", ALICE_FIXTURES_DIR, models[k]);
		struct alice_gguf *g = NULL;
		struct alice_error err = {{0}};
		cr_assert_eq(alice_gguf_open(path, &g, &err), ALICE_OK, "%s", err.msg);
		char *bos = vocab_text(g, "tokenizer.ggml.bos_token_id"), *eos = vocab_text(g, "tokenizer.ggml.eos_token_id");
		struct alice_chat_template_params p = {.bos_text = bos, .eos_text = eos};
		struct alice_chat_template *t = NULL;
		cr_assert_eq(alice_chat_template_from_gguf(g, &p, &t, &err), ALICE_OK);
		cr_expect_str_eq(err.msg, "", "%s: %s", models[k], err.msg);
		cr_expect_eq(alice_chat_template_kind(t), ALICE_CHAT_TEMPLATE_GGUF, "%s", models[k]);
		cr_assert(json_object_object_get_ex(chat, "messages", &msgs));
		size_t n = json_object_array_length(msgs);
		struct alice_chat_message m[4];
		cr_assert(n <= 4);
		for (size_t i = 0; i < n; i++) {
			struct json_object *o = json_object_array_get_idx(msgs, i), *r, *c;
			cr_assert(json_object_object_get_ex(o, "role", &r) && json_object_object_get_ex(o, "content", &c));
			m[i].role = json_object_get_string(r);
			m[i].content = json_object_get_string(c);
		}
		struct alice_chat_template_input in = {.msgs = m, .n = n,
						       .strip_leading_bos = json_object_get_boolean(add_bos)};
		char *out = render_ok(t, &in);
		cr_assert(json_object_object_get_ex(want, "text", &text));
		cr_expect_str_eq(out, json_object_get_string(text), "%s: the GGUF template renders differently", models[k]);
		free(out);
		alice_chat_template_free(t);
		free(bos);
		free(eos);
		alice_gguf_close(g);
		json_object_put(root);
	}
}
