# malloc_freq — `make` builds the preload library, mf_print and the launcher; `make install`
# installs them (PREFIX, DESTDIR) and `make uninstall` removes them; `make demo` profiles the
# bundled example and prints its report; `make test` runs every test; `make bench` measures
# overhead.
CC      ?= gcc
CXX     ?= g++
BUILD   := build
OBJ     := $(BUILD)/obj
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
# -MMD -MP: each object lists the headers it included (OBJ/....d), so a header change rebuilds
# exactly the objects that use it. Added to a CFLAGS given on the command line too.
override CFLAGS += $(WARN) -std=gnu11 -fno-omit-frame-pointer -MMD -MP
# The core's TLS must be initial-exec (one instruction reaches it from the hot path), and
# everything not ours stays hidden. A 512-aligned TLS block lets the entry points reach it
# without the GOT (c_core/mf_core.h).
CORE_CFLAGS := $(CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec -D_GNU_SOURCE \
               -DMF_TLS_ALIGN=512

# Sources are found, not listed: a .c file added to (or moved within) a folder is built.
# mf_print's may sit in subfolders; each folder that holds a header is on its include path.
find_c      = $(sort $(shell find $(1) -name '*.c'))
CORE_SRC    := $(wildcard c_core/*.c)
PRELOAD_SRC := $(filter-out lib_preload/mf_entry.c,$(wildcard lib_preload/*.c))
PRINT_SRC   := $(call find_c,mf_print)
PRINT_INC   := $(addprefix -I,$(patsubst %/,%,$(sort $(dir $(shell find mf_print -name '*.h')))))
LAUNCH_SRC  := $(wildcard launcher/*.c)
# mf_print's libraries: libdw and libelf read the modules, libdebuginfod watches libdw's
# downloads of their debug files (model/debuginfod.c).
# --watch's terminal view: ncurses, wide-character build (names are UTF-8).
CURSES_LIBS := $(shell pkg-config --libs ncursesw 2>/dev/null || echo -lncursesw -ltinfo)
PRINT_LIBS  := -ldw -ldebuginfod -lelf -liberty -lz $(CURSES_LIBS)
# An object per source: build/obj/<its path>.o
obj          = $(patsubst %.c,$(OBJ)/%.o,$(1))
CORE_OBJ    := $(call obj,$(CORE_SRC))
PRELOAD_OBJ := $(call obj,$(PRELOAD_SRC))
ENTRY_OBJ   := $(OBJ)/lib_preload/mf_entry.o
PRINT_OBJ   := $(call obj,$(PRINT_SRC))
LAUNCH_OBJ  := $(call obj,$(LAUNCH_SRC))
ALL_OBJ     := $(CORE_OBJ) $(PRELOAD_OBJ) $(ENTRY_OBJ) $(PRINT_OBJ) $(LAUNCH_OBJ)

# make install: the launcher finds the library at ../lib or ../lib/$(MULTIARCH) from its own
# bin/ (launcher/setup.c); Debian's package sets LIBDIR to the multiarch one (debian/rules).
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man/man1
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
MULTIARCH ?= $(shell $(CC) -print-multiarch 2>/dev/null)
# One version, the crate's (debian/changelog's must match: tests/package).
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml)
INSTALLED := $(DESTDIR)$(LIBDIR)/libmalloc_freq.so $(DESTDIR)$(BINDIR)/mf_print \
             $(DESTDIR)$(BINDIR)/malloc_freq $(DESTDIR)$(MANDIR)/malloc_freq.1 \
             $(DESTDIR)$(MANDIR)/mf_print.1 $(DESTDIR)$(INCLUDEDIR)/malloc_freq.h \
             $(DESTDIR)$(LIBDIR)/pkgconfig/malloc_freq.pc \
             $(DESTDIR)$(COMPLETIONDIR)/malloc_freq $(DESTDIR)$(COMPLETIONDIR)/mf_print
# --format html's page, which report_html.c includes with the assembler's .incbin
PRINT_PAGE  := mf_print/report/flame_graph/flame_graph.html

# Cargo, through scripts/cargo: Debian's packaged crates when they are installed (this machine
# has no crates.io), decided when cargo runs, after `deps-test` may have installed them; with
# crates.io and no Debian crates it is plain cargo. Warnings are errors, in Rust as in C.
RUST_ENV := MALLOC_FREQ_WERROR=1 RUSTFLAGS=-Dwarnings
CARGO    := $(RUST_ENV) scripts/cargo

.PHONY: all deps deps-build deps-demo deps-test demo test test-unit test-c test-rust \
        test-sanitize test-fuzz bench clean install uninstall mf_print-include
all: $(BUILD)/libmalloc_freq.so $(BUILD)/mf_print $(BUILD)/malloc_freq $(BUILD)/mf_format.py

# Only these targets install packages: each installs the Debian packages it needs
# (scripts/ensure_deps.sh says which) when run as root, or stops with the apt-get line to run.
# Building and installing never do; `make demo` and `make test` run theirs first.
deps: deps-build
deps-build:
	@scripts/ensure_deps.sh build
deps-demo: deps-build
	@scripts/ensure_deps.sh demo
# The test set-up: the packages, then the HTML tests' node modules (npm ci, once, here).
deps-test: deps-build
	@scripts/ensure_deps.sh test

$(OBJ)/c_core/%.o $(OBJ)/lib_preload/%.o: CFLAGS_OF = $(CORE_CFLAGS) -Ic_core
$(OBJ)/mf_print/%.o: CFLAGS_OF = $(CFLAGS) -D_GNU_SOURCE -Ic_core $(PRINT_INC)
$(OBJ)/launcher/%.o: CFLAGS_OF = $(CFLAGS) -D_GNU_SOURCE \
                                 $(if $(MULTIARCH),-DMF_MULTIARCH='"$(MULTIARCH)"')
$(OBJ)/tests/%.o: CFLAGS_OF = $(CFLAGS) -D_GNU_SOURCE -Ic_core $(PRINT_INC)
# The exported entry points only tail-call: without a frame the hook costs half (mf_entry.c).
$(ENTRY_OBJ): CFLAGS_OF = $(CORE_CFLAGS) -fomit-frame-pointer -Ic_core

$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS_OF) -c -o $@ $<

# --format html's page is assembled into the object that names it (.incbin), which -MMD
# does not see.
$(call obj,$(shell grep -l flame_graph/flame_graph.html $(PRINT_SRC))): $(PRINT_PAGE)

# Lazy binding: each imported function is looked up at its first call, so a process pays
# only for those it uses; with -z now every process paid for all of them at load, /bin/true
# too (docs/performance.md, start-up). The GOT's other entries stay read-only (-z relro).
# After LDFLAGS, so that a distribution's -z now (hardening=+bindnow) does not undo it.
$(BUILD)/libmalloc_freq.so: $(CORE_OBJ) $(PRELOAD_OBJ) $(ENTRY_OBJ) lib_preload/exports.map
	$(CC) $(CORE_CFLAGS) $(LDFLAGS) -shared -o $@ $(CORE_OBJ) $(PRELOAD_OBJ) $(ENTRY_OBJ) \
	    -Wl,--version-script=lib_preload/exports.map -Wl,-z,lazy -Wl,-z,relro -ldl -lpthread

# mf_print's objects but main's, for programs that test them (tests/unit, tests/fuzz).
$(BUILD)/mf_print.a: $(filter-out $(OBJ)/mf_print/main.o,$(PRINT_OBJ))
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/mf_print: $(PRINT_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(PRINT_OBJ) $(PRINT_LIBS)

$(BUILD)/malloc_freq: $(LAUNCH_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(LAUNCH_OBJ)

mf_print-include:
	@echo -Ic_core $(PRINT_INC)

# The format's offsets, sizes and constants for the Python tests and the bench, printed by a
# program compiled against c_core/mf_format.h.
$(BUILD)/mf_format.py: $(OBJ)/tests/lib/format_offsets.o
	$(CC) $(CFLAGS) -o $(BUILD)/format_offsets $<
	$(BUILD)/format_offsets >$@.tmp && mv $@.tmp $@

# C unit tests of pure functions: tests/unit/NAME.c is a program that exits 0 when its checks
# pass; it may use mf_print's objects.
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRC))
ALL_OBJ  += $(call obj,$(UNIT_SRC)) $(OBJ)/tests/lib/format_offsets.o
.SECONDARY: $(call obj,$(UNIT_SRC))
$(BUILD)/unit/%: $(OBJ)/tests/unit/%.o $(BUILD)/mf_print.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PRINT_LIBS)

# The library where the dynamic loader finds it by name (LD_PRELOAD=libmalloc_freq.so): in
# $(LIBDIR), which on Debian is in the loader's path for /usr/local (ld.so.conf.d/libc.conf),
# and in its cache once ldconfig has run (as root, and only for a real install, not a DESTDIR).
# The C API: its header, and a pkg-config file whose -lmalloc_freq links the library in (the
# program then profiles itself, as under LD_PRELOAD). Bash completion for both commands.
install: all
	install -D -m 0644 $(BUILD)/libmalloc_freq.so $(DESTDIR)$(LIBDIR)/libmalloc_freq.so
	install -D -m 0755 $(BUILD)/mf_print $(DESTDIR)$(BINDIR)/mf_print
	install -D -m 0755 $(BUILD)/malloc_freq $(DESTDIR)$(BINDIR)/malloc_freq
	install -D -m 0644 man/malloc_freq.1 $(DESTDIR)$(MANDIR)/malloc_freq.1
	install -D -m 0644 man/mf_print.1 $(DESTDIR)$(MANDIR)/mf_print.1
	install -D -m 0644 c_core/malloc_freq.h $(DESTDIR)$(INCLUDEDIR)/malloc_freq.h
	install -d -m 0755 $(DESTDIR)$(LIBDIR)/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' lib_preload/malloc_freq.pc.in \
	    >$(DESTDIR)$(LIBDIR)/pkgconfig/malloc_freq.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/malloc_freq.pc
	install -D -m 0644 completion/malloc_freq $(DESTDIR)$(COMPLETIONDIR)/malloc_freq
	install -D -m 0644 completion/mf_print $(DESTDIR)$(COMPLETIONDIR)/mf_print
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	    echo ldconfig; ldconfig || exit 1; \
	    ldconfig -p | grep -qF '$(LIBDIR)/libmalloc_freq.so' || \
	        echo "note: $(LIBDIR) is not in the dynamic loader's path: use" \
	             "LD_PRELOAD=$(LIBDIR)/libmalloc_freq.so (or malloc_freq)"; \
	elif [ -z "$(DESTDIR)" ]; then \
	    echo "note: ldconfig needs root: until it runs, use" \
	         "LD_PRELOAD=$(LIBDIR)/libmalloc_freq.so (or malloc_freq)"; \
	fi

# Exactly the files install made; the directories stay (they may hold other files).
uninstall:
	rm -f $(INSTALLED)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then echo ldconfig; ldconfig; fi

# The main job: profile the bundled example and print its caller tree.
demo: deps-demo
	@echo "building (make all)..."
	@$(MAKE) --no-print-directory -s all
	$(CC) -O1 -g -fno-omit-frame-pointer -o $(BUILD)/demo examples/demo.c -lpthread
	rm -rf $(BUILD)/demo-out && mkdir -p $(BUILD)/demo-out
	MALLOC_FREQ_DIR=$(BUILD)/demo-out LD_PRELOAD=$(CURDIR)/$(BUILD)/libmalloc_freq.so $(BUILD)/demo
	$(BUILD)/mf_print --dir $$(ls -d $(BUILD)/demo-out/malloc_freq.*) --threshold 0.2

# The set-up first, then the build and every suite (each test-* alone installs nothing).
test: deps-test
	@$(MAKE) --no-print-directory all test-unit test-c test-rust test-sanitize test-fuzz
	@echo "all tests passed"

test-unit: $(UNIT_BIN)
	@failed=0; for t in $(UNIT_BIN); do $$t || failed=1; done; exit $$failed

test-c: all
	python3 tests/run_tests.py

# With the cargo first on PATH: .ci/run runs this with Debian's (the crate's rust-version)
# and again with rustup's when there is one.
test-rust: all
	cargo --version && rustc --version
	RUST_BACKTRACE=0 $(CARGO) test --release
	RUST_BACKTRACE=0 $(RUST_ENV) python3 tests/run_tests.py --rust-example

test-sanitize: all
	tests/sanitize/run_sanitizers.sh

# libFuzzer on mf_print's readers (profile directories, saved profiles, live files), model
# and reports, seeded with real ones: 60 s in all (MF_FUZZ_SECONDS); tests/fuzz/run_fuzz.sh.
test-fuzz: all
	tests/fuzz/run_fuzz.sh

bench: deps-test
	@$(MAKE) --no-print-directory all
	python3 bench/run_bench.py

clean:
	rm -rf $(BUILD) target

-include $(ALL_OBJ:.o=.d)
