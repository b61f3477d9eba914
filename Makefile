# edge - one non-recursive Makefile, everything built into $(B)/.
#
#   make            build BPF objects, skeletons, edgectl, tests
#   make check      install missing deps, lint, build normal + ASan/UBSan, run tests
#   make demo       install missing deps, build, run the demo
#   make vmtest KERNEL=6.1|6.12|all [CMD='...']   kernel-facing tests in VMs
#   make vmtest-selftest [KERNEL=6.1]              the VM runner's own checks
#   make bench-xdp  bench/xdp-drop
#   make bench-http bench/http (edged vs nginx vs HAProxy vs direct)
#   make bench-propagation bench/propagation (a route change: edged by
#                   NOTIFY vs nginx by reload)
#   make bench-splice bench/splice (a TCP route: edged's copy and sockmap
#                   movers vs HAProxy with splice(2) vs direct)
#   make bench-tls  bench/tls (TLS handshakes and HTTPS requests: edged
#                   vs nginx with the same certificates)
#   make bench-http2 bench/http2 (HTTP/2 over TLS with h2load: edged vs
#                   nginx vs HAProxy vs h2o, CPU per request, idle memory)
#   make bench-http3 bench/http3 (HTTP/3 with h3load: edged vs Caddy,
#                   requests/s, handshakes/s, CPU per request)
#   make bench-wake bench/wake (an on-demand environment: port open to
#                   first response, a storm of requests on a sleeping one)
#   make lint       clang-format check, cppcheck, shellcheck
#   make install    edged, edgectl, the example configuration (never over an
#                   existing one), systemd units, logrotate, man pages, bash
#                   completion, docs (PREFIX,
#                   DESTDIR, sysconfdir, sbindir, mandir...: docs/operations.md)
#   make man        the man pages edged.8, edgectl.8, edge.conf.5 in $(B)/man
#                   (pandoc, from docs/man/ and docs/)
#   make uninstall  what make install put there (a changed edge.conf stays)
#   make deb        the Debian package edge_*.deb, in ../ (debian/)
#   make deb-check  make deb, then lintian and the package's contents
#                   (tests/deb/test_deb.sh; not part of make check)

B        ?= build
# plain `make` builds everything (the variant block below defines rules
# before `all`, so the default goal is named)
.DEFAULT_GOAL := all
CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
ARCH     := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)

WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
            -Wmissing-prototypes -Wpointer-arith -Wvla -Wundef \
            -Wwrite-strings -Wnull-dereference -Wimplicit-fallthrough
CFLAGS   ?= -O2 -g
PG_INC   := $(or $(shell pg_config --includedir 2>/dev/null),/usr/include/postgresql)
ECFLAGS  := -std=gnu11 $(WARN) -D_GNU_SOURCE -fstack-protector-strong \
            -D_FORTIFY_SOURCE=2 -fPIE -Ibpf -Iuserspace/lib -I$(B) -I$(PG_INC)
LDFLAGS  ?=
ELDFLAGS := -pie -Wl,-z,relro,-z,now
LIBS     := -lxdp -lbpf -lelf -lz -ljansson -lpq
# the daemon's modules (userspace/*.c) also need these
DLIBS    := -luring -lconfig -lnghttp2 -lbrotlienc -lbrotlidec -lzstd -levent -levent_pthreads -levent_openssl -lssl -lcrypto -lngtcp2_crypto_gnutls -lngtcp2 -lnghttp3 -lgnutls -lpthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -pthread)

SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
             -fno-sanitize-recover=all

BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
              -Ibpf $(if $(MULTIARCH),-I/usr/include/$(MULTIARCH))

