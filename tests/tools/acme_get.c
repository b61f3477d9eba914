// SPDX-License-Identifier: BSD-2-Clause
/*
 * acme_get.c - one ACME order through userspace/acme.c, as edged will
 * run it: an event loop, the http-01 tokens served by evhttp on
 * 127.0.0.1:PORT, the result as one JSON line on stdout.
 *
 *   acme_get --dir URL --ca FILE --key FILE --http PORT [--out DIR]
 *            [--dns ADDR:PORT] [--contact URI] [--wrong] [--timeout-ms N]
 *            [--order-timeout-ms N] [--cancel-ms N] NAME...
 *
 * --dns A:P     the CA's name resolved (by libevent's evdns, without
 *               blocking) by the DNS server at A:P alone; else by
 *               /etc/resolv.conf's and /etc/hosts
 * --out DIR     the chain and its key into DIR/cert.pem, DIR/key.pem
 * --wrong       serve a wrong key authorization (the CA must refuse)
 * --cancel-ms N cancel the order after N ms, then run the loop 300 ms
 *               more: any callback after the cancel is an error
 *
 * The line: {"ok", "error", "message", "problem_type", "problem_detail",
 * "problem_status", "http_status", "account_url", "published",
 * "unpublished", "served", "nonce_retries", "ms"}, or {"cancelled": true,
 * "published", "unpublished", ...}. Exit 0 when issued (or cancelled
 * cleanly), 1 when the order failed, 2 for usage, 3 for a callback after
 * a cancel or an unbalanced publish.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acme.h"

#define MAX_TOKENS 64
#define CHAL_PREFIX "/.well-known/acme-challenge/"

struct token {
	char *token;
	char *ka;
};

static struct {
	struct event_base *base;
	struct acme_order *order;
	struct token tokens[MAX_TOKENS];
	unsigned published, unpublished, served;
	int wrong, cancelled, bad, rc;
	const char *out;
	struct timespec t0;
} g;

static double elapsed_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - g.t0.tv_sec) * 1e3 +
	       (double)(t.tv_nsec - g.t0.tv_nsec) / 1e6;
}

static void serve(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	struct evbuffer *b = evbuffer_new();
	size_t i;

	(void)arg;
	if (b && strncmp(uri, CHAL_PREFIX, strlen(CHAL_PREFIX)) == 0) {
		for (i = 0; i < MAX_TOKENS; i++) {
			if (!g.tokens[i].token ||
			    strcmp(g.tokens[i].token,
				   uri + strlen(CHAL_PREFIX)) != 0)
				continue;
			evbuffer_add_printf(b, "%s%s", g.tokens[i].ka,
					    g.wrong ? "x" : "");
			evhttp_add_header(
			    evhttp_request_get_output_headers(req),
			    "Content-Type", "text/plain");
			evhttp_send_reply(req, 200, "OK", b);
			evbuffer_free(b);
			g.served++;
			return;
		}
	}
	evhttp_send_reply(req, 404, "Not Found", NULL);
	evbuffer_free(b);
}

static int publish(void *arg, const struct acme_chal_row *row)
{
	const char *token = row->token, *ka = row->key_authorization;
	size_t i;

	(void)arg;
	if (g.cancelled)
		g.bad++;
	for (i = 0; i < MAX_TOKENS; i++) {
		if (g.tokens[i].token)
			continue;
		g.tokens[i].token = strdup(token);
		g.tokens[i].ka = strdup(ka);
		if (!g.tokens[i].token || !g.tokens[i].ka)
			return -ENOMEM;
		g.published++;
		return 0;
	}
	return -ENOSPC;
}

static void unpublish(void *arg, const char *token)
{
	size_t i;

	(void)arg;
	if (g.cancelled > 1)
		g.bad++;
	for (i = 0; i < MAX_TOKENS; i++) {
		if (g.tokens[i].token &&
		    strcmp(g.tokens[i].token, token) == 0) {
			free(g.tokens[i].token);
			free(g.tokens[i].ka);
			g.tokens[i].token = g.tokens[i].ka = NULL;
			g.unpublished++;
			return;
		}
	}
	g.bad++; /* never published */
}

