/* vk_shaders.h — the SPIR-V modules embedded at build time (embed_spv.cmake
 * writes the table; glslc compiles shaders/<name>.comp with -D variants). */
#ifndef ALICE_VK_SHADERS_H
#define ALICE_VK_SHADERS_H

#include <stddef.h>
#include <stdint.h>

struct vk_shader_blob {
	const char *name;      /* "mm_Q4_K_sg", "ew", ... */
	const uint32_t *words;
	size_t size;           /* bytes */
};

/* Terminated by a NULL name. */
extern const struct vk_shader_blob vk_shader_table[] __attribute__((visibility("hidden")));

#endif
