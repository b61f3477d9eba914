/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * http3.h - the HTTP/3 adapter: QUIC connections' application (quic.h's
 * struct quic_app_ops) on nghttp3's framing and QPACK.
 *
 * As for HTTP/2 (http2.h), each request stream is one request of the
 * stream core (req.h): its fields make the HTTP/1.1 head that the same
 * strict parser reads (h2fields.h: what HTTP/3 forbids, nghttp3 refuses
 * first), its body goes on as an HTTP/1.1 body (its Content-Length, else
 * chunked), and the response goes back as HEADERS and DATA. A request
 * body is read only as fast as the proxy takes it: the stream's and the
 * connection's flow control windows grow as its bytes leave. A response
 * body's bytes are kept until the client acknowledges them.
 *
 * Limits: http2.max_concurrent_streams bidirectional streams at once
 * (QUIC's stream credit), http2.max_header_list_size for a field
 * section (SETTINGS_MAX_FIELD_SECTION_SIZE). A drain sends GOAWAY; the
 * open streams finish.
 */
#ifndef EDGE_HTTP3_H
#define EDGE_HTTP3_H

#include "quic.h"

extern const struct quic_app_ops http3_app;

#endif /* EDGE_HTTP3_H */