# ---- sources ----------------------------------------------------------
BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(patsubst bpf/%.bpf.c,$(B)/%.bpf.o,$(BPF_SRCS))
BPF_SKELS  := $(patsubst bpf/%.bpf.c,$(B)/%.skel.h,$(BPF_SRCS))
LIB_SRCS   := $(wildcard userspace/lib/*.c)
CLI_SRCS   := $(wildcard cli/*.c)
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
BPFT_SRCS  := $(wildcard tests/bpf/test_*.c)
# Check suites against a real PostgreSQL (tests/pg/test_*.sh run them)
PGT_SRCS   := $(wildcard tests/pg/test_*.c)
TOOL_SRCS  := $(filter-out %.bpf.c,$(wildcard tests/tools/*.c bench/*/*.c))
TOOL_BPF_SRCS := $(wildcard tests/tools/*.bpf.c bench/*/*.bpf.c)
# edged: userspace/*.c, one file per stage; all but edged.c (main) also
# go into libedged.a so that unit tests can link any stage
D_SRCS     := $(filter-out userspace/edged.c,$(wildcard userspace/*.c userspace/pg/*.c))
EDGED_MAIN := $(wildcard userspace/edged.c)
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.c)
HDRS       := $(wildcard bpf/*.h userspace/*.h userspace/pg/*.h userspace/lib/*.h cli/*.h tests/*/*.h) \
              $(B)/pg_migrations.h $(B)/challenge_page.h
# the schema migrations, embedded in edged and edgectl (scripts/sql2c)
PG_MIGRATIONS := $(sort $(wildcard userspace/pg/migrations/*.sql))
BENCH_HDRS := $(wildcard bench/*.h)

# $(call variant,DIR,EXTRA_CFLAGS): objects and binaries of one build variant
define variant
$(1)/lib/%.o: userspace/lib/%.c $(HDRS) $(BPF_SKELS) | $(1)/lib
	$$(CC) $$(ECFLAGS) $$(CFLAGS) $(2) -c -o $$@ $$<
$(1)/cli/%.o: cli/%.c $(HDRS) $(BPF_SKELS) | $(1)/cli
	$$(CC) $$(ECFLAGS) $$(CFLAGS) $(2) -c -o $$@ $$<
$(1)/d/%.o: userspace/%.c $(HDRS) $(BPF_SKELS) | $(1)/d
	@mkdir -p $$(@D)
	$$(CC) $$(ECFLAGS) -Iuserspace -Iuserspace/pg $$(CFLAGS) $(2) -c -o $$@ $$<
$(1)/libedge.a: $(patsubst userspace/lib/%.c,$(1)/lib/%.o,$(LIB_SRCS))
	rm -f $$@ && ar rcs $$@ $$^
$(1)/libedged.a: $(patsubst userspace/%.c,$(1)/d/%.o,$(D_SRCS))
	rm -f $$@ && ar rcs $$@ $$^
$(1)/edged: $(patsubst userspace/%.c,$(1)/d/%.o,$(EDGED_MAIN)) $(1)/libedged.a $(1)/libedge.a
	$$(CC) $$(CFLAGS) $(2) $$(ELDFLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LIBS) $$(DLIBS)
$(1)/edgectl: $(patsubst cli/%.c,$(1)/cli/%.o,$(CLI_SRCS)) $(1)/libedge.a
	$$(CC) $$(CFLAGS) $(2) $$(ELDFLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LIBS)
$(1)/tests/%: tests/unit/%.c $(1)/libedged.a $(1)/libedge.a $(HDRS) | $(1)/tests
	$$(CC) $$(ECFLAGS) -Iuserspace -Iuserspace/pg $$(CFLAGS) $(2) $$(ELDFLAGS) -o $$@ $$< $(1)/libedged.a $(1)/libedge.a $$(LIBS) $$(DLIBS) $$(CHECK_LIBS)
$(1)/tests/%: tests/pg/%.c $(1)/libedged.a $(1)/libedge.a $(HDRS) | $(1)/tests
	$$(CC) $$(ECFLAGS) -Iuserspace -Iuserspace/pg -Itests/unit $$(CFLAGS) $(2) $$(ELDFLAGS) -o $$@ $$< $(1)/libedged.a $(1)/libedge.a $$(LIBS) $$(DLIBS) $$(CHECK_LIBS)
$(1)/tests/%: tests/bpf/%.c $(1)/libedge.a $(HDRS) $(BPF_SKELS) | $(1)/tests
	$$(CC) $$(ECFLAGS) $$(CFLAGS) $(2) $$(ELDFLAGS) -o $$@ $$< $(1)/libedge.a $$(LIBS) $$(CHECK_LIBS)
$(1)/lib $(1)/cli $(1)/d $(1)/tests:
	mkdir -p $$@
$(1)_BINS := $(1)/edgectl $(if $(EDGED_MAIN),$(1)/edged) \
   $(patsubst tests/unit/%.c,$(1)/tests/%,$(UNIT_SRCS)) \
   $(patsubst tests/bpf/%.c,$(1)/tests/%,$(BPFT_SRCS)) \
   $(patsubst tests/pg/%.c,$(1)/tests/%,$(PGT_SRCS))
endef

$(eval $(call variant,$(B),))
$(eval $(call variant,$(B)/asan,$(SAN_FLAGS)))

# helper programs for tests and benchmarks (normal build only), and the
# BPF objects tests and benchmarks load with ip(8), tc or bpftool (no
# skeleton)
TOOLS := $(foreach s,$(TOOL_SRCS),$(B)/tools/$(basename $(notdir $(s)))) \
         $(foreach s,$(TOOL_BPF_SRCS),$(B)/tools/$(notdir $(s:.c=.o)))
$(B)/tools/pg_listen: tests/tools/pg_listen.c $(HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lpq
$(B)/tools/pgdb_probe: tests/tools/pgdb_probe.c $(B)/libedge.a $(HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< $(B)/libedge.a $(LIBS)
$(B)/tools/ktls_sockmap_probe: tests/tools/ktls_sockmap_probe.c | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lbpf
$(B)/tools/tlshs: bench/tls/tlshs.c $(BENCH_HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lpthread -lssl -lcrypto
# QUIC clients: ngtcp2 with GnuTLS, nghttp3
$(B)/tools/h3evil: tests/tools/h3evil.c | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lngtcp2_crypto_gnutls -lngtcp2 -lnghttp3 -lgnutls
$(B)/tools/h3load: bench/http3/h3load.c $(BENCH_HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lngtcp2_crypto_gnutls -lngtcp2 -lnghttp3 -lgnutls
# the ACME client's driver links edged's modules (acme.c), in both
# builds (tests/integration/test_acme_client.sh runs both)
$(B)/tools/acme_get: tests/tools/acme_get.c $(B)/libedged.a $(B)/libedge.a $(HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) -Iuserspace $(CFLAGS) $(ELDFLAGS) -o $@ $< $(B)/libedged.a $(B)/libedge.a $(LIBS) $(DLIBS)
$(B)/asan/tools/acme_get: tests/tools/acme_get.c $(B)/asan/libedged.a $(B)/asan/libedge.a $(HDRS) | $(B)/asan/tools
	$(CC) $(ECFLAGS) -Iuserspace $(CFLAGS) $(SAN_FLAGS) $(ELDFLAGS) -o $@ $< $(B)/asan/libedged.a $(B)/asan/libedge.a $(LIBS) $(DLIBS)
$(B)/tools/%: tests/tools/%.c $(HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lpthread
$(B)/tools/%: bench/*/%.c $(HDRS) $(BENCH_HDRS) | $(B)/tools
	$(CC) $(ECFLAGS) $(CFLAGS) $(ELDFLAGS) -o $@ $< -lpthread -lpq
$(B)/tools/%.bpf.o: bench/*/%.bpf.c | $(B)/tools
	$(CLANG) $(BPF_CFLAGS) -c -o $@ $<
$(B)/tools/%.bpf.o: tests/tools/%.bpf.c | $(B)/tools
	$(CLANG) $(BPF_CFLAGS) -c -o $@ $<
$(B)/tools $(B)/asan/tools:
	mkdir -p $@

# the commit edged --version names: rewritten only when it changes, so
# that only the files that include it are rebuilt after a commit
$(B)/edge_commit.h: FORCE | $(B)
	@c=$$(git -C "$(CURDIR)" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown); \
	printf '#define EDGE_COMMIT "%s"\n' "$$c" > $@.tmp; \
	cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(B)/d/edged.o $(B)/asan/d/edged.o: $(B)/edge_commit.h
.PHONY: FORCE
FORCE:

$(B)/pg_migrations.h: $(PG_MIGRATIONS) scripts/sql2c | $(B)
	scripts/sql2c $(PG_MIGRATIONS) > $@.tmp && mv $@.tmp $@

# the challenge page (challenge.h), embedded in edged
$(B)/challenge_page.h: userspace/challenge_page.html scripts/text2c | $(B)
	scripts/text2c challenge_page_html $< > $@.tmp && mv $@.tmp $@

# ---- BPF ----------------------------------------------------------------
$(B)/%.bpf.o: bpf/%.bpf.c bpf/edge_maps.h | $(B)
	$(CLANG) $(BPF_CFLAGS) -c -o $@ $<
$(B)/%.skel.h: $(B)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $(subst -,_,$*) > $@.tmp && mv $@.tmp $@
$(B):
	mkdir -p $@

# ---- top-level targets ------------------------------------------------------
.PHONY: man all asan fuzz fuzz-build check demo deps vmtest vmtest-selftest bench-xdp bench-http bench-propagation bench-splice bench-tls bench-http2 bench-http3 bench-wake profile-http lint format clean install uninstall deb deb-check
all: $(BPF_OBJS) $(BPF_SKELS) $($(B)_BINS) $(TOOLS)
asan: $(BPF_OBJS) $(BPF_SKELS) $($(B)/asan_BINS) $(B)/asan/tools/acme_get

# libFuzzer targets: tests/fuzz/fuzz_NAME.c fuzzes userspace/NAME.c.
# make fuzz runs each for FUZZ_TIME seconds on its corpus
# (tests/fuzz/corpus/NAME); make check runs them briefly (tests/run).
FUZZ_TIME ?= 60
FUZZ_BINS := $(patsubst tests/fuzz/fuzz_%.c,$(B)/fuzz/fuzz_%,$(FUZZ_SRCS))
$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c userspace/%.c $(HDRS) | $(B)/fuzz
	$(CLANG) -std=gnu11 -g -O1 -D_GNU_SOURCE -Ibpf -Iuserspace -Iuserspace/lib \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $@ $< userspace/$*.c
$(B)/fuzz:
	mkdir -p $@
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	@for f in $(FUZZ_BINS); do n=$${f##*/fuzz_}; mkdir -p $(B)/fuzz/corpus-$$n; \
	  echo "fuzz: $$n for $(FUZZ_TIME) s"; \
	  $$f -max_total_time=$(FUZZ_TIME) $(B)/fuzz/corpus-$$n tests/fuzz/corpus/$$n || exit 1; done

deps:
	scripts/install-deps

check:
	scripts/install-deps --lint
	$(MAKE) lint
	$(MAKE) all asan fuzz-build
	tests/run --jobs 2

demo:
	scripts/install-deps
	$(MAKE) all
	scripts/demo

vmtest:
	scripts/install-deps --vmtest
	$(MAKE) all
	vmtest/run $(or $(KERNEL),all) $(if $(CMD),-- $(CMD))

vmtest-selftest:
	scripts/install-deps --vmtest
	vmtest/selftest $(or $(KERNEL),6.1)

bench-xdp:
	scripts/install-deps --bench
	$(MAKE) all
	bench/xdp-drop/run

bench-http:
	scripts/install-deps --bench
	$(MAKE) all
	bench/http/run

bench-propagation:
	scripts/install-deps --bench
	$(MAKE) all
	bench/propagation/run

bench-tls:
	scripts/install-deps --bench
	$(MAKE) all
	bench/tls/run

bench-http2:
	scripts/install-deps --bench
	$(MAKE) all
	bench/http2/run

bench-http3:
	scripts/install-deps --bench
	$(MAKE) all
	bench/http3/run

profile-http:
	scripts/install-deps --bench
	$(MAKE) all
	bench/profile/run --config bare
	bench/profile/run --config logged

bench-wake:
	scripts/install-deps --bench
	$(MAKE) all
	bench/wake/run

bench-splice:
	scripts/install-deps --bench
	$(MAKE) all
	bench/splice/run

C_FILES := $(wildcard bpf/*.c bpf/*.h userspace/*.c userspace/*.h userspace/*/*.c userspace/*/*.h cli/*.c cli/*.h tests/*/*.c tests/*/*.h bench/*.h bench/*/*.c)
SH_FILES := scripts/install-deps scripts/demo scripts/sql2c tests/run debian/edge.postinst debian/edge.prerm debian/edge.postrm dist/bash-completion/edgectl dist/bash-completion/edged $(wildcard tests/*.sh tests/*/*.sh vmtest/run vmtest/selftest vmtest/*.sh bench/*/run .ci/run)
lint:
	scripts/install-deps --lint
	clang-format --dry-run --Werror $(C_FILES)
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
	  --inline-suppr -I bpf -I userspace/lib --suppress=missingIncludeSystem \
	  userspace cli tests/unit tests/bpf
	shellcheck -x $(SH_FILES)

format:
	clang-format -i $(C_FILES)

clean:
	rm -rf $(B)

# ---- install ----------------------------------------------------------------
# The BPF programs are compiled into edged and edgectl (bpftool's
# skeletons): there are no objects to install and no path to find them by.
# The daemon's own paths (/run/edge, /var/lib/edge, /sys/fs/bpf/edge) are
# the FHS's whatever PREFIX is; the configuration file is named by -c.
PREFIX     ?= /usr/local
prefix     ?= $(PREFIX)
exec_prefix ?= $(prefix)
sbindir    ?= $(exec_prefix)/sbin
bindir     ?= $(exec_prefix)/bin
datarootdir ?= $(prefix)/share
mandir     ?= $(datarootdir)/man
docdir     ?= $(datarootdir)/doc/edge
sysconfdir ?= $(if $(filter /usr,$(prefix)),/etc,$(prefix)/etc)
unitdir    ?= $(if $(filter /usr,$(prefix)),/usr/lib,$(prefix)/lib)/systemd/system
logrotatedir ?= $(sysconfdir)/logrotate.d
bashcompdir ?= $(datarootdir)/bash-completion/completions
INSTALL    ?= install
# the binaries installed (the ASan build's with EDGED_BIN=build/asan/edged)
EDGED_BIN   ?= $(B)/edged
EDGECTL_BIN ?= $(B)/edgectl
# man pages (make man) and bash completion
MAN8 := $(patsubst docs/man/%.md,$(B)/man/%,$(wildcard docs/man/*.8.md))
MAN5 := $(patsubst docs/man/%.md,$(B)/man/%,$(wildcard docs/man/*.5.md))
BASHCOMP := $(wildcard dist/bash-completion/*)
DOCS := README.md $(wildcard docs/*.md)
UNITS := $(wildcard dist/systemd/*.service)
# the units name /usr/sbin and /etc/edge: made the install's
UNIT_SED := s|/usr/sbin/|$(sbindir)/|g; s|/etc/edge/|$(sysconfdir)/edge/|g; s|/usr/share/doc/edge/|$(docdir)/|g

install: $(EDGED_BIN) $(EDGECTL_BIN) $(MAN8) $(MAN5)
	$(INSTALL) -d $(DESTDIR)$(sbindir) $(DESTDIR)$(sysconfdir)/edge \
	  $(DESTDIR)$(unitdir) $(DESTDIR)$(logrotatedir) $(DESTDIR)$(docdir)
	$(INSTALL) -m 0755 $(EDGED_BIN) $(DESTDIR)$(sbindir)/edged
	$(INSTALL) -m 0755 $(EDGECTL_BIN) $(DESTDIR)$(sbindir)/edgectl
	@if [ -e $(DESTDIR)$(sysconfdir)/edge/edge.conf ]; then \
	  echo "install: $(DESTDIR)$(sysconfdir)/edge/edge.conf exists: left as it is"; \
	else \
	  echo "$(INSTALL) -m 0644 examples/edge.conf $(DESTDIR)$(sysconfdir)/edge/edge.conf"; \
	  $(INSTALL) -m 0644 examples/edge.conf $(DESTDIR)$(sysconfdir)/edge/edge.conf; \
	fi
	for u in $(UNITS); do \
	  sed '$(UNIT_SED)' $$u > $(DESTDIR)$(unitdir)/$${u##*/}.tmp && \
	  chmod 0644 $(DESTDIR)$(unitdir)/$${u##*/}.tmp && \
	  mv $(DESTDIR)$(unitdir)/$${u##*/}.tmp $(DESTDIR)$(unitdir)/$${u##*/} || exit 1; \
	done
	$(INSTALL) -m 0644 dist/logrotate/edge $(DESTDIR)$(logrotatedir)/edge
	$(INSTALL) -m 0644 $(DOCS) $(DESTDIR)$(docdir)/
	$(INSTALL) -d $(DESTDIR)$(mandir)/man8 $(DESTDIR)$(mandir)/man5 $(DESTDIR)$(bashcompdir)
	$(INSTALL) -m 0644 $(MAN8) $(DESTDIR)$(mandir)/man8/
	$(INSTALL) -m 0644 $(MAN5) $(DESTDIR)$(mandir)/man5/
	$(INSTALL) -m 0644 $(BASHCOMP) $(DESTDIR)$(bashcompdir)/

uninstall:
	rm -f $(DESTDIR)$(sbindir)/edged $(DESTDIR)$(sbindir)/edgectl \
	  $(addprefix $(DESTDIR)$(unitdir)/,$(notdir $(UNITS))) \
	  $(DESTDIR)$(logrotatedir)/edge \
	  $(addprefix $(DESTDIR)$(docdir)/,$(notdir $(DOCS))) \
	  $(addprefix $(DESTDIR)$(mandir)/man8/,$(notdir $(MAN8))) \
	  $(addprefix $(DESTDIR)$(mandir)/man5/,$(notdir $(MAN5))) \
	  $(addprefix $(DESTDIR)$(bashcompdir)/,$(notdir $(BASHCOMP)))
	-rmdir $(DESTDIR)$(docdir) 2>/dev/null
	@if cmp -s examples/edge.conf $(DESTDIR)$(sysconfdir)/edge/edge.conf; then \
	  rm -f $(DESTDIR)$(sysconfdir)/edge/edge.conf; \
	  rmdir $(DESTDIR)$(sysconfdir)/edge 2>/dev/null || true; \
	elif [ -e $(DESTDIR)$(sysconfdir)/edge/edge.conf ]; then \
	  echo "uninstall: $(DESTDIR)$(sysconfdir)/edge/edge.conf was changed: left as it is"; \
	fi

# ---- man pages ------------------------------------------------------------------
# edged.8, edgectl.8 and edge.conf.5 from docs/man/*.md, which take their
# text from docs/*.md (docs/man/man.lua; pandoc: scripts/install-deps)
EDGE_VERSION := $(shell sed -n 's/^\#define EDGE_VERSION "\(.*\)"/\1/p' userspace/version.h)
$(B)/man/%: docs/man/%.md docs/man/man.lua $(wildcard docs/*.md) | $(B)/man
	pandoc -f markdown -t man -s --lua-filter=docs/man/man.lua \
	  -M header="edge manual" -M footer="edge $(EDGE_VERSION)" -o $@.tmp $<
	mv $@.tmp $@
$(B)/man:
	mkdir -p $@
man: $(MAN8) $(MAN5)

# ---- Debian package -----------------------------------------------------------
# dpkg-buildpackage runs on a copy of the tree in $(B)/deb/edge (debian/rules
# runs make with PREFIX=/usr into debian/edge), so that the .deb, .changes
# and .buildinfo land in $(B)/deb, not beside the checkout.
DEB_OUT := $(B)/deb
deb:
	scripts/install-deps --deb
	rm -rf $(DEB_OUT) && mkdir -p $(DEB_OUT)/edge
	tar -c --exclude=./build --exclude=./.git --exclude=./debian/edge \
	  --exclude=./debian/.debhelper . | tar -x -C $(DEB_OUT)/edge
	cd $(DEB_OUT)/edge && DEB_BUILD_OPTIONS="parallel=$$(nproc) $${DEB_BUILD_OPTIONS:-}" \
	  dpkg-buildpackage -b -us -uc
	@ls -l $(DEB_OUT)/*.deb

deb-check: deb
	tests/deb/test_deb.sh
