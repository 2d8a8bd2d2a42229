/* ops_topk.c — TOPK: the best K entries of each row (backend.h), rows
 * split across threads. A sorted insertion per row: after the first few
 * hundred entries almost nothing beats the K-th, so a row costs about one
 * compare per entry. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

struct topk_job {
	const struct alice_tensor *x, *d;
	int32_t k;
};

static inline float clean(float x)
{
	x = x == x ? x : -INFINITY;
	return x < FLT_MAX ? x : FLT_MAX;
}

static void topk_run(void *arg, int ith, int nth)
{
	const struct topk_job *j = arg;
	const int64_t n = j->x->ne[0], rows = j->x->ne[1];
	const int32_t k = j->k;
	for (int64_t r = ith; r < rows; r += nth) {
		const float *x = (const float *)(tensor_data(j->x) + r * j->x->nb[1]);
		int32_t *o = (int32_t *)(tensor_data(j->d) + r * j->d->nb[2]);
		float v[ALICE_TOPK_MAX];
		int32_t id[ALICE_TOPK_MAX], m = 0;
		for (int64_t i = 0; i < n; i++) {
			float xi = clean(x[i]);
			/* a later index loses a tie, so it must be strictly better */
			if (m == k && !(xi > v[k - 1]))
				continue;
			int32_t p = m < k ? m++ : k - 1;
			while (p > 0 && xi > v[p - 1]) {
				v[p] = v[p - 1];
				id[p] = id[p - 1];
				p--;
			}
			v[p] = xi;
			id[p] = (int32_t)i;
		}
		for (int32_t i = 0; i < k; i++) {
			o[2 * i] = id[i];
			memcpy(&o[2 * i + 1], &v[i], 4);
		}
	}
}

enum alice_status cpu_op_topk(const struct alice_op_args *a)
{
	struct topk_job j = {.x = a->src[0], .d = a->dst, .k = a->node->ip[0]};
	cpu_pool_run_sized(a->ctx->pool, topk_run, &j, tensor_nelem(j.x));
	return ALICE_OK;
}
