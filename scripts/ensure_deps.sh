#!/bin/sh
# Installs what the build needs from Debian's packages when run as root, or says exactly
# what to run. Called by `make`; silent when everything is present. `ensure_deps.sh test`
# (make test) also wants the allocators the tests put behind the preload library.
set -e
missing=""
have_header() { printf '#include <%s>\n' "$1" | ${CC:-gcc} -E -x c - >/dev/null 2>&1; }
have_header elfutils/libdwfl.h || missing="$missing libdw-dev libelf-dev"
have_header libiberty/demangle.h || missing="$missing libiberty-dev"
ls /usr/lib/*/libunwind.so.8 /lib/*/libunwind.so.8 >/dev/null 2>&1 || missing="$missing libunwind8"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
command -v cargo >/dev/null 2>&1 || missing="$missing cargo"
# Debian's packaged cc crate, for building the Rust crate offline (crates.io users need not).
[ -d /usr/share/cargo/registry ] && ! ls -d /usr/share/cargo/registry/cc-* >/dev/null 2>&1 && missing="$missing librust-cc-dev"
[ -d /usr/share/cargo/registry ] || missing="$missing librust-cc-dev"
if [ "${1:-}" = test ]; then
    ls /usr/lib/*/libjemalloc.so.2 >/dev/null 2>&1 || missing="$missing libjemalloc2"
    ls /usr/lib/*/libtcmalloc_minimal.so.4 >/dev/null 2>&1 || missing="$missing libtcmalloc-minimal4"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "malloc_freq: installing$missing" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
else
    echo "malloc_freq: missing packages; run: sudo apt-get install$missing" >&2
    exit 1
fi
