/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.c - stderr messages with the tool's name, and the error buffer.
 *
 * libbpf and libxdp print a lot, some of it alarming and expected (a
 * native attach that is refused before the generic one works). Their
 * output goes to debug: it shows only with -v or EDGE_DEBUG=1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "log.h"

static const char *log_progname = "edge";
static bool log_is_verbose;

void errbuf_set(struct errbuf *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

void errbuf_clear(struct errbuf *err)
{
	if (err)
		err->msg[0] = '\0';
}

static void log_vprint(const char *kind, const char *fmt, va_list ap,
		       int errnum)
{
	char buf[2048];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (errnum)
		fprintf(stderr, "%s: %s%s: %s\n", log_progname, kind, buf,
			strerror(errnum));
	else
		fprintf(stderr, "%s: %s%s\n", log_progname, kind, buf);
}

static void log_lib_vprint(const char *lib, const char *fmt, va_list ap)
{
	char buf[2048];
	size_t n;

	if (!log_is_verbose)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	fprintf(stderr, "%s: debug: %s: %s\n", log_progname, lib, buf);
}

static int log_libbpf_print(enum libbpf_print_level level, const char *fmt,
			    va_list ap)
{
	(void)level;
	log_lib_vprint("libbpf", fmt, ap);
	return 0;
}

static int log_libxdp_print(enum libxdp_print_level level, const char *fmt,
			    va_list ap)
{
	(void)level;
	log_lib_vprint("libxdp", fmt, ap);
	return 0;
}

void log_init(const char *progname, bool verbose)
{
	log_progname = progname;
	log_is_verbose = verbose;
	libbpf_set_print(log_libbpf_print);
	libxdp_set_print(log_libxdp_print);
}

bool log_verbose(void)
{
	return log_is_verbose;
}

void log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vprint("", fmt, ap, 0);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vprint("", fmt, ap, saved);
	va_end(ap);
	errno = saved;
}

void log_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vprint("note: ", fmt, ap, 0);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_is_verbose)
		return;
	va_start(ap, fmt);
	log_vprint("debug: ", fmt, ap, 0);
	va_end(ap);
}

bool log_rl_allow(struct log_rl *rl, uint64_t now_ns, uint64_t interval_ns,
		  uint64_t *suppressed)
{
	if (rl->next_ns && now_ns < rl->next_ns) {
		rl->suppressed++;
		return false;
	}
	*suppressed = rl->suppressed;
	rl->suppressed = 0;
	rl->next_ns = now_ns + interval_ns;
	if (!rl->next_ns)
		rl->next_ns = 1;
	return true;
}
