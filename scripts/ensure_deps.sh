#!/bin/sh
# scripts/ensure_deps.sh build|demo|test|ci
#
# Makes sure the Debian packages that one make target needs are there: installs the missing
# ones with apt-get when run as root, otherwise prints the exact apt-get line; for build and
# demo it then fails, for test and ci it goes on (the tests that need a missing package
# skip themselves, saying so) and runs npm ci for the HTML tests.
# Silent when nothing is missing. Each target installs what it needs and nothing more:
#   build  `make`: the preload library and mf_print (a C compiler, libdw, libdebuginfod,
#          libiberty, zlib, ncurses)
#   demo   `make demo`: build, plus what the README's demo output needs (libunwind for the
#          stacks, glibc's debug info for its file:line); no Rust, no Python
#   test   `make test`: demo, plus the test suites' needs (g++, Python, allocators that the
#          tests preload after ours, setpriv, make, groff to check the man pages, a cargo,
#          a debuginfod server, Go's pprof to read mf_print's pprof, chromium and npm for the
#          HTML report, clang and its libFuzzer runtime for the reader's fuzz target, tmux for --watch's view,
#          the Debian packaging tools and what the installed package is tried with)
#   ci     `.ci/run`: test, plus Debian's own cargo and rustc, the oldest Rust tested
set -e
target=${1:-build}
missing=""
need() { case " $missing " in *" $1 "*) ;; *) missing="$missing $1" ;; esac; }
have_header() { printf '#include <%s>\n' "$1" | ${CC:-gcc} -E -x c - >/dev/null 2>&1; }
have_lib() {
    for lib in /usr/lib/*/"$1" /lib/*/"$1" /usr/lib/"$1" /lib/"$1"; do
        [ -e "$lib" ] && return 0
    done
    return 1
}

# glibc's detached debug info (libc6-dbg), where libdw looks for it: by libc's build-id.
have_libc_debug_info() {
    libc=$(${CC:-gcc} -print-file-name=libc.so.6 2>/dev/null) || return 1
    id=$(readelf -n "$libc" 2>/dev/null | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p')
    [ -n "$id" ] || return 1
    [ -f "/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug" ]
}

# clang's libFuzzer runtime (libclang-rt-NN-dev), for the version of clang there is.
have_clang_fuzzer() {
    command -v clang >/dev/null 2>&1 || return 1
    [ -e "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] ||
        ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1
}

build() {
    command -v "${CC:-gcc}" >/dev/null 2>&1 || need gcc
    have_header stdio.h || need libc6-dev
    have_header elfutils/libdwfl.h || need libdw-dev
    have_header elfutils/debuginfod.h || need libdebuginfod-dev
    have_header libelf.h || need libelf-dev
    have_header libiberty/demangle.h || need libiberty-dev
    have_header zlib.h || need zlib1g-dev
    # mf_print --watch's terminal view (linked through pkg-config ncursesw)
    have_header ncurses.h || need libncurses-dev
    command -v pkg-config >/dev/null 2>&1 || need pkg-config
}

demo() {
    build
    have_lib libunwind.so.8 || need libunwind8
    command -v readelf >/dev/null 2>&1 || need binutils
    have_libc_debug_info || need libc6-dbg
}

test_() {
    demo
    command -v g++ >/dev/null 2>&1 || need g++
    command -v python3 >/dev/null 2>&1 || need python3
    have_lib libjemalloc.so.2 || need libjemalloc2
    have_lib libtcmalloc_minimal.so.4 || need libtcmalloc-minimal4
    command -v setpriv >/dev/null 2>&1 || need util-linux
    command -v make >/dev/null 2>&1 || need make
    command -v groff >/dev/null 2>&1 || need groff-base
    # `go tool pprof` reads the pprof files mf_print writes (tests/viewer/test_mf_print_pprof.py).
    command -v go >/dev/null 2>&1 || need golang-go
    # The HTML report's tests: Debian's chromium, driven from node (npm ci in tests/html).
    command -v chromium >/dev/null 2>&1 || need chromium
    command -v npm >/dev/null 2>&1 || need npm
    # libFuzzer for the reader's fuzz target (tests/fuzz/run_fuzz.sh): clang and its runtime.
    command -v clang >/dev/null 2>&1 || need clang
    have_clang_fuzzer || need libclang-rt-14-dev
    # A debuginfod server for the tests of fetched debug files (tests/viewer/test_debuginfod.py).
    command -v debuginfod >/dev/null 2>&1 || need debuginfod
    # Any cargo will do (rustup's too); Debian's if there is none.
    command -v cargo >/dev/null 2>&1 || need cargo
    # --watch's terminal view is driven in a tmux pane (tests/viewer/test_watch.py).
    command -v tmux >/dev/null 2>&1 || need tmux
    # Which files the timeline's recorder opens (tests/viewer/test_timeline.py).
    command -v strace >/dev/null 2>&1 || need strace
    # The Debian package's tests (tests/package): dpkg-buildpackage with debhelper, lintian,
    # and in the installed clone bash-completion and man (pkg-config: build).
    command -v dpkg-buildpackage >/dev/null 2>&1 || need dpkg-dev
    command -v dh >/dev/null 2>&1 || need debhelper
    command -v lintian >/dev/null 2>&1 || need lintian
    [ -f /usr/share/bash-completion/bash_completion ] || need bash-completion
    command -v man >/dev/null 2>&1 || need man-db
}

ci() {
    test_
    [ -x /usr/bin/cargo ] || need cargo
}

case $target in
    build) build ;;
    demo) demo ;;
    test) test_ ;;
    ci) ci ;;
    *) echo "usage: $0 build|demo|test|ci" >&2; exit 2 ;;
