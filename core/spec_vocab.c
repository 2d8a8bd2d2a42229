/* spec_vocab.c — may a model draft for another (spec.h)? Drafted token ids
 * are fed to the target as they are, so both must mean the same thing by
 * every id: vocabulary size, token texts and special ids. */
#include <string.h>

#include "alice/model.h"
#include "alice/spec.h"
#include "alice/tokenizer.h"

enum alice_status alice_spec_check_vocab(const struct alice_model *target, const char *target_path,
					 const struct alice_model *draft, const char *draft_path,
					 struct alice_error *err)
{
	const struct alice_tokenizer *a = alice_model_tokenizer(target), *b = alice_model_tokenizer(draft);
	int32_t na = alice_model_n_vocab(target), nb = alice_model_n_vocab(draft);
	if (na != nb)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "draft model %s has %d tokens but the model %s has %d: a draft needs the same vocabulary",
				  draft_path, nb, target_path, na);
	static const char *const names[] = {"BOS", "EOS", "EOT", "EOM", "UNK", "PAD"};
	int32_t (*const ids[])(const struct alice_tokenizer *) = {alice_tokenizer_bos, alice_tokenizer_eos,
								  alice_tokenizer_eot, alice_tokenizer_eom,
								  alice_tokenizer_unk, alice_tokenizer_pad};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (ids[i](a) != ids[i](b))
			return alice_fail(err, ALICE_ERR_INVALID,
					  "draft model %s has %s token %d but the model %s has %d: a draft needs the same "
					  "special tokens",
					  draft_path, names[i], ids[i](b), target_path, ids[i](a));
	for (int32_t id = 0; id < na; id++) {
		size_t la = 0, lb = 0;
		const char *ta = alice_tokenizer_token_text(a, id, &la), *tb = alice_tokenizer_token_text(b, id, &lb);
		bool same = la == lb && (la == 0 || (ta && tb && memcmp(ta, tb, la) == 0));
		if (!same || alice_tokenizer_is_eog(a, id) != alice_tokenizer_is_eog(b, id) ||
		    alice_tokenizer_is_control(a, id) != alice_tokenizer_is_control(b, id))
			return alice_fail(err, ALICE_ERR_INVALID,
					  "draft model %s differs from the model %s at token %d ('%.*s' vs '%.*s'): a "
					  "draft needs the same vocabulary",
					  draft_path, target_path, id, (int)(lb > 40 ? 40 : lb), tb ? tb : "",
					  (int)(la > 40 ? 40 : la), ta ? ta : "");
	}
	return ALICE_OK;
}
