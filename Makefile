# SPDX-License-Identifier: Apache-2.0
# dstack-healthd. `make` builds build/dstack-healthd; `make asan` the same with
# AddressSanitizer and UBSan in build-asan/; `make test` runs every test with
# both; `make run` serves a verdict from the example config.
VERSION := 0.1.0
# Every git call names this checkout as safe: built as root in a container
# from a checkout mounted from the host (another owner), git would otherwise
# refuse it ("dubious ownership"), and the image and the package would lose
# the commit they are built from. Its config is trusted no more than its
# Makefile, which runs anyway.
GIT := git -c safe.directory=$(CURDIR)
REV := git:$(shell $(GIT) rev-parse --verify -q HEAD 2>/dev/null | cut -c1-20)
ifeq ($(REV),git:)
REV := git:unknown
endif

.DEFAULT_GOAL := all
BUILD ?= build
CC ?= cc
PKG_CONFIG ?= pkg-config
# protoc-c runs on the build machine (in a cross build too): the .c it
# writes is the same for every target.
PROTOC_C ?= protoc-c

# What a distribution or an image build passes (CC, CFLAGS, CPPFLAGS,
# LDFLAGS, LDLIBS, PKG_CONFIG) is added to after the project's own flags,
# never replaced by them, so `make CFLAGS=-O1` keeps -std=c11 and the
# hardening. Warnings are errors only when asked (WERROR=1, as `make test`
# does): a newer compiler must not break a distribution's build.
CFLAGS ?= -O2 -g
WERROR ?= 0
# -Wno-missing-field-initializers: `struct errbuf err = { "" }` is the house
# idiom, and the error kind beside the message starts zeroed (C11 6.7.9).
WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes \
	-Wstrict-prototypes -Wno-unused-parameter -Wno-missing-field-initializers
ifeq ($(WERROR),1)
WARN += -Werror
endif
# dpkg-buildflags and Yocto (in CC) set _FORTIFY_SOURCE themselves; defining
# it twice with another value would warn.
ifeq ($(findstring _FORTIFY_SOURCE,$(CC) $(CPPFLAGS) $(CFLAGS)),)
HARDEN := -D_FORTIFY_SOURCE=2
endif
HARDEN += -fstack-protector-strong -fPIE
ifeq ($(SAN),1)
SAN_FLAGS := -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
SANLD := -fsanitize=address,undefined
endif

# Build dependencies, asked of $(PKG_CONFIG) once per build folder (and again
# when PKG_CONFIG or its search path changes). mbedtls ships no .pc file in
# Debian 12. Nothing here installs anything: on a fresh machine, `make deps`.
PKGS := libmicrohttpd libprotobuf-c libsystemd
PKG_ID := $(PKG_CONFIG) $(PKG_CONFIG_PATH) $(PKG_CONFIG_LIBDIR) $(PKG_CONFIG_SYSROOT_DIR)
$(BUILD)/pkg-config.id: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' '$(PKG_ID)' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(BUILD)/config.mk: $(BUILD)/pkg-config.id
	@$(PKG_CONFIG) --exists $(PKGS) || { $(PKG_CONFIG) --print-errors --exists $(PKGS); \
		echo "make: missing build dependencies; 'make deps' installs them (as root on Debian)" >&2; \
		exit 1; }
	@{ echo "PKG_CFLAGS := $$($(PKG_CONFIG) --cflags $(PKGS))"; \
	   echo "PKG_LIBS := $$($(PKG_CONFIG) --libs $(PKGS)) -lmbedtls -lmbedx509 -lmbedcrypto -lpthread -lm"; \
	} > $@.tmp && mv $@.tmp $@
# The targets a person runs on a fresh machine install the dependencies
# first and build in a sub-make, so they must not need them yet.
NOCONFIG_GOALS := clean deps image-deps test run asan bench fuzz fuzz-build fuzz-smoke deb uninstall \
	install-front
ifneq ($(if $(MAKECMDGOALS),$(filter-out $(NOCONFIG_GOALS),$(MAKECMDGOALS)),all),)
include $(BUILD)/config.mk
endif

