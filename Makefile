# malloc_freq — `make` builds the preload library and mf_print; `make demo` profiles the bundled
# example and prints its report; `make test` runs every test; `make bench` measures overhead.
CC      ?= gcc
CXX     ?= g++
BUILD   := build
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += $(WARN) -std=gnu11 -fno-omit-frame-pointer
# The core's TLS must be initial-exec (DESIGN §1); everything not ours stays hidden (§10).
# A page-aligned TLS block lets the entry points reach it without the GOT (c_core/mf_core.h).
CORE_CFLAGS := $(CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec -D_GNU_SOURCE \
               -DMF_TLS_ALIGN=4096

CORE_SRC    := $(wildcard c_core/*.c)
CORE_HDR    := $(wildcard c_core/*.h)
PRELOAD_SRC := lib_preload/mf_preload.c lib_preload/mf_next.c
PRELOAD_HDR := $(wildcard lib_preload/*.h)
PRINT_SRC   := $(wildcard mf_print/*.c)
PRINT_HDR   := $(wildcard mf_print/*.h)

# Cargo: use Debian's packaged crates when they are installed (this machine has no crates.io);
# a user with crates.io needs nothing: the override is passed on the command line only.
DEBIAN_CRATES := /usr/share/cargo/registry
CARGO := MALLOC_FREQ_WERROR=1 cargo $(if $(wildcard $(DEBIAN_CRATES)/cc-*),--config 'source.crates-io.replace-with="debian"' --config 'source.debian.directory="$(DEBIAN_CRATES)"' --offline)

.PHONY: all deps demo test test-c test-rust test-sanitize bench clean
all: deps $(BUILD)/libmalloc_freq.so $(BUILD)/mf_print

deps:
	@scripts/ensure_deps.sh

$(BUILD)/libmalloc_freq.so: $(CORE_SRC) $(PRELOAD_SRC) $(BUILD)/mf_entry.o $(CORE_HDR) $(PRELOAD_HDR) \
                           lib_preload/exports.map | $(BUILD)
	$(CC) $(CORE_CFLAGS) -Ic_core -shared -o $@ $(CORE_SRC) $(PRELOAD_SRC) $(BUILD)/mf_entry.o \
	    -Wl,--version-script=lib_preload/exports.map -Wl,-z,now -ldl -lm -lpthread

# The exported entry points only tail-call: without a frame the hook costs half (mf_entry.c).
$(BUILD)/mf_entry.o: lib_preload/mf_entry.c $(PRELOAD_HDR) $(CORE_HDR) | $(BUILD)
	$(CC) $(CORE_CFLAGS) -fomit-frame-pointer -Ic_core -c -o $@ $<

$(BUILD)/mf_print: $(PRINT_SRC) $(PRINT_HDR) c_core/mf_format.h | $(BUILD)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Ic_core -o $@ $(PRINT_SRC) -ldw -lelf -liberty

$(BUILD):
	mkdir -p $@

# The main job: profile the bundled example and print its caller tree.
demo: all
	$(CC) -O1 -g -fno-omit-frame-pointer -o $(BUILD)/demo examples/demo.c -lpthread
	rm -rf $(BUILD)/demo-out && mkdir -p $(BUILD)/demo-out
	MALLOC_FREQ_DIR=$(BUILD)/demo-out LD_PRELOAD=$(CURDIR)/$(BUILD)/libmalloc_freq.so $(BUILD)/demo
	$(BUILD)/mf_print --dir $$(ls -d $(BUILD)/demo-out/malloc_freq.*) --threshold 0.2

test: all test-c test-rust test-sanitize
	@echo "all tests passed"

test-c: all
	@scripts/ensure_deps.sh test
	python3 tests/run_tests.py

test-rust: all
	RUST_BACKTRACE=0 $(CARGO) test --release
	RUST_BACKTRACE=0 python3 tests/run_tests.py --rust-example

test-sanitize: all
	tests/sanitize/run_sanitizers.sh

bench: all
	python3 bench/run_bench.py

clean:
	rm -rf $(BUILD) target
