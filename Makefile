# dstack-healthd. `make` builds build/dstack-healthd; `make asan` the same with
# AddressSanitizer and UBSan in build-asan/; `make test` runs every test with
# both; `make run` serves a verdict from the example config.
VERSION := 0.1.0
REV := git:$(shell git rev-parse --verify -q HEAD 2>/dev/null | cut -c1-20)
ifeq ($(REV),git:)
REV := git:unknown
endif

.DEFAULT_GOAL := all
BUILD ?= build
CC ?= cc
PROTOC_C ?= protoc-c

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wmissing-prototypes \
	-Wstrict-prototypes -Wno-unused-parameter
HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
ifeq ($(SAN),1)
OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
SANLD := -fsanitize=address,undefined
else
OPT := -O2 -g
SANLD :=
endif

# Build dependencies, found once per build folder: build-aux/deps.sh installs
# what is missing (as root on Debian) or names it, then we ask pkg-config.
$(BUILD)/config.mk: build-aux/deps.sh
	@mkdir -p $(BUILD)
	@build-aux/deps.sh build
	@{ echo "PKG_CFLAGS := $$(pkg-config --cflags libmicrohttpd libprotobuf-c libsystemd)"; \
	   echo "PKG_LIBS := $$(pkg-config --libs libmicrohttpd libprotobuf-c libsystemd) -lmbedtls -lmbedx509 -lmbedcrypto -lpthread -lm"; \
	} > $@.tmp && mv $@.tmp $@
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(BUILD)/config.mk
endif

# jsmn's settings, once for every translation unit: strict mode (primitives
# must be true, false, null or numbers, followed by a delimiter), and parent
# links, without which finding the enclosing token after every closing
# bracket scans back over every token before it (quadratic in a Docker list
# of many containers). The second changes the layout of jsmntok_t, so no
# file may set it on its own.
JSMN_DEFS := -DJSMN_STRICT -DJSMN_PARENT_LINKS
CPPFLAGS += -D_GNU_SOURCE -I. -I$(BUILD)/gen $(JSMN_DEFS) \
	-DHEALTHD_VERSION='"$(VERSION)"'
CFLAGS += -std=c11 $(OPT) $(WARN) $(HARDEN) -MMD -MP $(PKG_CFLAGS)
LDFLAGS += -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(SANLD)
LDLIBS += $(PKG_LIBS)

