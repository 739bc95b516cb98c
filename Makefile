# malloc_freq — `make` builds the preload library, mf_print and the launcher; `make install`
# installs them (PREFIX, DESTDIR) and `make uninstall` removes them; `make demo` profiles the
# bundled example and prints its report; `make test` runs every test; `make bench` measures
# overhead.
CC      ?= gcc
CXX     ?= g++
BUILD   := build
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += $(WARN) -std=gnu11 -fno-omit-frame-pointer
# The core's TLS must be initial-exec (DESIGN §1); everything not ours stays hidden (§10).
# A 512-aligned TLS block lets the entry points reach it without the GOT (c_core/mf_core.h).
CORE_CFLAGS := $(CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec -D_GNU_SOURCE \
               -DMF_TLS_ALIGN=512

CORE_SRC    := $(wildcard c_core/*.c)
CORE_HDR    := $(wildcard c_core/*.h)
PRELOAD_SRC := lib_preload/mf_preload.c lib_preload/mf_next.c lib_preload/mf_guard.c
PRELOAD_HDR := $(wildcard lib_preload/*.h)
# mf_print by stage: read/, model/, report/ (the registry), base/ (helpers); the request,
# its run and the output at the top.
PRINT_DIRS  := mf_print mf_print/base mf_print/read mf_print/model mf_print/report
PRINT_SRC   := $(foreach d,$(PRINT_DIRS),$(wildcard $(d)/*.c))
PRINT_HDR   := $(foreach d,$(PRINT_DIRS),$(wildcard $(d)/*.h))
PRINT_INC   := $(addprefix -I,$(PRINT_DIRS))
LAUNCH_SRC  := $(wildcard launcher/*.c)
LAUNCH_HDR  := $(wildcard launcher/*.h)

# make install: the launcher finds the library at ../lib from its own bin/ (launcher/setup.c).
PREFIX  ?= /usr/local
BINDIR  := $(PREFIX)/bin
LIBDIR  := $(PREFIX)/lib
MANDIR  := $(PREFIX)/share/man/man1
INSTALLED := $(DESTDIR)$(LIBDIR)/libmalloc_freq.so $(DESTDIR)$(BINDIR)/mf_print \
             $(DESTDIR)$(BINDIR)/malloc_freq $(DESTDIR)$(MANDIR)/malloc_freq.1 \
             $(DESTDIR)$(MANDIR)/mf_print.1
# --format html's page, which report_html.c includes with the assembler's .incbin
PRINT_PAGE  := mf_print/report/flame_graph/flame_graph.html

# Cargo, through scripts/cargo: Debian's packaged crates when they are installed (this machine
# has no crates.io), decided when cargo runs, after `deps-test` may have installed them; with
# crates.io and no Debian crates it is plain cargo. Warnings are errors, in Rust as in C.
RUST_ENV := MALLOC_FREQ_WERROR=1 RUSTFLAGS=-Dwarnings
CARGO    := $(RUST_ENV) scripts/cargo

.PHONY: all deps deps-build deps-demo deps-test demo test test-c test-rust test-sanitize test-fuzz bench \
        clean \
        install uninstall
all: $(BUILD)/libmalloc_freq.so $(BUILD)/mf_print $(BUILD)/malloc_freq

# Each target installs the Debian packages it needs (scripts/ensure_deps.sh says which), or
# stops with the apt-get line to run. The test and demo packages come after the build's.
deps: deps-build
deps-build:
	@scripts/ensure_deps.sh build
deps-demo deps-test: deps-build
	@scripts/ensure_deps.sh $(@:deps-%=%)

# Lazy binding: each imported function is looked up at its first call, so a process pays
# only for those it uses; with -z now every process paid for all of them at load, /bin/true
# too (README "Start-up and exit"). The GOT's other entries stay read-only (-z relro).
$(BUILD)/libmalloc_freq.so: $(CORE_SRC) $(PRELOAD_SRC) $(BUILD)/mf_entry.o $(CORE_HDR) $(PRELOAD_HDR) \
                           lib_preload/exports.map | $(BUILD) deps-build
	$(CC) $(CORE_CFLAGS) -Ic_core -shared -o $@ $(CORE_SRC) $(PRELOAD_SRC) $(BUILD)/mf_entry.o \
	    -Wl,--version-script=lib_preload/exports.map -Wl,-z,lazy -Wl,-z,relro -ldl -lpthread

# The exported entry points only tail-call: without a frame the hook costs half (mf_entry.c).
$(BUILD)/mf_entry.o: lib_preload/mf_entry.c $(PRELOAD_HDR) $(CORE_HDR) | $(BUILD) deps-build
	$(CC) $(CORE_CFLAGS) -fomit-frame-pointer -Ic_core -c -o $@ $<

$(BUILD)/mf_print: $(PRINT_SRC) $(PRINT_HDR) $(PRINT_PAGE) c_core/mf_format.h | $(BUILD) deps-build
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Ic_core $(PRINT_INC) -o $@ $(PRINT_SRC) -ldw -lelf -liberty -lz

$(BUILD)/malloc_freq: $(LAUNCH_SRC) $(LAUNCH_HDR) c_core/mf_format.h | $(BUILD) deps-build
	$(CC) $(CFLAGS) -D_GNU_SOURCE -o $@ $(LAUNCH_SRC)

$(BUILD):
	mkdir -p $@

# The library where the dynamic loader finds it by name (LD_PRELOAD=libmalloc_freq.so): in
# $(LIBDIR), which on Debian is in the loader's path for /usr/local (ld.so.conf.d/libc.conf),
# and in its cache once ldconfig has run (as root, and only for a real install, not a DESTDIR).
install: all
	install -D -m 0644 $(BUILD)/libmalloc_freq.so $(DESTDIR)$(LIBDIR)/libmalloc_freq.so
	install -D -m 0755 $(BUILD)/mf_print $(DESTDIR)$(BINDIR)/mf_print
	install -D -m 0755 $(BUILD)/malloc_freq $(DESTDIR)$(BINDIR)/malloc_freq
	install -D -m 0644 man/malloc_freq.1 $(DESTDIR)$(MANDIR)/malloc_freq.1
	install -D -m 0644 man/mf_print.1 $(DESTDIR)$(MANDIR)/mf_print.1
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
demo: deps-demo all
	$(CC) -O1 -g -fno-omit-frame-pointer -o $(BUILD)/demo examples/demo.c -lpthread
	rm -rf $(BUILD)/demo-out && mkdir -p $(BUILD)/demo-out
	MALLOC_FREQ_DIR=$(BUILD)/demo-out LD_PRELOAD=$(CURDIR)/$(BUILD)/libmalloc_freq.so $(BUILD)/demo
	$(BUILD)/mf_print --dir $$(ls -d $(BUILD)/demo-out/malloc_freq.*) --threshold 0.2

test: deps-test all test-c test-rust test-sanitize test-fuzz
	@echo "all tests passed"

test-c: deps-test all
	python3 tests/run_tests.py

# With the cargo first on PATH: .ci/run runs this with Debian's (the crate's rust-version)
# and again with rustup's when there is one.
test-rust: deps-test all
	cargo --version && rustc --version
	RUST_BACKTRACE=0 $(CARGO) test --release
	RUST_BACKTRACE=0 $(RUST_ENV) python3 tests/run_tests.py --rust-example

test-sanitize: deps-test all
	tests/sanitize/run_sanitizers.sh

# libFuzzer on mf_print's readers (profile directories, saved profiles, live files), model
# and reports, seeded with real ones: 60 s in all (MF_FUZZ_SECONDS); tests/fuzz/run_fuzz.sh.
test-fuzz: deps-test all
	tests/fuzz/run_fuzz.sh

bench: deps-test all
	python3 bench/run_bench.py

clean:
	rm -rf $(BUILD) target
