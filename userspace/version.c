/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * version.c - the libraries edged runs with, for edged --version: each
 * as its own runtime version function gives it, so that a library
 * upgraded under a built edged shows its new version. libconfig has no
 * such function (its header's version, as built, is shown); libxdp and
 * liburing 2.3 have none either, so theirs is read from the file name the
 * dynamic linker loaded ("liburing.so.2.3").
 */
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <bpf/libbpf.h>
#include <event2/event.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <libconfig.h>
#include <libpq-fe.h>
#include <limits.h>
#include <link.h>
#include <nghttp2/nghttp2.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "version.h"

/* What version_so looks for, and what it found. */
struct version_so {
	const char *stem; /* "liburing.so." */
	char found[64];
};

static int version_so_each(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct version_so *v = arg;
	char real[PATH_MAX];
	const char *base;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, v->stem) ||
	    !realpath(info->dlpi_name, real))
		return 0;
	base = strrchr(real, '/');
	base = base ? base + 1 : real;
	if (strncmp(base, v->stem, strlen(v->stem)) != 0)
		return 0;
	snprintf(v->found, sizeof(v->found), "%s", base + strlen(v->stem));
	return 1;
}

/* The version in the name of the loaded file of stem ("libxdp.so."), or
 * "unknown". */
static void version_so(FILE *f, const char *name, const char *stem)
{
	struct version_so v = {.stem = stem};

	dl_iterate_phdr(version_so_each, &v);
	fprintf(f, "%-9s %s%s\n", name, v.found[0] ? v.found : "unknown",
		v.found[0] ? " (its file name)" : "");
}

void version_print_libs(FILE *f)
{
	uint32_t be = BrotliEncoderVersion();
	int pq = PQlibVersion();

	fprintf(f, "%-9s %u.%u\n", "libbpf", libbpf_major_version(),
		libbpf_minor_version());
	version_so(f, "libxdp", "libxdp.so.");
	fprintf(f, "%-9s %s\n", "libevent", event_get_version());
#ifdef OPENSSL_VERSION_STRING /* OpenSSL 3: "3.0.19" */
	fprintf(f, "%-9s %s\n", "openssl",
		OpenSSL_version(OPENSSL_VERSION_STRING));
#else
	fprintf(f, "%-9s %s\n", "openssl", OpenSSL_version(OPENSSL_VERSION));
#endif
	fprintf(f, "%-9s %s\n", "gnutls", gnutls_check_version(NULL));
	fprintf(f, "%-9s %s\n", "ngtcp2", ngtcp2_version(0)->version_str);
	fprintf(f, "%-9s %s\n", "nghttp2", nghttp2_version(0)->version_str);
	fprintf(f, "%-9s %s\n", "nghttp3", nghttp3_version(0)->version_str);
	/* 150013 is 15.13 (from PostgreSQL 10 on) */
	fprintf(f, "%-9s %d.%d\n", "libpq", pq / 10000, pq % 10000);
	version_so(f, "liburing", "liburing.so.");
	fprintf(f, "%-9s %s\n", "jansson", jansson_version_str());
	fprintf(f, "%-9s %s\n", "zlib", zlibVersion());
	fprintf(f, "%-9s %u.%u.%u\n", "brotli", be >> 24, (be >> 12) & 0xfff,
		be & 0xfff);
	fprintf(f, "%-9s %s\n", "zstd", ZSTD_versionString());
	fprintf(f, "%-9s %d.%d.%d (as built)\n", "libconfig",
		LIBCONFIG_VER_MAJOR, LIBCONFIG_VER_MINOR,
		LIBCONFIG_VER_REVISION);
}