PROTOS := $(wildcard rpc/*.proto)
GEN_C := $(PROTOS:rpc/%.proto=$(BUILD)/gen/%.pb-c.c)
GEN_H := $(GEN_C:.c=.h)
LIB_SRCS := $(filter-out agent/main.c,$(wildcard base/*.c agent/*.c rpc/*.c runtime/*.c statusfile/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(GEN_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
TEST_HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))

.PHONY: all asan test run clean deps
.SECONDARY:
all: $(BUILD)/dstack-healthd $(TEST_BINS) $(TEST_HELPERS)

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 all

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: rpc/%.proto $(BUILD)/config.mk
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --c_out=$(BUILD)/gen -Irpc $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out -Wmissing-prototypes,$(CFLAGS)) -c -o $@ $<

# The revision lives in a generated header that is rewritten only when it
# changes, so that every object that shows it is rebuilt then, and no other
# build is disturbed.
$(BUILD)/gen/rev.h: FORCE
	@mkdir -p $(BUILD)/gen
	@printf '#define HEALTHD_REV "%s"\n' '$(REV)' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/%.o: %.c | $(GEN_H) $(BUILD)/gen/rev.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/libhealthd.a: $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/dstack-healthd: $(BUILD)/obj/agent/main.o $(BUILD)/libhealthd.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libhealthd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/helpers/%: $(BUILD)/obj/tests/helpers/%.o $(BUILD)/libhealthd.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	build-aux/deps.sh build test fuzz

# Everything, with the sanitizer build too; ends with "N passed, N failed".
test:
	@build-aux/deps.sh build test fuzz
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory asan
	@tests/run build build-asan

run: all
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
ifndef SYSTEMDUNITDIR
SYSTEMDUNITDIR := $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null)
ifeq ($(SYSTEMDUNITDIR),)
SYSTEMDUNITDIR := /lib/systemd/system
endif
endif
INSTALL ?= install
UNITS := systemd/dstack-healthd.service systemd/dstack-healthd.socket \
	systemd/dstack-healthd-drain.service

.PHONY: install uninstall deb
install: $(BUILD)/dstack-healthd
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSTEMDUNITDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/examples
	$(INSTALL) -m 0755 $(BUILD)/dstack-healthd $(DESTDIR)$(SBINDIR)/dstack-healthd
	for u in $(UNITS); do \
		sed 's|/usr/sbin/dstack-healthd|$(SBINDIR)/dstack-healthd|' $$u \
			>$(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}.tmp && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}.tmp && \
		mv $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}.tmp $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/} \
			|| exit 1; \
	done
	$(INSTALL) -m 0644 doc/dstack-healthd.8 $(DESTDIR)$(MANDIR)/man8/dstack-healthd.8
	$(INSTALL) -m 0644 dstack.example.json $(DESTDIR)$(DOCDIR)/examples/healthd.json

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/dstack-healthd \
		$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(notdir $(UNITS))) \
		$(DESTDIR)$(MANDIR)/man8/dstack-healthd.8 \
		$(DESTDIR)$(DOCDIR)/examples/healthd.json
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null

# The Debian package, built from a copy of the tracked and new files in a
# temporary folder (dpkg-buildpackage writes into the parent of the source
# tree); only the .deb comes back, under $(BUILD)/. Our own make variables
# (BUILD=...) must not leak into the package's make.
deb:
	@command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || \
		{ echo "make deb: needs dpkg-dev and debhelper" >&2; exit 1; }
	@v=$$(dpkg-parsechangelog -S Version) && [ "$$v" = "$(VERSION)" ] || \
		{ echo "make deb: debian/changelog is at $$v, the Makefile at $(VERSION)" >&2; exit 1; }
	@mkdir -p $(BUILD)
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	mkdir "$$tmp/dstack-healthd-$(VERSION)"; \
	git ls-files -z -c -o --exclude-standard | \
		xargs -0 cp --parents -t "$$tmp/dstack-healthd-$(VERSION)"; \
	(cd "$$tmp/dstack-healthd-$(VERSION)" && \
		env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS HEALTHD_REV=$(REV) \
		dpkg-buildpackage -us -uc -b >../build.log 2>&1) || \
		{ tail -n 30 "$$tmp/build.log" >&2; exit 1; }; \
	cp "$$tmp"/dstack-healthd_$(VERSION)_*.deb $(BUILD)/; \
	ls $(BUILD)/dstack-healthd_$(VERSION)_*.deb

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
	@bench/events.sh $(BUILD); rc=$$?; [ $$rc -le 1 ]

$(BUILD)/bench/refresh_bench: bench/refresh_bench.c $(BUILD)/libhealthd.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libhealthd.a $(LDLIBS)

$(BUILD)/bench/openloop: bench/openloop.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# libFuzzer targets (fuzz/fuzz_*.c, see fuzz/README): the library is compiled
# again by clang with coverage, ASan and UBSan into $(FUZZ_BUILD), by the rules
# above. `make fuzz` runs each target FUZZ_SECONDS on its corpus (new inputs
# go to $(FUZZ_BUILD)/corpus, the repo's seeds stay as they are); `make
# fuzz-smoke` replays the seeds, then runs each FUZZ_SMOKE_SECONDS.
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
		OPT="-O1 -g -fno-omit-frame-pointer $(FUZZ_SAN)" SANLD="$(FUZZ_SAN)" $@
endif

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(FUZZ_BUILD)/libhealthd.a
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE $(JSMN_DEFS) -I. -I$(FUZZ_BUILD)/gen $(PKG_CFLAGS) \
		-O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) $(FUZZ_WARN) \
		-o $@ $< $(FUZZ_BUILD)/libhealthd.a $(PKG_LIBS)

fuzz-build:
	@build-aux/deps.sh build fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@fuzz/run.sh run $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	@fuzz/run.sh smoke $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)
FORCE:
