/* alice-gguf — print a GGUF file's header, metadata and tensor table, in the
 * spirit of gguf-dump. Also a quick validity check: the reader validates the
 * whole file, so any problem is reported as "alice-gguf: FILE: problem". */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alice/gguf.h"
#include "alice/quant.h"

#define ARRAY_PREVIEW 8 /* elements shown per array */
#define STRING_PREVIEW 120 /* bytes shown per string */

static void usage(FILE *f)
{
	fprintf(f, "usage: alice-gguf FILE [--no-arrays]\n"
		   "Print the header, metadata and tensor table of a GGUF v2/v3 file.\n"
		   "  --no-arrays  show only the type and length of array values\n"
		   "  --help       this text\n");
}

/* A file string, quoted, with escapes for quotes, backslashes and control bytes;
 * long strings are cut (the full length is printed separately by callers). */
static void print_str(struct alice_gguf_str s)
{
	uint64_t n = s.len < STRING_PREVIEW ? s.len : STRING_PREVIEW;
	putchar('"');
	for (uint64_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s.ptr[i];
		switch (ch) {
		case '"': fputs("\\\"", stdout); break;
		case '\\': fputs("\\\\", stdout); break;
		case '\n': fputs("\\n", stdout); break;
		case '\r': fputs("\\r", stdout); break;
		case '\t': fputs("\\t", stdout); break;
		default:
			if (ch < 0x20 || ch == 0x7f)
				printf("\\x%02x", ch);
			else
				putchar(ch);
		}
	}
	putchar('"');
	if (n < s.len)
		printf("...(%" PRIu64 " bytes)", s.len);
}

static void print_scalar(enum alice_gguf_type t, const void *p)
{
	struct alice_gguf_arr one = {.type = t, .n = 1, .data = p};
	int64_t i;
	double d;
	if (t == ALICE_GGUF_BOOL) {
		printf("%s", *(const unsigned char *)p ? "true" : "false");
	} else if (t == ALICE_GGUF_FLOAT32 || t == ALICE_GGUF_FLOAT64) {
		alice_gguf_arr_float(&one, 0, &d);
		printf("%.9g", d);
	} else if (t == ALICE_GGUF_UINT64) {
		uint64_t u;
		memcpy(&u, p, 8);
		printf("%" PRIu64, u);
	} else if (alice_gguf_arr_int(&one, 0, &i) == ALICE_OK) {
		printf("%" PRId64, i);
	}
}

