/* gguf_patch.c — see gguf_patch.h. */
#include "support/gguf_patch.h"

#include <criterion/criterion.h>
#include <string.h>

#include "alice/gguf.h"
#include "alice/gguf_write.h"
#include "alice/quant.h"

static enum alice_status fill_copy(void *user, const char *name, void *dst, uint64_t nbytes,
				   struct alice_error *err)
{
	const struct alice_gguf *src = user;
	int64_t i = alice_gguf_find_tensor(src, name);
	memset(dst, 0, nbytes);
	if (i >= 0 && alice_gguf_tensor(src, i)->nbytes == nbytes)
		memcpy(dst, alice_gguf_tensor(src, i)->data, nbytes);
	(void)err;
	return ALICE_OK;
}

static int is(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

const char *alice_test_write_patched_gguf(const char *src_path, const struct alice_gguf_patch *p,
					  const char *out_path)
{
	struct alice_error err = {0};
	struct alice_gguf *src = NULL;
	cr_assert_eq(alice_gguf_open(src_path, &src, &err), ALICE_OK, "%s", err.msg);
	struct alice_gguf_writer *w = alice_gguf_writer_create();
	cr_assert_not_null(w);
	for (int64_t i = 0; i < alice_gguf_n_kv(src); i++) {
		const char *k = alice_gguf_key(src, i);
		if (is(p->drop_key, k) || is(p->set_str_key, k) || is(p->set_u32_key, k))
			continue;
		cr_assert_eq(alice_gguf_writer_copy_kv(w, src, i), ALICE_OK);
	}
	if (p->set_str_key)
		cr_assert_eq(alice_gguf_writer_set_str(w, p->set_str_key, p->set_str_val), ALICE_OK);
	if (p->set_u32_key)
		cr_assert_eq(alice_gguf_writer_set_u32(w, p->set_u32_key, p->set_u32_val), ALICE_OK);
	for (int64_t i = 0; i < alice_gguf_n_tensors(src); i++) {
		const struct alice_gguf_tensor_info *ti = alice_gguf_tensor(src, i);
		if (is(p->drop_tensor, ti->name))
			continue;
		int64_t ne[4] = {ti->ne[0], ti->ne[1], ti->ne[2], ti->ne[3]};
		uint32_t type = ti->type;
		if (is(p->shape_tensor, ti->name))
			ne[1] = p->new_ne1;
		if (is(p->type_tensor, ti->name))
			type = p->new_type ? p->new_type : ALICE_TYPE_F16;
		cr_assert_eq(alice_gguf_writer_add_tensor(w, ti->name, type, ti->n_dims, ne, fill_copy, src), ALICE_OK);
	}
	cr_assert_eq(alice_gguf_writer_write(w, out_path, &err), ALICE_OK, "%s", err.msg);
	alice_gguf_writer_free(w);
	alice_gguf_close(src);
	return out_path;
}
