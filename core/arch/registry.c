/* registry.c — the architectures this build knows: one line each. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "arch/arch.h"

extern const struct alice_arch alice_arch_llama;
extern const struct alice_arch alice_arch_qwen2;
extern const struct alice_arch alice_arch_qwen3;
extern const struct alice_arch alice_arch_gemma2;
extern const struct alice_arch alice_arch_qwen35;
extern const struct alice_arch alice_arch_bert;

static const struct alice_arch *const archs[] = {
	&alice_arch_llama,
	&alice_arch_qwen2,
	&alice_arch_qwen3,
	&alice_arch_gemma2,
	&alice_arch_qwen35,
	&alice_arch_bert,
};

#define N_ARCHS (sizeof(archs) / sizeof(archs[0]))

const struct alice_arch *alice_arch_at(size_t i)
{
	return i < N_ARCHS ? archs[i] : NULL;
}

const struct alice_arch *alice_arch_find(const char *name)
{
	for (size_t i = 0; i < N_ARCHS; i++)
		if (name && strcmp(archs[i]->name, name) == 0)
			return archs[i];
	return NULL;
}

static char supported[256];
static pthread_once_t supported_once = PTHREAD_ONCE_INIT;

static void build_supported(void)
{
	size_t off = 0;
	for (size_t i = 0; i < N_ARCHS && off < sizeof(supported); i++)
		off += (size_t)snprintf(supported + off, sizeof(supported) - off, "%s%s", i ? ", " : "",
					archs[i]->name);
}

const char *alice_arch_supported_list(void)
{
	pthread_once(&supported_once, build_supported);
	return supported;
}