esac

# The cc crate from Debian (librust-cc-dev) lets the Rust crate build without crates.io
# (scripts/cargo uses it when it is there). As root it is installed with the rest; a user who
# cannot install it may have crates.io instead, so for them it is a note, not a failure.
optional=""
case $target in test|ci)
    ls -d /usr/share/cargo/registry/cc-* >/dev/null 2>&1 || optional=" librust-cc-dev" ;;
esac

is_root_with_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

# The tests' node modules (tests/html/package-lock.json: playwright-core, which drives Debian's
# chromium), fetched here once rather than by the tests. Without them the HTML tests say
# they are skipped, and why.
node_modules() {
    html=$(dirname "$0")/../tests/html
    command -v npm >/dev/null 2>&1 || return 0 # the package line above names npm
    node -e 'const want = require(process.argv[1] + "/package-lock.json")
            .packages["node_modules/playwright-core"].version;
        let have; try { have = require(process.argv[1] + "/node_modules/playwright-core/package.json").version; } catch (e) {}
        process.exit(have === want ? 0 : 1)' "$(cd "$html" && pwd)" 2>/dev/null && return 0
    # An unreachable registry fails in seconds, not after npm's minute of retries.
    if ! log=$(cd "$html" && npm ci --no-audit --no-fund --prefer-offline \
            --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=5000 2>&1); then
        why=$(printf '%s\n' "$log" | grep -m1 -oE 'code [A-Z0-9_]+' | cut -c6-)
        echo "malloc_freq: npm ci in tests/html failed (${why:-npm failed} from" \
            "$(npm config get registry)): no playwright-core, so the HTML report's tests" \
            "will be skipped" >&2
    fi
}

# A test package apt-get could not install does not stop `make test`: one line names what is
# missing, and the tests that need it say they are skipped.
not_installed() {
    case $target in
        test|ci) echo "malloc_freq: $1; the tests that need these will be skipped" >&2 ;;
        *) echo "malloc_freq: $1" >&2; exit 1 ;;
    esac
}

if [ -n "$missing$optional" ] && is_root_with_apt; then
    echo "malloc_freq: installing$missing$optional" >&2
    log=$(mktemp)
    if apt-get update -qq >"$log" 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            $missing $optional >>"$log" 2>&1; then
        rm -f "$log"
        missing="" optional=""
    else
        # apt's first error says why: the archive could not be reached, a package unknown...
        why=$(grep -m1 -E '^(E|Err|W):' "$log" | cut -c1-160)
        rm -f "$log"
        not_installed "apt-get could not install$missing$optional (${why:-apt-get failed})"
        missing="" optional=""
    fi
fi
if [ -n "$optional" ]; then
    echo "malloc_freq: note: without crates.io, the Rust crate needs: sudo apt-get install$optional" >&2
fi
if [ -n "$missing" ]; then
    not_installed "missing packages ($target): sudo apt-get install$missing"
fi
case $target in test|ci) node_modules ;; esac
exit 0
