/* unicode.c — code point flags lookup, lenient/strict UTF-8, GPT-2 byte map. */
#include "unicode.h"

uint16_t alice_ucp_flags(uint32_t cp)
{
	if (cp >= 0x110000) /* only the lenient decoder makes these */
		return ALICE_UCP_UNDEFINED;
	unsigned lo = 0, hi = alice_ucd_n_ranges; /* last entry with start <= cp */
	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (alice_ucd_ranges[mid].start <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return alice_ucd_ranges[lo].flags;
}

uint32_t alice_utf8_decode_lenient(const unsigned char *s, size_t n, size_t *off)
{
	size_t o = *off;
	unsigned c = s[o];
	if (!(c & 0x80)) {
		*off = o + 1;
		return c;
	}
	/* A continuation byte as lead, or a lead whose continuation bytes are
	 * missing or malformed: U+FFFD for this one byte. */
	if ((c & 0x40) && !(c & 0x20)) {
		if (o + 1 < n && (s[o + 1] & 0xc0) == 0x80) {
			*off = o + 2;
			return ((c & 0x1fu) << 6) | (s[o + 1] & 0x3fu);
		}
	} else if ((c & 0x40) && !(c & 0x10)) {
		if (o + 2 < n && (s[o + 1] & 0xc0) == 0x80 && (s[o + 2] & 0xc0) == 0x80) {
			*off = o + 3;
			return ((c & 0x0fu) << 12) | ((s[o + 1] & 0x3fu) << 6) | (s[o + 2] & 0x3fu);
		}
	} else if ((c & 0x40) && !(c & 0x08)) {
		if (o + 3 < n && (s[o + 1] & 0xc0) == 0x80 && (s[o + 2] & 0xc0) == 0x80 &&
		    (s[o + 3] & 0xc0) == 0x80) {
			*off = o + 4;
			return ((c & 0x07u) << 18) | ((s[o + 1] & 0x3fu) << 12) |
			       ((s[o + 2] & 0x3fu) << 6) | (s[o + 3] & 0x3fu);
		}
	}
	*off = o + 1;
	return 0xFFFD;
}

size_t alice_utf8_encode(uint32_t cp, char out[4])
{
	if (cp > 0x10FFFF)
		cp = 0xFFFD;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

int alice_utf8_check(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned c = s[0];
	size_t need;
	unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
	*bad = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlongs */
		else if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* <= U+10FFFF */
	} else {
		return -1;
	}
	for (size_t i = 1; i < need; i++) {
		if (i >= n)
			return 0; /* a valid prefix so far: wait for more */
		unsigned b = s[i];
		unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
		if (b < l || b > h) {
			*bad = i; /* the maximal subpart ends before this byte */
			return -1;
		}
	}
	return (int)need;
}

uint32_t alice_gpt2_byte_to_cp(unsigned char b)
{
	/* Printable Latin-1 bytes stand for themselves; the other 68 bytes map,
	 * in byte order, to U+0100.. */
	if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae))
		return b;
	unsigned n = 0;
	for (unsigned x = 0; x < b; x++)
		if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae)))
			n++;
	return 256 + n;
}

int alice_gpt2_cp_to_byte(uint32_t cp)
{
	if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff))
		return (int)cp;
	if (cp < 256 || cp >= 256 + 68)
		return -1;
	unsigned n = 0;
	for (unsigned x = 0; x < 256; x++) {
		if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae))) {
			if (n == cp - 256)
				return (int)x;
			n++;
		}
	}
	return -1;
}