# jsmn's settings, once for every translation unit: strict mode (primitives
# must be true, false, null or numbers, followed by a delimiter), and parent
# links, without which finding the enclosing token after every closing
# bracket scans back over every token before it (quadratic in a Docker list
# of many containers). The second changes the layout of jsmntok_t, so no
# file may set it on its own.
JSMN_DEFS := -DJSMN_STRICT -DJSMN_PARENT_LINKS
HD_CPPFLAGS := -D_GNU_SOURCE -I. -I$(BUILD)/gen $(JSMN_DEFS) \
	-DHEALTHD_VERSION='"$(VERSION)"' $(PKG_CFLAGS)
# Bit for bit the same binary from any folder (issue 28 §2;
# docs/image-builder.md, "Reproducible builds"): the source folder becomes "."
# and the build folder "build" in the debug information, the build id that
# hashes it, and __FILE__ (the generated protobuf code's asserts), wherever
# either lies. A caller's own map (dpkg's fixfilepath, Yocto's
# DEBUG_PREFIX_MAP) comes after these in CFLAGS and wins for the folders it
# names.
REPRO := -ffile-prefix-map=$(CURDIR)=. -ffile-prefix-map=$(abspath $(BUILD))=build
HD_CFLAGS := -std=c11 $(WARN) $(HARDEN) $(SAN_FLAGS) $(REPRO) -MMD -MP
HD_LDFLAGS := -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(SANLD)
COMPILE = $(CC) $(HD_CPPFLAGS) $(CPPFLAGS) $(HD_CFLAGS) $(CFLAGS)
LINK = $(CC) $(HD_LDFLAGS) $(LDFLAGS)
LIBS = $(PKG_LIBS) $(LDLIBS)

