#include "support/topk_ref.h"

#include <stdlib.h>
#include <string.h>

#include "alice/temp_sample.h"

struct ent {
	int32_t id;
	float v;
};

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;
	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

int topk_ref(const float *x, int32_t n, int32_t k, int32_t *pairs)
{
	struct ent *e = malloc((size_t)n * sizeof(*e));
	if (!e)
		return -1;
	for (int32_t i = 0; i < n; i++)
		e[i] = (struct ent){i, alice_ts_clean(x[i])};
	qsort(e, (size_t)n, sizeof(*e), ent_cmp);
	for (int32_t j = 0; j < k; j++) {
		pairs[2 * j] = e[j].id;
		memcpy(&pairs[2 * j + 1], &e[j].v, 4);
	}
	free(e);
	return 0;
}
