/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sni.h - the server_name of a TLS ClientHello, read from the first bytes
 * a client sends, for routing TLS passthrough connections by name.
 *
 * Pure: no I/O, no allocation, no global state; includes only libc
 * headers. The caller peeks at the socket (MSG_PEEK) and hands over what
 * it has; nothing is consumed, so the backend later receives the same
 * bytes. What is accepted and rejected, and why, is in docs/tls.md.
 *
 * Not resumable on purpose: every call parses buf from its start, as a
 * peek returns the stream from its start every time. A call costs
 * O(len), len being at most SNI_PEEK_MAX.
 */
#ifndef EDGE_SNI_H
#define EDGE_SNI_H

#include <stddef.h>
#include <stdint.h>

/* What the first bytes of a stream are. */
enum sni_result {
	SNI_NEED_MORE = 0, /* a valid prefix: read more, then call again */
	SNI_FOUND,	   /* a ClientHello with a host_name: *name set */
	SNI_NONE,	   /* a complete, valid ClientHello, no server_name */
	SNI_NOT_TLS,	   /* not a TLS handshake record (e.g. plain HTTP) */
	SNI_BAD,	   /* malformed/unsupported ClientHello */
};

/* Longest host name returned (bytes, without the NUL): RFC 1035's 253. */
#define SNI_NAME_MAX 253

/* The largest ClientHello edge waits for: its records, headers included,
 * must end within the first SNI_PEEK_MAX bytes of the stream, or it is
 * SNI_BAD. So a caller that has peeked SNI_PEEK_MAX bytes always has an
 * answer other than SNI_NEED_MORE. */
#define SNI_PEEK_MAX 16384

/*
 * Parse buf[0..len), the first bytes of a client's stream.
 *
 * SNI_FOUND: name holds the host name, lower-cased, NUL-terminated,
 * without a trailing dot. On every other result name is "" (name must
 * not be NULL). The result is decided only by the whole ClientHello:
 * every proper prefix of a valid one is SNI_NEED_MORE, never SNI_FOUND
 * early; bytes after the ClientHello's last record are not looked at.
 * A prefix that no valid ClientHello begins with may be answered
 * SNI_BAD or SNI_NOT_TLS before the rest arrives, and more bytes never
 * change an answer other than SNI_NEED_MORE.
 *
 * need (optional): on SNI_NEED_MORE, a total length greater than len and
 * at most SNI_PEEK_MAX that every valid ClientHello these bytes begin
 * with reaches at least (exact once the hello's length is known and its
 * last record has begun), so a caller may wait for that many bytes (e.g.
 * SO_RCVLOWAT) before calling again; a malformed one may be found
 * SNI_BAD sooner. 0 on every other result.
 */
enum sni_result sni_parse(const uint8_t *buf, size_t len,
			  char name[SNI_NAME_MAX + 1], size_t *need);

/* "need_more", "found", "none", "not_tls", "bad"; "?" for anything else. */
const char *sni_result_name(enum sni_result r);

#endif /* EDGE_SNI_H */