# Sorted, so that the objects are archived and linked in one order whatever
# order the file system lists them in.
PROTOS := $(sort $(wildcard rpc/*.proto probe/*.proto))
GEN_C := $(addprefix $(BUILD)/gen/,$(notdir $(PROTOS:.proto=.pb-c.c)))
GEN_H := $(GEN_C:.c=.h)
LIB_SRCS := $(sort $(filter-out agent/main.c,$(wildcard base/*.c agent/*.c probe/*.c rpc/*.c runtime/*.c statusfile/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(GEN_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
TEST_HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))

.PHONY: all asan test run clean deps
.SECONDARY:
all: $(BUILD)/dstack-healthd $(TEST_BINS) $(TEST_HELPERS)

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 CFLAGS="-O1 -g" all

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: rpc/%.proto $(BUILD)/config.mk
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --c_out=$(BUILD)/gen -Irpc $<

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: probe/%.proto $(BUILD)/config.mk
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --c_out=$(BUILD)/gen -Iprobe $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(filter-out -Wmissing-prototypes,$(COMPILE)) -c -o $@ $<

# The revision lives in a generated header that is rewritten only when it
# changes, so that every object that shows it is rebuilt then, and no other
# build is disturbed.
$(BUILD)/gen/rev.h: FORCE
	@mkdir -p $(BUILD)/gen
	@printf '#define HEALTHD_REV "%s"\n' '$(REV)' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/%.o: %.c | $(GEN_H) $(BUILD)/gen/rev.h
	@mkdir -p $(dir $@)
	$(COMPILE) -c -o $@ $<

$(BUILD)/libhealthd.a: $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/dstack-healthd: $(BUILD)/obj/agent/main.o $(BUILD)/libhealthd.a
	$(LINK) -o $@ $^ $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libhealthd.a
	@mkdir -p $(dir $@)
	$(LINK) -o $@ $^ $(LIBS)

# libnghttp2, test-only: test_hpack checks probe/hpack.c against its
# inflater and deflater (fuzz/hpack_oracle.h); the agent never links it.
# Without libnghttp2-dev those points skip.
NGHTTP2_LIBS = $(shell $(PKG_CONFIG) --silence-errors --libs libnghttp2)
$(BUILD)/obj/tests/unit/test_hpack.o: CPPFLAGS += $(if $(NGHTTP2_LIBS),-DHAVE_NGHTTP2)
$(BUILD)/tests/test_hpack: LDLIBS += $(NGHTTP2_LIBS)

$(BUILD)/tests/helpers/%: $(BUILD)/obj/tests/helpers/%.o $(BUILD)/libhealthd.a
	@mkdir -p $(dir $@)
	$(LINK) -o $@ $^ $(LIBS)

deps:
	build-aux/deps.sh build image test fuzz cross

# What `make image` alone needs (the build's packages, python3 and git): on
# a fresh Debian 12 where make is not installed yet, run the script itself.
.PHONY: image-deps
image-deps:
	build-aux/deps.sh image

# Everything, with the sanitizer build too, warnings as errors in both; ends
# with "N passed, N failed". Each phase prints its seconds as it ends
# ("== phase NAME: N s"), and tests/run repeats them with its own rounds'
# just before the closing line (HEALTHD_PHASES), where a CI log is read.
# One recipe line a phase: `make -n test` runs the lines that name $(MAKE),
# and must not run tests/run with them.
TEST_PHASES = $(BUILD)/test-phases
# The two builds use every core (the objects do not depend on the order).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
phase = t=$$(date +%s); $(1) && d=$$(($$(date +%s) - t)) && \
	echo "== phase $(2): $$d s" && echo "$(2) $$d s" >>$(TEST_PHASES)
test:
	@mkdir -p $(BUILD) && : >$(TEST_PHASES)
	@$(call phase,build-aux/deps.sh build image test fuzz cross,deps)
	@$(call phase,$(MAKE) --no-print-directory -j$(TEST_JOBS) WERROR=1 all,build)
	@$(call phase,$(MAKE) --no-print-directory -j$(TEST_JOBS) WERROR=1 asan,asan build)
	@HEALTHD_PHASES="$$(paste -sd, $(TEST_PHASES) | sed 's/,/, /g')" tests/run build build-asan

run:
	@build-aux/deps.sh build
	@$(MAKE) --no-print-directory all
	@build-aux/run-example.sh $(BUILD)/dstack-healthd

clean:
	rm -rf build build-asan build-fuzz

# Installation, as a distribution lays it out: `make install PREFIX=/usr
# DESTDIR=/stage`. The daemon goes to sbin; the units name whatever SBINDIR
# is. The example config is documentation, not /etc/dstack/healthd.json: the
# defaults already fit a dstack guest, and a file there would override
# $DOCKER_HOST for no gain.
PREFIX ?= /usr
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/dstack-healthd
# health.proto, for `protoc --decode` on the machine the agent runs on.
DATADIR ?= $(PREFIX)/share/dstack-healthd
ifndef SYSTEMDUNITDIR
SYSTEMDUNITDIR := $(shell $(PKG_CONFIG) --variable=systemdsystemunitdir systemd 2>/dev/null)
ifeq ($(SYSTEMDUNITDIR),)
SYSTEMDUNITDIR := /lib/systemd/system
endif
endif
INSTALL ?= install
# Prometheus alerting rules for the agent's metrics (docs/operator.md,
# "Alerts"), for the operator's Prometheus: beside health.proto.
ALERT_RULES := packaging/prometheus/dstack-healthd.rules.yml
UNITS := systemd/dstack-healthd.service systemd/dstack-healthd.socket \
	systemd/dstack-healthd-drain.service

.PHONY: install uninstall deb
install: $(BUILD)/dstack-healthd
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSTEMDUNITDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DATADIR)
	$(INSTALL) -m 0755 $(BUILD)/dstack-healthd $(DESTDIR)$(SBINDIR)/dstack-healthd
	for u in $(UNITS); do \
		sed 's|/usr/sbin/dstack-healthd|$(SBINDIR)/dstack-healthd|' $$u \
			>$(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}.tmp && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}.tmp && \
		mv $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}.tmp $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/} \
			|| exit 1; \
	done
	sed -e 's|/usr/share/doc/dstack\\-healthd|$(subst -,\\-,$(DOCDIR))|g' \
		-e 's|/usr/share/dstack\\-healthd|$(subst -,\\-,$(DATADIR))|g' \
		-e 's|/usr/sbin/dstack\\-healthd|$(subst -,\\-,$(SBINDIR))/dstack\\-healthd|g' \
		docs/dstack-healthd.8 >$(DESTDIR)$(MANDIR)/man8/dstack-healthd.8.tmp
	chmod 0644 $(DESTDIR)$(MANDIR)/man8/dstack-healthd.8.tmp
	mv $(DESTDIR)$(MANDIR)/man8/dstack-healthd.8.tmp $(DESTDIR)$(MANDIR)/man8/dstack-healthd.8
	$(INSTALL) -m 0644 dstack.example.json $(DESTDIR)$(DOCDIR)/examples/healthd.json
	$(INSTALL) -m 0644 rpc/health.proto $(DESTDIR)$(DATADIR)/health.proto
	$(INSTALL) -m 0644 $(ALERT_RULES) $(DESTDIR)$(DATADIR)/

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/dstack-healthd \
		$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(notdir $(UNITS))) \
		$(DESTDIR)$(MANDIR)/man8/dstack-healthd.8 \
		$(DESTDIR)$(DOCDIR)/examples/healthd.json $(DESTDIR)$(DATADIR)/health.proto \
		$(DESTDIR)$(DATADIR)/$(notdir $(ALERT_RULES))
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) $(DESTDIR)$(DATADIR) 2>/dev/null
	@# install-front's files, unless changed since: like a conffile, an
	@# edited one (or one that install-front did not write) is left.
	for f in $(FRONT_FILES); do \
		! cmp -s $$f $(DESTDIR)$(SYSCONFDIR)/dstack/$${f##*/} || \
			rm -f $(DESTDIR)$(SYSCONFDIR)/dstack/$${f##*/} || exit 1; \
	done
	-rmdir $(DESTDIR)$(SYSCONFDIR)/dstack 2>/dev/null

# The front of the agent port in a dstack guest image (docs/image-builder.md,
# "In a dstack guest image"): the guest agent's listener moved to
# 127.0.0.1:18090 and the agent's config that relays to it. Both under
# SYSCONFDIR (not PREFIX): the guest agent reads /etc/dstack/dstack.toml, the
# agent /etc/dstack/healthd.json. Apart from `install`, so that a plain install
# changes no other program's port; the Debian package dstack-healthd-front and
# the recipe's ${PN}-front ship it.
SYSCONFDIR ?= /etc
FRONT_FILES := packaging/front/dstack.toml packaging/front/healthd.json
.PHONY: install-front
install-front:
	$(INSTALL) -d $(DESTDIR)$(SYSCONFDIR)/dstack
	$(INSTALL) -m 0644 $(FRONT_FILES) $(DESTDIR)$(SYSCONFDIR)/dstack/

# The Debian package, built from a copy of the tracked and new files in a
# temporary folder (dpkg-buildpackage writes into the parent of the source
# tree); only the .deb comes back, under $(BUILD)/: the tree's own build
# folders are neither used nor touched, and it says so. Our own make variables
# (BUILD=...) must not leak into the package's make. The same commit gives the
# same .deb bit for bit (docs/image-builder.md, "Reproducible builds"):
# SOURCE_DATE_EPOCH is the commit's time, and dpkg clamps the files' times to
# it. So it needs a git checkout with a commit. A tree that differs from its
# commit (edits, new files) still builds, since the tests install the package
# of work not yet committed; but it says so, and the agent is stamped
# git:<commit>-dirty, so that no such package passes for the commit's.
DEB_EPOCH = $(shell $(GIT) log -1 --format=%ct 2>/dev/null)
deb:
	@command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || \
		{ echo "make deb: needs dpkg-dev and debhelper" >&2; exit 1; }
	@v=$$(dpkg-parsechangelog -S Version) && [ "$$v" = "$(VERSION)" ] || \
		{ echo "make deb: debian/changelog is at $$v, the Makefile at $(VERSION)" >&2; exit 1; }
	@[ -n "$(DEB_EPOCH)" ] || { echo "make deb: needs a git checkout with a commit" \
		"(it copies the files git tracks, and stamps the commit's revision and time)" >&2; exit 1; }
	@mkdir -p $(BUILD)
	@set -e; rev='$(REV)'; changed=$$($(GIT) status --porcelain --untracked-files=all); \
	if [ -n "$$changed" ]; then \
		rev=$$rev-dirty; \
		echo "make deb: warning: the tree differs from commit $(REV) in" \
			"$$(printf '%s\n' "$$changed" | wc -l) file(s)" \
			"($$(printf '%s\n' "$$changed" | cut -c4- | head -n 3 | paste -sd' ')...):" \
			"the package holds them and is stamped $$rev, not the commit's own" >&2; \
	fi; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	echo "make deb: building from a copy of the tree in $$tmp (not in $(BUILD)/)"; \
	mkdir "$$tmp/dstack-healthd-$(VERSION)"; \
	$(GIT) ls-files -z -c -o --exclude-standard | \
		xargs -0 cp --parents -t "$$tmp/dstack-healthd-$(VERSION)"; \
	(cd "$$tmp/dstack-healthd-$(VERSION)" && \
		env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS HEALTHD_REV="$$rev" \
		SOURCE_DATE_EPOCH=$(DEB_EPOCH) \
		dpkg-buildpackage -us -uc -b >../build.log 2>&1) || \
		{ tail -n 30 "$$tmp/build.log" >&2; exit 1; }; \
	cp "$$tmp"/dstack-healthd_$(VERSION)_*.deb "$$tmp"/dstack-healthd-front_$(VERSION)_*.deb $(BUILD)/; \
	ls $(BUILD)/dstack-healthd_$(VERSION)_*.deb $(BUILD)/dstack-healthd-front_$(VERSION)_*.deb

# The sidecar's image (docs/app-developer.md, "The sidecar's image"), built
# without docker build: the agent as `make` builds it, the libraries it loads,
# their copyright files and the list of build inputs, packed as an OCI image
# archive (that Debian 12's `docker load` reads too) whose manifest digest is
# printed. The same commit and packages give the same bytes in any folder at
# any time: every time in it is the commit's (SOURCE_DATE_EPOCH). Outside a git
# checkout, pass SOURCE_DATE_EPOCH and COMMIT (tests/e2e/image.sh does). `make
# verify-image IMAGE=REF` builds it and compares with REF by digest, naming the
# first file that differs.
IMAGE_ARCHIVE := $(BUILD)/dstack-healthd-$(VERSION).oci.tar
SOURCE_DATE_EPOCH ?= $(DEB_EPOCH)
COMMIT ?= $(shell $(GIT) rev-parse --verify -q HEAD 2>/dev/null)
.PHONY: image verify-image
image: $(BUILD)/dstack-healthd
	@[ -n "$(SOURCE_DATE_EPOCH)" ] && [ -n "$(COMMIT)" ] || { echo "make image: needs a git" \
		"checkout with a commit, or SOURCE_DATE_EPOCH and COMMIT" >&2; exit 1; }
	@if changed=$$($(GIT) status --porcelain --untracked-files=all 2>/dev/null); then \
		tree=clean; [ -z "$$changed" ] || { tree="differs from the commit in $$(printf '%s\n' \
			"$$changed" | wc -l) file(s)"; echo "make image: warning: the tree $$tree:" \
			"build-inputs says so" >&2; }; \
	else tree="not a git checkout"; fi; \
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) COMMIT='$(COMMIT)' REV='$(REV)' VERSION='$(VERSION)' \
		TREE="$$tree" CC='$(CC)' build-aux/image.py $(IMAGE_ARCHIVE) $(BUILD)/dstack-healthd \
		>$(IMAGE_ARCHIVE).digest || exit 1; \
	echo "$(IMAGE_ARCHIVE): $$(cat $(IMAGE_ARCHIVE).digest)"

verify-image: image
	@[ -n "$(IMAGE)" ] || { echo "make verify-image: IMAGE=REF (e.g." \
		"docker://registry.example/dstack-healthd@sha256:...)" >&2; exit 1; }
	@build-aux/verify-image.sh $(IMAGE_ARCHIVE) '$(IMAGE)'

# Benchmarks (bench/README.md): as root on Debian it installs wrk, nginx and
# valgrind first; prints one table, also left in $(BUILD)/bench/results.txt.
# Figures, not a test: no number makes it fail.
BENCH_TOOLS := $(BUILD)/bench/refresh_bench $(BUILD)/bench/openloop
.PHONY: bench
bench:
	@build-aux/deps.sh build bench
	@$(MAKE) --no-print-directory all $(BENCH_TOOLS)
	@bench/run.sh $(BUILD)
	@# Docker events (issue 7): detection latency and the query rate under a
	@# storm, on a private dockerd. Exit 1 means a target was missed: a
	@# figure, not a failure; 2 is a setup error.
	@[ "$$BENCH_ONLY" = sidecar ] || [ "$$BENCH_ONLY" = probes ] || [ "$$BENCH_ONLY" = rollout ] || \
		{ bench/events.sh $(BUILD); rc=$$?; [ $$rc -le 1 ]; }
	@# The sidecar (issue 21): Docker's event to the verdict file, its idle
	@# memory in the container, the image's size; run alone by
	@# BENCH_ONLY=sidecar (bench/run.sh).
	@[ -n "$$BENCH_ONLY" ] || { bench/sidecar.sh $(BUILD); rc=$$?; [ $$rc -le 1 ]; }
	@# The agent's own probes (issue 27): detection, recovery, 50 probes'
	@# CPU and memory; run alone by BENCH_ONLY=probes (bench/run.sh).
	@[ -n "$$BENCH_ONLY" ] || bench/probes.sh $(BUILD)
	@# Rollouts through a stand-in of the gateway (issue 29): the table of
	@# failed requests per scenario and judge; run alone by
	@# BENCH_ONLY=rollout (bench/run.sh).
	@[ -n "$$BENCH_ONLY" ] || { bench/rollout.sh $(BUILD); rc=$$?; [ $$rc -le 1 ]; }

$(BUILD)/bench/refresh_bench: bench/refresh_bench.c $(BUILD)/libhealthd.a
	@mkdir -p $(dir $@)
	$(COMPILE) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libhealthd.a $(LIBS)

$(BUILD)/bench/openloop: bench/openloop.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(COMPILE) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $<

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# libFuzzer targets (fuzz/fuzz_*.c, see fuzz/README): the library is compiled
# again by clang with coverage, ASan and UBSan into $(FUZZ_BUILD), by the rules
# above. `make fuzz` runs each target FUZZ_SECONDS on its corpus (new inputs
# go to $(FUZZ_BUILD)/corpus, the repo's seeds stay as they are); `make
# fuzz-smoke` replays the seeds, then runs each FUZZ_SMOKE_SECONDS. Both
# print the libFuzzer seed they used; FUZZ_SEED=S (and FUZZ_RUNS=N) replays
# a run (fuzz/README).
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
# clang, unlike gcc, flags vprintf-style wrappers whose format is a va_list.
FUZZ_WARN := $(WARN) -Wno-format-nonliteral
# The slowest targets (inspect, docker_list: JSON documents of several KiB)
# run a few thousand inputs a second, so that each passes a million inputs.
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_JOBS ?= $(shell nproc)
FUZZ_TARGETS := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

.PHONY: fuzz fuzz-build fuzz-smoke FORCE
ifneq ($(BUILD),$(FUZZ_BUILD))
$(FUZZ_BUILD)/libhealthd.a: FORCE
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) WARN="$(FUZZ_WARN)" \
		CFLAGS="-O1 -g" SAN_FLAGS="-fno-omit-frame-pointer $(FUZZ_SAN)" SANLD="$(FUZZ_SAN)" $@
endif

# The HPACK oracle's second decoder, libnghttp2's inflater (fuzz/hpack_oracle.h):
# linked into these two targets only.
$(FUZZ_BUILD)/fuzz_grpc $(FUZZ_BUILD)/fuzz_hpack: FUZZ_LIBS = -lnghttp2
$(FUZZ_BUILD)/fuzz_grpc $(FUZZ_BUILD)/fuzz_hpack: fuzz/hpack_oracle.h

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(FUZZ_BUILD)/libhealthd.a
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE $(JSMN_DEFS) -I. -I$(FUZZ_BUILD)/gen $(PKG_CFLAGS) \
		-O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) $(FUZZ_WARN) \
		-o $@ $< $(FUZZ_BUILD)/libhealthd.a $(PKG_LIBS) $(FUZZ_LIBS)

fuzz-build:
	@build-aux/deps.sh build fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@fuzz/run.sh run $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	@fuzz/run.sh smoke $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)
FORCE:
