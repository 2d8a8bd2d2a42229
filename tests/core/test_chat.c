/* test_chat.c — chat template detection and rendering.
 * Goldens: tests/data/chat/<family>__<case>.txt, rendered by the official
 * Jinja templates (scripts/gen_chat_goldens.py) from tests/data/chat/cases.json.
 * Fixture refs: the "chat" prompt text llama.cpp produced for every model. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/chat.h"
#include "alice/gguf.h"
#include "support/files.h"

#define CHAT_DATA ALICE_SOURCE_DIR "/tests/data/chat"

/* messages (json array of {role, content}) -> struct array borrowing json strings */
static struct alice_chat_message *json_msgs(struct json_object *arr, size_t *n)
{
	*n = json_object_array_length(arr);
	struct alice_chat_message *m = calloc(*n ? *n : 1, sizeof(*m));
	cr_assert(m);
	for (size_t i = 0; i < *n; i++) {
		struct json_object *o = json_object_array_get_idx(arr, i), *r, *c;
		cr_assert(json_object_object_get_ex(o, "role", &r));
		cr_assert(json_object_object_get_ex(o, "content", &c));
		m[i].role = json_object_get_string(r);
		m[i].content = json_object_get_string(c);
	}
	return m;
}

static char *render(enum alice_chat_format f, const struct alice_chat_message *m, size_t n, bool gen,
		    const struct alice_chat_render_opts *opts)
{
	struct alice_error err = {{0}};
	char *out = NULL;
	enum alice_status st = alice_chat_render(f, m, n, gen, opts, &out, NULL, &err);
	cr_assert_eq(st, ALICE_OK, "render %s: %s", alice_chat_format_name(f), err.msg);
	cr_assert(out);
	return out;
}

Test(chat, goldens_match_official_templates)
{
	static const char *const families[] = {"chatml", "qwen2", "qwen3", "qwen3.5",
					       "llama3", "llama2", "mistral", "gemma"};
	struct json_object *root = json_object_from_file(CHAT_DATA "/cases.json"), *cases;
	cr_assert(root, "cannot read " CHAT_DATA "/cases.json");
	cr_assert(json_object_object_get_ex(root, "cases", &cases));
	size_t ncases = json_object_array_length(cases), checked = 0;
	cr_assert_gt(ncases, 5);
	for (size_t fi = 0; fi < sizeof(families) / sizeof(families[0]); fi++) {
		enum alice_chat_format f;
		struct alice_error err = {{0}};
		cr_assert_eq(alice_chat_format_from_name(families[fi], &f, &err), ALICE_OK, "%s", err.msg);
		for (size_t ci = 0; ci < ncases; ci++) {
			struct json_object *cs = json_object_array_get_idx(cases, ci), *id, *msgs, *gen;
			cr_assert(json_object_object_get_ex(cs, "id", &id));
			cr_assert(json_object_object_get_ex(cs, "messages", &msgs));
			cr_assert(json_object_object_get_ex(cs, "add_generation_prompt", &gen));
			char path[512];
			snprintf(path, sizeof(path), CHAT_DATA "/%s__%s.txt", families[fi],
				 json_object_get_string(id));
			char *want = alice_test_read_file(path, NULL); /* the golden */
			size_t n;
			struct alice_chat_message *m = json_msgs(msgs, &n);
			char *got = render(f, m, n, json_object_get_boolean(gen), NULL);
			cr_expect_str_eq(got, want, "%s: got\n[%s]\nwant\n[%s]", path, got, want);
			checked++;
			free(got);
			free(m);
			free(want);
		}
	}
	cr_assert_eq(checked, ncases * 8);
	json_object_put(root);
}