static int write_file(const char *name, const char *text)
{
	char path[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", g.out, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void done(void *arg, const struct acme_result *r)
{
	json_t *j;
	char *s;

	(void)arg;
	g.order = NULL;
	if (g.cancelled) {
		g.bad++;
		return;
	}
	j = json_pack(
	    "{s:b, s:i, s:s, s:s?, s:s?, s:i, s:i, s:s?, s:i, s:i, s:i, "
	    "s:i, s:f}",
	    "ok", r->error == 0, "error", r->error, "message", r->message,
	    "problem_type", r->problem_type, "problem_detail",
	    r->problem_detail, "problem_status", r->problem_status,
	    "http_status", r->http_status, "account_url", r->account_url,
	    "published", g.published, "unpublished", g.unpublished, "served",
	    g.served, "nonce_retries", r->nonce_retries, "ms", elapsed_ms());
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	printf("%s\n", s ? s : "{\"ok\":false}");
	fflush(stdout);
	free(s);
	json_decref(j);
	g.rc = r->error ? 1 : 0;
	if (r->error == 0 && g.out &&
	    (write_file("cert.pem", r->cert_pem) < 0 ||
	     write_file("key.pem", r->key_pem) < 0)) {
		fprintf(stderr, "acme_get: cannot write into %s\n", g.out);
		g.rc = 1;
	}
	if (g.published != g.unpublished)
		g.rc = 3;
	event_base_loopexit(g.base, NULL);
}

static void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = {0, 300000};

	(void)fd;
	(void)what;
	(void)arg;
	if (!g.order) /* ended already */
		return;
	g.cancelled = 1;
	acme_order_cancel(g.order);
	g.order = NULL;
	g.cancelled = 2; /* from now on, every callback is an error */
	printf("{\"cancelled\":true,\"published\":%u,\"unpublished\":%u,"
	       "\"ms\":%.0f}\n",
	       g.published, g.unpublished, elapsed_ms());
	fflush(stdout);
	g.rc = g.published == g.unpublished ? 0 : 3;
	event_base_loopexit(g.base, &tv);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: acme_get --dir URL --ca FILE --key FILE --http PORT "
		"[--out DIR] [--dns ADDR:PORT] [--contact URI] [--wrong] "
		"[--timeout-ms N] "
		"[--order-timeout-ms N] [--cancel-ms N] NAME...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"ca", required_argument, NULL, 'c'},
	    {"key", required_argument, NULL, 'k'},
	    {"http", required_argument, NULL, 'p'},
	    {"out", required_argument, NULL, 'o'},
	    {"contact", required_argument, NULL, 'm'},
	    {"dns", required_argument, NULL, 'n'},
	    {"wrong", no_argument, NULL, 'w'},
	    {"timeout-ms", required_argument, NULL, 't'},
	    {"order-timeout-ms", required_argument, NULL, 'T'},
	    {"cancel-ms", required_argument, NULL, 'x'},
	    {NULL, 0, NULL, 0}};
	static const struct acme_ops ops = {publish, unpublish, done};
	struct acme_config cfg = {0};
	struct acme_client *c = NULL;
	struct evdns_base *dns = NULL;
	struct evhttp *http = NULL;
	struct event *cancel_ev = NULL;
	struct errbuf err = {{0}};
	struct timeval tv;
	const char *nameserver = NULL;
	long cancel_ms = -1;
	int port = 0, ch, r;
	size_t i;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			cfg.directory_url = optarg;
			break;
		case 'c':
			cfg.ca_file = optarg;
			break;
		case 'k':
			cfg.account_key_file = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'o':
			g.out = optarg;
			break;
		case 'm':
			cfg.contact = optarg;
			break;
		case 'w':
			g.wrong = 1;
			break;
		case 'n':
			nameserver = optarg;
			break;
		case 't':
			cfg.request_timeout_ms = (unsigned)atoi(optarg);
			break;
		case 'T':
			cfg.order_timeout_ms = (unsigned)atoi(optarg);
			break;
		case 'x':
			cancel_ms = atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (!cfg.directory_url || !cfg.account_key_file || port <= 0 ||
	    optind >= argc)
		usage();
	clock_gettime(CLOCK_MONOTONIC, &g.t0);
	g.rc = 1;
	g.base = event_base_new();
	/* the CA's name resolved without blocking (edged passes its own) */
	dns = g.base ? evdns_base_new(
			   g.base,
			   nameserver ? 0 : EVDNS_BASE_INITIALIZE_NAMESERVERS)
		     : NULL;
	if (dns && nameserver &&
	    evdns_base_nameserver_ip_add(dns, nameserver)) {
		fprintf(stderr, "acme_get: bad --dns %s\n", nameserver);
		g.rc = 2;
		goto out;
	}
	http = g.base ? evhttp_new(g.base) : NULL;
	if (!dns || !http ||
	    evhttp_bind_socket(http, "127.0.0.1", (unsigned short)port) < 0) {
		fprintf(stderr, "acme_get: cannot serve on 127.0.0.1:%d\n",
			port);
		goto out;
	}
	evhttp_set_gencb(http, serve, NULL);
	cfg.dns = dns;
	r = acme_client_new(g.base, &cfg, &c, &err);
	if (r < 0) {
		printf("{\"ok\":false,\"error\":%d,\"message\":\"client: "
		       "%s\"}\n",
		       r, err.msg);
		goto out;
	}
	r = acme_order_start(c, (const char *const *)argv + optind,
			     (size_t)(argc - optind), &ops, NULL, &g.order,
			     &err);
	if (r < 0) {
		printf("{\"ok\":false,\"error\":%d,\"message\":\"start: "
		       "%s\"}\n",
		       r, err.msg);
		goto out;
	}
	if (cancel_ms >= 0) {
		cancel_ev = evtimer_new(g.base, cancel_cb, NULL);
		tv.tv_sec = cancel_ms / 1000;
		tv.tv_usec = (cancel_ms % 1000) * 1000;
		if (cancel_ev)
			evtimer_add(cancel_ev, &tv);
	}
	event_base_dispatch(g.base);
	if (g.order) { /* the loop ended without done */
		acme_order_cancel(g.order);
		g.rc = 1;
	}
	if (g.bad) {
		fprintf(stderr, "acme_get: %d callbacks out of turn\n", g.bad);
		g.rc = 3;
	}
out:
	acme_client_free(c);
	if (cancel_ev)
		event_free(cancel_ev);
	for (i = 0; i < MAX_TOKENS; i++) {
		free(g.tokens[i].token);
		free(g.tokens[i].ka);
	}
	if (http)
		evhttp_free(http);
	if (dns)
		evdns_base_free(dns, 0);
	if (g.base)
		event_base_free(g.base);
	return g.rc;
}
