/* SPDX-License-Identifier: BSD-2-Clause */
/* version.h - edge's version, as edged --version, edge_hosts and the
 * schema's applied_by show it. */
#ifndef EDGE_VERSION_H
#define EDGE_VERSION_H

#include <stdio.h>

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.1.0"
#endif

/* Write to f one line "NAME VERSION" for each library edged runs with,
 * its version as the library reports it at run time where it can. */
void version_print_libs(FILE *f);

#endif /* EDGE_VERSION_H */