static const char *expected_family(const char *model_file)
{
	static const struct { const char *prefix; const char *family; } t[] = {
		{"qwen35-", "qwen3.5"}, {"qwen3-", "qwen3"},     {"qwen2-", "qwen2"},
		{"llama3-", "llama3"},  {"llama2-", "llama2"},   {"llama-spm-", "mistral"},
		{"gemma2-", "gemma"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strncmp(model_file, t[i].prefix, strlen(t[i].prefix)) == 0)
			return t[i].family;
	return NULL;
}

/* Every fixture ref's "chat" text, byte for byte, through detection from the
 * stored template. Where the ref has "chat_jinja" (qwen3.5), that Jinja text
 * must be ours plus the "<think>\n" we deliberately do not emit. */
Test(chat, fixture_refs_chat_text)
{
	DIR *d = opendir(ALICE_FIXTURES_DIR "/refs");
	cr_assert(d, "fixtures missing: %s/refs", ALICE_FIXTURES_DIR);
	struct dirent *e;
	int files = 0, matched = 0, jinja = 0;
	while ((e = readdir(d))) {
		size_t ln = strlen(e->d_name);
		if (ln < 5 || strcmp(e->d_name + ln - 5, ".json") != 0)
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/refs/%s", ALICE_FIXTURES_DIR, e->d_name);
		struct json_object *root = json_object_from_file(path), *model, *tmpl, *add_bos, *prompts;
		cr_assert(root, "cannot parse %s", path);
		cr_assert(json_object_object_get_ex(root, "model", &model));
		cr_assert(json_object_object_get_ex(model, "chat_template", &tmpl));
		cr_assert(json_object_object_get_ex(model, "add_bos", &add_bos));
		cr_assert(json_object_object_get_ex(root, "prompts", &prompts));
		/* the template stored in the GGUF is the one the ref records */
		struct json_object *mfile;
		cr_assert(json_object_object_get_ex(root, "model_file", &mfile));
		char gpath[1024];
		snprintf(gpath, sizeof(gpath), "%s/models/%s", ALICE_FIXTURES_DIR, json_object_get_string(mfile));
		struct alice_gguf *g = NULL;
		struct alice_error gerr = {{0}};
		cr_assert_eq(alice_gguf_open(gpath, &g, &gerr), ALICE_OK, "%s", gerr.msg);
		struct alice_gguf_str gt, ga;
		cr_assert_eq(alice_gguf_get_str(g, "tokenizer.chat_template", &gt, &gerr), ALICE_OK, "%s", gerr.msg);
		cr_assert_eq(alice_gguf_get_str(g, "general.architecture", &ga, &gerr), ALICE_OK, "%s", gerr.msg);
		char *gtmpl = strndup(gt.ptr, gt.len), *garch = strndup(ga.ptr, ga.len);
		cr_assert(gtmpl && garch);
		cr_expect_str_eq(gtmpl, json_object_get_string(tmpl), "%s: GGUF template differs from the ref",
				 e->d_name);
		enum alice_chat_format f, fg;
		cr_assert_eq(alice_chat_detect(gtmpl, garch, &f), ALICE_OK);
		/* the accessor the server uses reads the same template from the GGUF */
		cr_assert_eq(alice_chat_detect_gguf(g, garch, &fg), ALICE_OK);
		cr_expect_eq(fg, f, "%s: alice_chat_detect_gguf disagrees", e->d_name);
		free(gtmpl);
		free(garch);
		alice_gguf_close(g);
		const char *fam = expected_family(e->d_name);
		cr_assert(fam, "no expected family for %s", e->d_name);
		cr_expect_str_eq(alice_chat_format_name(f), fam, "%s detected as %s", e->d_name,
				 alice_chat_format_name(f));
		struct alice_chat_render_opts opts = {.add_leading_bos = !json_object_get_boolean(add_bos)};
		char *chat_text = NULL;
		files++;
		for (size_t i = 0; i < json_object_array_length(prompts); i++) {
			struct json_object *p = json_object_array_get_idx(prompts, i), *id, *kind, *text,
					   *msgs, *ass;
			cr_assert(json_object_object_get_ex(p, "id", &id));
			cr_assert(json_object_object_get_ex(p, "kind", &kind));
			cr_assert(json_object_object_get_ex(p, "text", &text));
			const char *pid = json_object_get_string(id);
			if (strcmp(pid, "chat") == 0) {
				cr_assert_str_eq(json_object_get_string(kind), "chat");
				cr_assert(json_object_object_get_ex(p, "messages", &msgs));
				cr_assert(json_object_object_get_ex(p, "add_assistant_prompt", &ass));
				size_t n;
				struct alice_chat_message *m = json_msgs(msgs, &n);
				chat_text = render(f, m, n, json_object_get_boolean(ass), &opts);
				free(m);
				const char *want = json_object_get_string(text);
				cr_expect_str_eq(chat_text, want, "%s: got [%s] want [%s]", e->d_name,
						 chat_text, want);
				if (strcmp(chat_text, want) == 0)
					matched++;
			}
		}
		cr_assert(chat_text, "%s has no chat prompt", e->d_name);
		for (size_t i = 0; i < json_object_array_length(prompts); i++) {
			struct json_object *p = json_object_array_get_idx(prompts, i), *id, *text;
			cr_assert(json_object_object_get_ex(p, "id", &id));
			if (strcmp(json_object_get_string(id), "chat_jinja") != 0)
				continue;
			cr_assert(json_object_object_get_ex(p, "text", &text));
			cr_expect_eq(f, ALICE_CHAT_FORMAT_QWEN35, "%s: unexpected chat_jinja", e->d_name);
			size_t ln2 = strlen(chat_text);
			char *with_think = malloc(ln2 + 9);
			cr_assert(with_think);
			memcpy(with_think, chat_text, ln2);
			memcpy(with_think + ln2, "<think>\n", 9);
			cr_expect_str_eq(json_object_get_string(text), with_think);
			free(with_think);
			jinja++;
		}
		free(chat_text);
		json_object_put(root);
	}
	closedir(d);
	cr_assert_eq(files, 14, "expected 14 ref files, found %d", files);
	cr_assert_eq(matched, files, "%d of %d chat texts match", matched, files);
	cr_assert_eq(jinja, 1);
}

Test(chat, detect_by_arch_and_fallback)
{
	enum alice_chat_format f;
	cr_assert_eq(alice_chat_detect(NULL, "qwen2", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_CHATML);
	cr_assert_eq(alice_chat_detect("", "qwen3", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_QWEN3);
	cr_assert_eq(alice_chat_detect(NULL, "qwen35", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_QWEN35);
	cr_assert_eq(alice_chat_detect(NULL, "gemma2", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_GEMMA);
	cr_assert_eq(alice_chat_detect(NULL, "llama", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_GENERIC);
	cr_assert_eq(alice_chat_detect(NULL, NULL, &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_GENERIC);
	/* an unrecognised template falls back on the architecture */
	cr_assert_eq(alice_chat_detect("{{ messages }}", "gemma", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_GEMMA);
	cr_assert_eq(alice_chat_detect("{% for m in messages %}<|im_start|>{% endfor %}", "gemma", &f),
		     ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_CHATML);
	cr_expect_eq(alice_chat_detect(NULL, NULL, NULL), ALICE_ERR_INVALID);
	/* no GGUF: the architecture alone */
	cr_assert_eq(alice_chat_detect_gguf(NULL, "gemma2", &f), ALICE_OK);
	cr_expect_eq(f, ALICE_CHAT_FORMAT_GEMMA);
}

Test(chat, names_round_trip_and_unknown_name_lists_valid_ones)
{
	for (int i = 0; i < ALICE_CHAT_FORMAT_COUNT; i++) {
		enum alice_chat_format f;
		struct alice_error err = {{0}};
		const char *name = alice_chat_format_name((enum alice_chat_format)i);
		cr_assert_eq(alice_chat_format_from_name(name, &f, &err), ALICE_OK, "%s", name);
		cr_expect_eq((int)f, i);
		cr_expect(strstr(alice_chat_format_names(), name), "%s not listed", name);
	}
	enum alice_chat_format f;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_chat_format_from_name("vicuna", &f, &err), ALICE_ERR_NOT_FOUND);
	cr_expect(strstr(err.msg, "vicuna"), "%s", err.msg);
	cr_expect(strstr(err.msg, "chatml") && strstr(err.msg, "gemma") && strstr(err.msg, "llama3"),
		  "%s", err.msg);
	cr_expect_str_eq(alice_chat_format_name(ALICE_CHAT_FORMAT_COUNT), "unknown");
}

Test(chat, other_roles_rejected)
{
	struct alice_chat_message m[] = {{"user", "hi"}, {"tool", "{}"}};
	for (int i = 0; i < ALICE_CHAT_FORMAT_COUNT; i++) {
		struct alice_error err = {{0}};
		char *out = (char *)1;
		cr_assert_eq(alice_chat_render((enum alice_chat_format)i, m, 2, true, NULL, &out, NULL, &err),
			     ALICE_ERR_INVALID);
		cr_expect_null(out);
		cr_expect(strstr(err.msg, "messages[1]") && strstr(err.msg, "tool"), "%s", err.msg);
	}
	struct alice_chat_message nr[] = {{NULL, "x"}};
	char *out = NULL;
	struct alice_error err = {{0}};
	cr_expect_eq(alice_chat_render(ALICE_CHAT_FORMAT_CHATML, nr, 1, true, NULL, &out, NULL, &err),
		     ALICE_ERR_INVALID);
}

Test(chat, leading_bos_only_when_asked)
{
	struct alice_chat_message m[] = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
	struct alice_chat_render_opts bos = {.add_leading_bos = true};
	char *t = render(ALICE_CHAT_FORMAT_LLAMA3, m, 1, true, &bos);
	cr_expect_str_eq(t, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>"
			    "<|start_header_id|>assistant<|end_header_id|>\n\n");
	free(t);
	/* Llama 2: the per-turn <s> inside the history stays either way */
	t = render(ALICE_CHAT_FORMAT_LLAMA2, m, 3, true, NULL);
	cr_expect_str_eq(t, "[INST] a [/INST] b </s><s>[INST] c [/INST]");
	free(t);
	t = render(ALICE_CHAT_FORMAT_LLAMA2, m, 3, true, &bos);
	cr_expect_str_eq(t, "<s>[INST] a [/INST] b </s><s>[INST] c [/INST]");
	free(t);
	t = render(ALICE_CHAT_FORMAT_GEMMA, m, 1, true, &bos);
	cr_expect_str_eq(t, "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\n");
	free(t);
	struct alice_chat_render_opts custom = {.add_leading_bos = true, .bos_text = "<B>", .eos_text = "<E>"};
	t = render(ALICE_CHAT_FORMAT_MISTRAL, m, 3, true, &custom);
	cr_expect_str_eq(t, "<B>[INST] a [/INST]b<E>[INST] c [/INST]");
	free(t);
	/* ChatML has no BOS in its template */
	t = render(ALICE_CHAT_FORMAT_CHATML, m, 1, false, &bos);
	cr_expect_str_eq(t, "<|im_start|>user\na<|im_end|>\n");
	free(t);
}

Test(chat, system_folding_edge_cases)
{
	struct alice_chat_message two_sys[] = {{"system", " A "}, {"system", "B"}, {"user", "u"}};
	char *t = render(ALICE_CHAT_FORMAT_GEMMA, two_sys, 3, true, NULL);
	cr_expect_str_eq(t, "<start_of_turn>user\nA\n\nB\n\nu<end_of_turn>\n<start_of_turn>model\n");
	free(t);
	t = render(ALICE_CHAT_FORMAT_MISTRAL, two_sys, 3, true, NULL);
	cr_expect_str_eq(t, "[INST]  A \nB\nu [/INST]");
	free(t);
	t = render(ALICE_CHAT_FORMAT_LLAMA2, two_sys, 3, true, NULL);
	cr_expect_str_eq(t, "[INST] <<SYS>>\n A \nB\n<</SYS>>\n\nu [/INST]");
	free(t);
	struct alice_chat_message only_sys[] = {{"system", "S"}};
	t = render(ALICE_CHAT_FORMAT_GEMMA, only_sys, 1, true, NULL);
	cr_expect_str_eq(t, "<start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\n");
	free(t);
	t = render(ALICE_CHAT_FORMAT_MISTRAL, only_sys, 1, true, NULL);
	cr_expect_str_eq(t, "[INST] S [/INST]");
	free(t);
	t = render(ALICE_CHAT_FORMAT_LLAMA2, only_sys, 1, true, NULL);
	cr_expect_str_eq(t, "[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
	free(t);
	/* qwen3.5 follows its template's errors */
	struct alice_error err = {{0}};
	char *out = NULL;
	cr_expect_eq(alice_chat_render(ALICE_CHAT_FORMAT_QWEN35, only_sys, 1, true, NULL, &out, NULL, &err),
		     ALICE_ERR_INVALID);
	struct alice_chat_message late_sys[] = {{"user", "u"}, {"system", "S"}};
	cr_expect_eq(alice_chat_render(ALICE_CHAT_FORMAT_QWEN35, late_sys, 2, true, NULL, &out, NULL, &err),
		     ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "messages[1]"), "%s", err.msg);
	/* empty list and NULL content */
	t = render(ALICE_CHAT_FORMAT_CHATML, NULL, 0, true, NULL);
	cr_expect_str_eq(t, "<|im_start|>assistant\n");
	free(t);
	struct alice_chat_message nul[] = {{"user", NULL}};
	size_t len = 99;
	cr_assert_eq(alice_chat_render(ALICE_CHAT_FORMAT_LLAMA3, nul, 1, false, NULL, &out, &len, &err),
		     ALICE_OK);
	cr_expect_str_eq(out, "<|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>");
	cr_expect_eq(len, strlen(out));
	free(out);
}

Test(chat, stop_strings)
{
	cr_expect_str_eq(alice_chat_stop_strings(ALICE_CHAT_FORMAT_QWEN3)[0], "<|im_end|>");
	cr_expect_str_eq(alice_chat_stop_strings(ALICE_CHAT_FORMAT_LLAMA3)[0], "<|eot_id|>");
	cr_expect_str_eq(alice_chat_stop_strings(ALICE_CHAT_FORMAT_GEMMA)[0], "<end_of_turn>");
	cr_expect_str_eq(alice_chat_stop_strings(ALICE_CHAT_FORMAT_MISTRAL)[0], "</s>");
	cr_expect_null(alice_chat_stop_strings(ALICE_CHAT_FORMAT_COUNT)[0]);
}

/* Random conversations (roles in any order, contents mixing think tags,
 * invalid UTF-8 and white space): every format renders or, for qwen3.5's
 * own rules, fails cleanly; the length matches the text. */
Test(chat, random_conversations_render_cleanly)
{
	static const char *const pieces[] = {"<think>", "</think>", "\n", " ", "\xe3\x80\x80", "\xff",
					     "\xe3\x80", "a", "\xc3\xa9", "<tool_response>", "</tool_response>",
					     "\x85", "\xc2\x85"};
	static const char *const roles[] = {"system", "user", "assistant"};
	uint64_t x = 88172645463325252ULL;
	for (int iter = 0; iter < 3000; iter++) {
		struct alice_chat_message m[6];
		char buf[6][64];
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t n = x % 7;
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			m[i].role = roles[x % 3];
			size_t len = 0, np = (x >> 8) % 8;
			buf[i][0] = 0;
			for (size_t k = 0; k < np; k++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				const char *pc = pieces[x % (sizeof(pieces) / sizeof(pieces[0]))];
				size_t pl = strlen(pc);
				if (len + pl >= sizeof(buf[i]))
					break;
				memcpy(buf[i] + len, pc, pl + 1);
				len += pl;
			}
			m[i].content = (x & 0x100000) ? NULL : buf[i];
		}
		for (int f = 0; f < ALICE_CHAT_FORMAT_COUNT; f++) {
			char *out = NULL;
			size_t len = 0;
			struct alice_error err = {{0}};
			struct alice_chat_render_opts o = {.add_leading_bos = iter & 1};
			enum alice_status st = alice_chat_render((enum alice_chat_format)f, m, n, iter & 2, &o,
								 &out, &len, &err);
			if (f == ALICE_CHAT_FORMAT_QWEN35 && st == ALICE_ERR_INVALID) {
				cr_assert_null(out);
				cr_assert(err.msg[0]);
				continue;
			}
			cr_assert_eq(st, ALICE_OK, "format %d iter %d: %s", f, iter, err.msg);
			cr_assert_eq(len, strlen(out));
			free(out);
		}
	}
}