static void print_arr(const struct alice_gguf_arr *a, bool elements)
{
	printf("[%s; %" PRIu64 "]", alice_gguf_type_name(a->type), a->n);
	if (!elements)
		return;
	fputs(" = [", stdout);
	uint64_t n = a->n < ARRAY_PREVIEW ? a->n : ARRAY_PREVIEW;
	for (uint64_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", stdout);
		if (a->type == ALICE_GGUF_STRING) {
			struct alice_gguf_str s;
			if (alice_gguf_arr_str(a, i, &s) == ALICE_OK)
				print_str(s);
		} else if (a->type == ALICE_GGUF_ARRAY) {
			struct alice_gguf_arr sub;
			if (alice_gguf_arr_arr(a, i, &sub) == ALICE_OK)
				print_arr(&sub, true);
		} else {
			uint64_t esz = a->type == ALICE_GGUF_UINT8 || a->type == ALICE_GGUF_INT8 || a->type == ALICE_GGUF_BOOL ? 1
				: a->type == ALICE_GGUF_UINT16 || a->type == ALICE_GGUF_INT16 ? 2
				: a->type == ALICE_GGUF_UINT64 || a->type == ALICE_GGUF_INT64 || a->type == ALICE_GGUF_FLOAT64 ? 8 : 4;
			print_scalar(a->type, (const unsigned char *)a->data + i * esz);
		}
	}
	if (n < a->n)
		fputs(", ...", stdout);
	putchar(']');
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	bool arrays = true;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--no-arrays")) {
			arrays = false;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "alice-gguf: unknown option %s\n", argv[i]);
			usage(stderr);
			return 1;
		} else if (!path) {
			path = argv[i];
		} else {
			fprintf(stderr, "alice-gguf: only one FILE may be given\n");
			return 1;
		}
	}
	if (!path) {
		usage(stderr);
		return 1;
	}
	struct alice_gguf *g;
	struct alice_error err = {{0}};
	if (alice_gguf_open(path, &g, &err) != ALICE_OK) {
		/* Reader messages already start with the path. */
		fprintf(stderr, "alice-gguf: %s\n", err.msg);
		return 1;
	}
	printf("file: %s\n", path);
	printf("version: %" PRIu32 "\n", alice_gguf_version(g));
	printf("alignment: %" PRIu32 "\n", alice_gguf_alignment(g));
	printf("n_kv: %" PRId64 "\n", alice_gguf_n_kv(g));
	printf("n_tensors: %" PRId64 "\n", alice_gguf_n_tensors(g));
	printf("data offset: %" PRIu64 "\n", alice_gguf_data_offset(g));
	printf("size: %" PRIu64 "\n", alice_gguf_size(g));

	printf("\nmetadata:\n");
	for (int64_t i = 0; i < alice_gguf_n_kv(g); i++) {
		const char *key = alice_gguf_key(g, i);
		enum alice_gguf_type t = alice_gguf_kv_type(g, i);
		printf("%5" PRId64 ": %-8s %s = ", i, alice_gguf_type_name(t), key);
		if (t == ALICE_GGUF_STRING) {
			struct alice_gguf_str s;
			alice_gguf_get_str(g, key, &s, NULL);
			print_str(s);
		} else if (t == ALICE_GGUF_ARRAY) {
			struct alice_gguf_arr a;
			alice_gguf_get_arr(g, key, &a, NULL);
			print_arr(&a, arrays);
		} else {
			/* Scalars through a one-element array view of the getter's copy. */
			union { uint64_t u; double d; unsigned char b[8]; } v = {0};
			switch (t) {
			case ALICE_GGUF_UINT8: alice_gguf_get_u8(g, key, (uint8_t *)v.b, NULL); break;
			case ALICE_GGUF_INT8: alice_gguf_get_i8(g, key, (int8_t *)v.b, NULL); break;
			case ALICE_GGUF_BOOL: { bool b; alice_gguf_get_bool(g, key, &b, NULL); v.b[0] = b; break; }
			case ALICE_GGUF_UINT16: alice_gguf_get_u16(g, key, (uint16_t *)v.b, NULL); break;
			case ALICE_GGUF_INT16: alice_gguf_get_i16(g, key, (int16_t *)v.b, NULL); break;
			case ALICE_GGUF_UINT32: alice_gguf_get_u32(g, key, (uint32_t *)v.b, NULL); break;
			case ALICE_GGUF_INT32: alice_gguf_get_i32(g, key, (int32_t *)v.b, NULL); break;
			case ALICE_GGUF_FLOAT32: alice_gguf_get_f32(g, key, (float *)v.b, NULL); break;
			case ALICE_GGUF_UINT64: alice_gguf_get_u64(g, key, &v.u, NULL); break;
			case ALICE_GGUF_INT64: alice_gguf_get_i64(g, key, (int64_t *)v.b, NULL); break;
			case ALICE_GGUF_FLOAT64: alice_gguf_get_f64(g, key, &v.d, NULL); break;
			default: break;
			}
			print_scalar(t, v.b);
		}
		putchar('\n');
	}

	printf("\ntensors:\n");
	printf("%5s  %-40s %-8s %-24s %12s %12s\n", "index", "name", "type", "shape", "offset", "bytes");
	for (int64_t i = 0; i < alice_gguf_n_tensors(g); i++) {
		const struct alice_gguf_tensor_info *t = alice_gguf_tensor(g, i);
		char shape[96];
		int n = 0;
		for (uint32_t d = 0; d < t->n_dims && n < (int)sizeof(shape); d++)
			n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%" PRId64, d ? " x " : "", t->ne[d]);
		printf("%5" PRId64 "  %-40s %-8s %-24s %12" PRIu64 " %12" PRIu64 "\n", i, t->name,
		       alice_type_name(t->type), shape, t->offset, t->nbytes);
	}
	alice_gguf_close(g);
	return 0;
}
