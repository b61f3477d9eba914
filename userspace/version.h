/* SPDX-License-Identifier: BSD-2-Clause */
/* version.h - edge's version, as edged --version, edge_hosts and the
 * schema's applied_by show it. */
#ifndef EDGE_VERSION_H
#define EDGE_VERSION_H

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.1.0"
#endif

#endif /* EDGE_VERSION_H */
