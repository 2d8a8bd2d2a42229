/* embed.c — pooling and normalisation of embeddings (see embed.h). */
#include "alice/embed.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {"none", "mean", "cls", "last"};

const char *alice_pooling_name(int pooling)
{
	return pooling >= 0 && pooling < 4 ? names[pooling] : "?";
}

bool alice_pooling_parse(const char *s, enum alice_pooling *out)
{
	for (int i = 0; s && i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = (enum alice_pooling)i;
			return true;
		}
	return false;
}

void alice_embd_pool(const float *rows, int32_t n_rows, int32_t n_embd, enum alice_pooling pooling, float *out)
{
	if (pooling == ALICE_POOLING_CLS || pooling == ALICE_POOLING_LAST) {
		const float *r = rows + (size_t)(pooling == ALICE_POOLING_CLS ? 0 : n_rows - 1) * (size_t)n_embd;
		memcpy(out, r, (size_t)n_embd * sizeof(float));
		return;
	}
	for (int32_t j = 0; j < n_embd; j++) {
		double s = 0.0;
		for (int32_t i = 0; i < n_rows; i++)
			s += rows[(size_t)i * (size_t)n_embd + (size_t)j];
		out[j] = (float)(s / n_rows);
	}
}

void alice_embd_normalize(float *v, int32_t n)
{
	double s = 0.0;
	for (int32_t i = 0; i < n; i++)
		s += (double)v[i] * v[i];
	s = sqrt(s);
	float k = s > 0.0 ? (float)(1.0 / s) : 0.0f;
	for (int32_t i = 0; i < n; i++)
		v[i] *= k;
}
