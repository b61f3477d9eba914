/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * req.h - one request's life, from its first byte to req_end(): Parse (the
 * head), Resolve, Admit (with the admission queue, the request's waiting
 * state), the hand-over to the proxy (Select, Forward, Respond: proxy.h)
 * and Record, in the one function every request ends in.
 *
 * A request reaches its client only through its protocol adapter's
 * hooks (struct req_client_ops: HTTP/1.1's in http1.c), which carry its
 * body in, its response out, and its timers; the proxy reaches the
 * client only through the req_client_*() calls here and ends the request
 * only with req_end().
 *
 * The waiting state (REQ_QUEUED): a request whose route's or the global
 * in-flight cap is full waits, when limits.max_queued allows, in one FIFO
 * shared by the workers (struct admit_queue) for at most timeouts.queue;
 * a request leaving the in-flight gauges wakes the first waiter that now
 * fits (through its worker's mailbox), which then enters and goes on to
 * the proxy; after timeouts.queue it is answered 503 overloaded. The wake
 * stage holds requests in the same kind of state (REQ_WAKING): a request
 * for an on-demand environment that is not running joins its one wake
 * (wake.h) and is told through its worker's mailbox how it ended. So
 * does forward auth (REQ_AUTHING), once the request holds its in-flight
 * slot: its subrequest (fauth.h) runs on the worker's loop, for at most
 * the gate's timeout.
 */
#ifndef EDGE_REQ_H
#define EDGE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "admit.h"
#include "cidr.h"
#include "hdr.h"
#include "hrule.h"
#include "log.h"
#include "outcome.h"
#include "route.h"
#include "stream.h"

struct evbuffer;
struct fauth_call;
struct h1_response;
struct req;
struct sockio;
struct worker;
struct worker_service;

enum req_state {
	REQ_IDLE = 0, /* no request on the connection */
	REQ_HEAD,     /* bytes of a head arrived: parsing */
	REQ_QUEUED,   /* admitted but for an in-flight slot: waiting */
	REQ_WAKING,   /* its environment is waking (wake.h): waiting */
	REQ_AUTHING,  /* its forward auth (fauth.h) is asked: waiting */
	REQ_PROXY,    /* with the proxy (proxy.h) */
	REQ_SENDING,  /* the response is complete (the upstream released),
			 its client has yet to take it (pending) */
};

/*
 * The client side of a request, its protocol adapter's (r->cl, with
 * r->cl_arg for it):
 *   in, out    the client's input (the request body as the client frames
 *              it: r->h's Content-Length or chunked) and the buffer the
 *              response body goes to (framed as respond said);
 *   read, reading, watermarks   whether the client is read, and how much
 *              is buffered each way before reading or writing waits;
 *   closed     nothing more can be sent to the client;
 *   close_after, closing   the connection closes once this request ends
 *              (half_closed: the client has shut its side);
 *   take       the client's socket, for a tunnel (NULL: none can be);
 *   timer, timer_stop, btimer, btimer_stop   the request's phase timer
 *              and its body's (req_timeout, req_body_timeout when they
 *              fire);
 *   admitted   the head passed Resolve: the client's events go to the
 *              request from now on;
 *   cont       the client waits for a 100 Continue;
 *   respond    send the response head of resp (extra: pre-formatted
 *              "Name: value\r\n" lines; cl: the Content-Length to
 *              send, -1 none); *chunked says whether the body written to
 *              out must be chunked, *close whether the connection closes
 *              after it (it may be set already). 0, or -1 (not sent);
 *   error      send edge's own answer: status, extra lines, body of blen
 *              bytes (not sent for HEAD), close;
 *   pending    the response is complete in out (req_end asks, for an
 *              ok outcome): whether some of it still waits for the client
 *              (HTTP/2: for its window); then the request waits in
 *              REQ_SENDING, and ends ok at req_client_drained once none
 *              does, or client_closed if the client leaves first. NULL:
 *              never (HTTP/1.1: the response is written as it comes);
 *   ended      req_end is done: the adapter goes on (the next request,
 *              or the close);
 *   trailers   the response's trailer fields (lines "Name: value\r\n",
 *              as struct body's), for a body that is not chunked, just
 *              before req_end (HTTP/2: a trailing HEADERS). NULL: none
 *              (HTTP/1.1 writes them in its chunked body).
 */
struct req_client_ops {
	struct evbuffer *(*in)(const struct req *r);
	struct evbuffer *(*out)(const struct req *r);
	void (*read)(struct req *r, bool on);
	bool (*reading)(const struct req *r);
	void (*watermarks)(struct req *r, size_t read_high, size_t write_low);
	bool (*closed)(const struct req *r);
	void (*close_after)(struct req *r, bool half_closed);
	bool (*closing)(const struct req *r);
	struct sockio *(*take)(struct req *r);
	void (*timer)(struct req *r, uint64_t ms);
	void (*timer_stop)(struct req *r);
	void (*btimer)(struct req *r, uint64_t ms);
	void (*btimer_stop)(struct req *r);
	void (*admitted)(struct req *r);
	void (*cont)(struct req *r);
	int (*respond)(struct req *r, const struct h1_response *resp,
		       const char *extra, int64_t cl, bool *chunked,
		       bool *close);
	void (*error)(struct req *r, int status, const char *extra,
		      const char *body, size_t blen, bool close);
	bool (*pending)(struct req *r);
	void (*ended)(struct req *r, bool close);
	void (*trailers)(struct req *r, struct evbuffer *tr);
};

/*
 * The upstream side of a request (the proxy's, proxy.h), installed by
 * services.c as the workers' up_ops: its state is r->up. start takes a
 * request that passed Resolve and Admit; readable, drained, gone,
 * timeout and btimeout are its client's events and timers while it has
 * the request; release gives back what it holds at the end (ok: the
 * upstream may be pooled; idempotent); reset clears its state for a new
 * request; tunnel says the request became a tunnel (101), body_done that
 * the request body was read whole.
 */
struct req_upstream_ops {
	void (*start)(struct req *r);
	void (*readable)(struct req *r);
	void (*drained)(struct req *r);
	void (*gone)(struct req *r, bool eof);
	void (*timeout)(struct req *r);
	void (*btimeout)(struct req *r);
	void (*release)(struct req *r, bool ok);
	void (*reset)(struct req *r);
	bool (*tunnel)(const struct req *r);
	bool (*body_done)(const struct req *r);
};

/* Bytes of struct req's upstream state (proxy.c checks its struct fits). */
#define REQ_UPSTREAM_SIZE 4192

/* One request, from its first byte to req_end(). */
struct req {
	const struct req_client_ops *cl; /* its client side */
	void *cl_arg;			 /* the adapter's (its connection) */
	struct worker *w;		 /* the worker serving it */
	enum req_state state;
	bool active;	      /* between its first byte and req_end */
	enum outcome outcome; /* how it ended (once req_end ran) */
	uint64_t handle;      /* the worker's id for it (mailbox messages) */
	uint64_t t0;	      /* monotonic ns at the first byte */
	uint64_t t0_real;     /* CLOCK_REALTIME ns at the first byte */
	uint64_t t_resp;      /* monotonic ns of the response head, 0: none */
	char id[HDR_REQUEST_ID_MAX + 1];
	struct hdr_trace trace; /* its W3C trace context, once its head came */
	const char *client_ip;	/* the client's address, as text */
	const struct sockaddr *peer;  /* and as accepted */
	const struct cidr *peer_cidr; /* and as a /32 or /128 */
	int conn_fd;		      /* its connection's socket */
	/* a trusted peer's X-Forwarded-For named the client (req_route):
	 * client_ip, peer and peer_cidr are it, the connection's own here */
	bool xff_client;
	const char *conn_ip;
	const struct sockaddr *conn_peer;
	const struct cidr *conn_cidr;
	char xff_ip[CIDR_STR_MAX];
	struct cidr xff_cidr;
	struct sockaddr_storage xff_sa;
	bool tls;	  /* it came over TLS */
	bool tls_resumed; /* its session was resumed */
	bool early_data;  /* its head came in TLS early data (QUIC 0-RTT):
			     sent upstream with Early-Data: 1 */
	/* what TLS negotiated (OpenSSL's static names), NULL without */
	const char *tls_version, *tls_cipher;
	const char *http_version; /* NULL: the head's (HTTP/1.x) */
	struct h1_request h;	  /* spans point into head */
	char *head;		  /* a copy of the head, head_len bytes */
	size_t head_len;
	struct route_table *rt;	      /* held until the end */
	struct route_table *rt_woken; /* the endpoints' after a wake, held */
	struct route_match m;
	/* its route's header rules (NULL: none), for the head sent
	 * upstream and the response's */
	const struct hdr_edit *req_ed, *resp_ed;
	struct hrule_edit req_edit, resp_edit;
	struct hrule_vars hv;
	int own_status; /* the status of an outcome that has several, 0 */
	/* edge's own answer's body and Content-Type in place of the
	 * outcome's JSON (the challenge page; malloc'd, freed at the end),
	 * NULL: the JSON */
	char *own_body;
	size_t own_body_len;
	const char *own_ctype;
	/* what the challenge made of it (chal_result_name), NULL: nothing */
	const char *chal;
	/* the credential gate (auth.h): what was presented, the fields it
	 * adds upstream (malloc'd, freed at the end) and the edit that adds
	 * them and drops a client's own */
	enum auth_method auth_m;
	char *auth_fields;
	size_t auth_fields_len;
	struct hdr_edit auth_edit;
	/* its forward auth: the call in flight (REQ_AUTHING), the fields
	 * the service's admission adds upstream (malloc'd), and room for
	 * the Content-Type of a refusal relayed (own_ctype) */
	struct fauth_call *fauth;
	char *fwd_fields;
	size_t fwd_fields_len;
	char fwd_ctype[128];
	bool routed;	   /* m is valid */
	bool inflight;	   /* admit_inflight_enter held */
	bool resp_started; /* a response head went to the client */
	int status;	   /* status sent */
	int up_status;	   /* the upstream's final status, 0: none */
	unsigned attempts; /* upstream attempts (endpoints chosen), 0: none */
	/* the last endpoint tried ("10.0.0.1:80"), "" when none */
	char up_addr[CONFIG_ADDR_STR_MAX];
	uint64_t bytes_in, bytes_out;
	const char *mover;	 /* a tunnel's tunnel_movers(), once it ended */
	struct admit_body limit; /* chunked bodies against the route limit */
	struct admit_waiter waiter; /* REQ_QUEUED: its place in the queue */
	/* an on-demand environment's request: its part in the wake
	 * (stream.h), waiting in it while REQ_WAKING */
	struct stream_wake sw;
	uint64_t t_connect; /* monotonic ns an upstream connect began */
	/* the upstream side's state (struct req_upstream_ops'), opaque */
	_Alignas(max_align_t) unsigned char up[REQ_UPSTREAM_SIZE];
};

/* The URL's host part of Host h (n bytes): without its port, an IPv6
 * literal's brackets kept; its length. */
size_t req_host_only(const char *h, size_t n);

/* The version of the protocol r came in, as a Via field's
 * received-protocol writes it (RFC 9110 section 7.6.3): "2" (HTTP/2),
 * "1.1" or "1.0". */
const char *req_via_version(const struct req *r);

/* The log context of a request's lines: its client and request id. */
#define REQ_LOG_CTX(r) (&(const struct log_ctx){(r)->client_ip, (r)->id})

/* Begin a request on r (its client fields and adapter kept, the rest
 * cleared): its clock starts. */
void req_begin(struct req *r);

/* r's head is complete (r->h, spans into r->head): Resolve and Admit,
 * then the proxy (or the queue, or the wake). */
void req_head(struct req *r);

/*
 * End r: the one function every request ends in. Runs its body once per
 * request (later calls do nothing; an ok end whose response the client
 * has yet to take, its adapter's pending, releases the upstream and the
 * in-flight gauges and waits in REQ_SENDING, the rest running when it
 * ends): writes the JSON error when o owes one and no response head was
 * sent yet, records one analytics event and its metrics, releases the
 * in-flight gauges (waking a queued request), its place in the queue,
 * the upstream and the route table reference, then lets the connection
 * wait for the next head (keep-alive) or close after the output is
 * flushed. extra is NULL or pre-formatted "Name: value\r\n" lines for the
 * error.
 */
void req_end(struct req *r, enum outcome o, const char *extra);

/* The request's phase timer (the connect or response timeout, the
 * queue's) and the request body's timer: arm for ms milliseconds, or
 * stop. */
void req_timer(struct req *r, uint64_t ms);
void req_timer_stop(struct req *r);
void req_body_timer(struct req *r, uint64_t ms);
void req_body_timer_stop(struct req *r);

/* The client's side, for the proxy (r->cl's). */
struct evbuffer *req_client_in(const struct req *r);
struct evbuffer *req_client_out(const struct req *r);
/* Read the client or not; whether it is read now. */
void req_client_read(struct req *r, bool on);
bool req_client_reading(const struct req *r);
/* The client's input read watermark and output low watermark. */
void req_client_watermarks(struct req *r, size_t read_high, size_t write_low);
/* Whether the client connection is closed (nothing more can be sent). */
bool req_client_closed(const struct req *r);
/* Close the client connection once this request ends (keep-alive off);
 * with half_closed, the client has already shut its side. */
void req_close_after(struct req *r, bool half_closed);
/* Whether the client connection closes after this request. */
bool req_closing(const struct req *r);
/* Send the response head (struct req_client_ops' respond). */
int req_respond(struct req *r, const struct h1_response *resp,
		const char *extra, int64_t cl, bool *chunked, bool *close);
/* Hand the response's trailers to the client (r->cl's trailers; tr NULL
 * or empty: nothing). */
void req_client_trailers(struct req *r, struct evbuffer *tr);
/* Release r's upstream side (the connection closes under it). */
void req_release(struct req *r);

/* Leave the admission in-flight gauges now (a tunnel: long-lived, bounded
 * by the connection cap instead), letting a queued request in. */
void req_leave_inflight(struct req *r);
/* Hand the client's sockio over (a tunnel takes it: it owns it from now
 * on); the connection closes when the request ends. */
struct sockio *req_client_take(struct req *r);

/* Events of the client while the request is past its head (its adapter
 * calls these). */
void req_client_readable(struct req *r);
void req_client_drained(struct req *r);
void req_client_gone(struct req *r, bool eof);
void req_timeout(struct req *r);
void req_body_timeout(struct req *r);

/* A mailbox message for the request named by handle on worker w arrived:
 * REQ_MSG_ADMIT (an in-flight slot may be free for it). A request that
 * has ended meanwhile is not found, and the slot goes to the next
 * waiter. */
#define REQ_MSG_ADMIT 1
/* REQ_MSG_WAKE: its environment's wake ended (arg: enum wake_result):
 * on to the proxy, or 503 wake_pending / wake_failed. */
#define REQ_MSG_WAKE 2
void req_message(struct worker *w, uint32_t type, uint64_t handle,
		 uint64_t arg);

/* The wake's notify function (wake_notify_fn): post the waiter's
 * message (REQ_MSG_WAKE for a request, L4_MSG_WAKE for a TCP route's
 * connection) with result for its handle to its worker. 0 or -EAGAIN. */
int req_wake_notify(const struct wake_waiter *wt, uint64_t result);

/* Every upstream endpoint failed for r: 503 environment_restarting with
 * Retry-After when its on-demand environment is not running as far as
 * edge knows (wake_refused: a wake starts), else 502
 * upstream_unavailable. Ends r. */
void req_upstream_unavailable(struct req *r);

/* The admission queue's notify function (admit_queue_kick): post
 * REQ_MSG_ADMIT for handle to worker owner. 0 or -EAGAIN (its mailbox is
 * full). */
int req_queue_notify(void *owner, uint64_t handle);

/* The worker service of requests (worker.h): it takes the REQ_MSG_*
 * messages. */
extern const struct worker_service req_service;

#endif /* EDGE_REQ_H */
