#!/usr/bin/env bash
# Runs the core (linked statically, as in the Rust crate) under TSan, ASan and UBSan, and
# mf_print under ASan+UBSan on the profiles it wrote and on damaged copies of them, and
# under TSan on a profile large enough for its second thread.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/sanitize
rm -rf "$out" && mkdir -p "$out"
cflags="-O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE -I$top/c_core"
print_dirs="mf_print mf_print/base mf_print/read mf_print/model mf_print/report" # as the Makefile's
print_src=$(for d in $print_dirs; do ls "$top/$d"/*.c; done)
cflags_print="$cflags $(for d in $print_dirs; do echo "-I$top/$d"; done)"
pass=0 fail=0
check() { # name, condition-command...
    local name=$1; shift
    if "$@"; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}

# mf_print, built by the Makefile's rules into a build directory of its own.
mf_print_with() { # build name, flags
    make -s --no-print-directory -C "$top" BUILD="$out/$1" CFLAGS="-O1 -g $2" "$out/$1/mf_print"
    cp "$out/$1/mf_print" "$out/mf_print_$1"
}
mf_print_with asan "-fsanitize=address,undefined -fno-sanitize-recover=all"

# mf_print is a one-shot tool that leaves its memory to exit: LeakSanitizer is off for it alone.
export ASAN_OPTIONS=detect_leaks=0

# Sums the calls of CSV rows whose allocation site (first frame) is $2.
site_calls() {
    "$out/mf_print_asan" --dir "$1" --format csv |
        python3 -c 'import csv,sys; print(sum(int(r["calls"]) for r in csv.DictReader(sys.stdin) if r["stack"].split(";")[0]==sys.argv[1]))' "$2"
}

# The number of distinct stacks from allocation site $2 out to function $3 (the frame-pointer
# walk under TSan goes on past a thread's start into whatever the stack holds there).
site_stacks() {
    "$out/mf_print_asan" --dir "$1" --format csv | python3 -c '
import csv, sys
site, outer = sys.argv[1:]
stacks = {r["stack"].split(outer)[0] for r in csv.DictReader(sys.stdin) if r["stack"].split(";")[0] == site}
print(len(stacks))' "$2" "$3"
}

# One allocation function's exact calls over the thread headers of profile $1 (the reader
# of tests/lib/harness.py).
fn_total() {
    python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import harness
print(harness.exact_calls_per_fn(sys.argv[2])[int(sys.argv[3])])' "$top/tests/lib" "$1" "$2"
}

for san in thread address undefined; do
    bin=$out/core_stress_$san
    gcc $cflags -fsanitize=$san -fno-sanitize-recover=all -o "$bin" "$top/tests/sanitize/core_stress.c" \
        "$top"/c_core/*.c -ldl -lpthread
    dir=$out/run_$san && mkdir -p "$dir"
    log=$out/$san.log
    ok=1
    # Under TSan, libunwind's per-thread cache destructor runs after TSan has torn the thread
    # down and crashes inside TSan's mutex hook; the frame-pointer unwinder is checked there.
    unwind=libunwind && [ $san = thread ] && unwind=fp
    MALLOC_FREQ_UNWIND=$unwind MALLOC_FREQ_SAMPLE=1 MALLOC_FREQ_DIR=$dir TSAN_OPTIONS=halt_on_error=1 \
        "$bin" >"$log" 2>&1 || ok=0
    check "core_under_${san}_sanitizer_runs_clean" test $ok = 1
    prof=$(ls -d "$dir"/malloc_freq.* | head -1)
    check "core_under_${san}_sanitizer_counts_site_a_exactly" test "$(site_calls "$prof" stress_site_a)" = 80000
    check "core_under_${san}_sanitizer_counts_site_b_exactly" test "$(site_calls "$prof" stress_site_b)" = 20000
    # 1,024 stacks twice each: the table grows through six segments and its index with it.
    check "core_under_${san}_sanitizer_keeps_1024_stacks_apart" \
        test "$(site_stacks "$prof" stress_site_many many_stacks) $(site_calls "$prof" stress_site_many)" = "1024 2048"
    # Sampled: the hot path counts in TLS and flushes; the totals stay exact (8 = rust alloc,
    # 4 x (20000 + 300 paused); 10 = rust realloc) while another thread races the exit.
    sdir=$out/sampled_$san && mkdir -p "$sdir"
    ok=1
    MALLOC_FREQ_UNWIND=$unwind MALLOC_FREQ_SAMPLE=1000 MALLOC_FREQ_SEED=1 MALLOC_FREQ_DIR=$sdir \
        TSAN_OPTIONS=halt_on_error=1 "$bin" >"$out/sampled_$san.log" 2>&1 || ok=0
    check "core_under_${san}_sanitizer_sampled_runs_clean" test $ok = 1
    sprof=$(ls -d "$sdir"/malloc_freq.* | head -1)
    check "core_under_${san}_sanitizer_sampled_totals_exact" \
        test "$(fn_total "$sprof" 8) $(fn_total "$sprof" 10) $(fn_total "$sprof" 0)" = "81200 20000 2048"
    # The live heap: records inserted and removed by different threads at once.
    lbin=$out/live_stress_$san
    gcc $cflags -fsanitize=$san -fno-sanitize-recover=all -o "$lbin" "$top/tests/sanitize/live_stress.c" \
        "$top"/c_core/*.c -ldl -lpthread
    ldir=$out/live_$san && mkdir -p "$ldir"
    ok=1
    # Depth 3 (counted_alloc, the site, worker): under TSan the frame-pointer walk goes on
    # past the thread's start into junk, a new stack each time.
    MALLOC_FREQ_UNWIND=$unwind MALLOC_FREQ_DEPTH=3 MALLOC_FREQ_LIVE=all MALLOC_FREQ_DIR=$ldir TSAN_OPTIONS=halt_on_error=1 \
        "$lbin" >"$out/live_$san.log" 2>&1 || ok=0
    check "live_heap_under_${san}_sanitizer_runs_clean" test $ok = 1
    lprof=$(ls -d "$ldir"/malloc_freq.* | head -1)
    # alive and freed of stress_live_kept, alive and freed of stress_live_churn
    check "live_heap_under_${san}_sanitizer_counts_exactly" test "$("$out/mf_print_asan" --live --fold counted_alloc --format csv "$lprof" |
        python3 -c 'import csv, sys
rows = list(csv.DictReader(sys.stdin))
def s(site, f): return sum(int(r[f]) for r in rows if r["stack"].split(";")[0] == site)
print(s("stress_live_kept", "alive"), s("stress_live_kept", "freed"), s("stress_live_churn", "alive"), s("stress_live_churn", "freed"))')" = "100 20000 0 20000"
done

# Damaged profiles: mf_print must name the bad file, print the rest, and never trip ASan.
bad=$out/damaged && cp -r "$prof" "$bad"
files=("$bad"/thread.*)
truncate -s 100 "${files[0]}"
head -c 20000 /dev/urandom | dd of="${files[1]}" bs=1 seek=200 conv=notrunc status=none
rc=0
"$out/mf_print_asan" --dir "$bad" --format csv >"$out/damaged.csv" 2>"$out/damaged.err" || rc=$?
check "mf_print_asan_survives_damaged_files" test $rc = 0 -a -s "$out/damaged.csv"
check "mf_print_names_the_truncated_file" grep -q "$(basename "${files[0]}")" "$out/damaged.err"

# A thread file above 16 MiB (mf_print/read/profile_read.c's MF_READ_SPLIT_MIN): two threads read
# it, two fill its paths (call_tree.c), the tree counts its distinct stacks on a second thread
# and two walk the CSV's nodes (report_csv.c); 100,000 one-call stacks.
mf_print_with tsan -fsanitize=thread
gcc -O1 -g -fno-omit-frame-pointer -o "$out/html_100k_stacks" "$top/tests/programs/html_100k_stacks.c"
big=$out/big && mkdir -p "$big"
MALLOC_FREQ_SAMPLE=1 MALLOC_FREQ_DIR=$big LD_PRELOAD=$top/build/libmalloc_freq.so "$out/html_100k_stacks" >/dev/null
bprof=$(ls -d "$big"/malloc_freq.* | head -1)
check "large_profile_is_above_the_split" test "$(stat -c %s "$bprof"/thread.*)" -ge $((16 << 20))
for kind in tsan asan; do
    ok=1
    TSAN_OPTIONS=halt_on_error=1 "$out/mf_print_$kind" --dir "$bprof" --threshold 0 >"$out/big_$kind.tree" 2>"$out/big_$kind.err" || ok=0
    check "mf_print_${kind}_tree_of_a_large_profile_runs_clean" test $ok = 1 -a ! -s "$out/big_$kind.err"
    check "mf_print_${kind}_counts_the_large_profiles_stacks" \
        grep -q "stacks     100,000 distinct, 100,000 after trimming" "$out/big_$kind.tree"
    # Two threads walk the CSV's stacks (report_csv.c): rows of equal calls must still come
    # in the order of their stack text, byte for byte.
    check "mf_print_${kind}_reads_a_large_profile_whole" test "$(TSAN_OPTIONS=halt_on_error=1 "$out/mf_print_$kind" --dir "$bprof" --format csv |
        python3 -c 'import csv, sys
rows = list(csv.DictReader(sys.stdin))
keys = [(-int(r["calls"]), r["stack"].encode()) for r in rows]
print(len(rows), sum(int(r["calls"]) for r in rows), sum(int(r["bytes"]) for r in rows),
      "in order" if keys == sorted(keys) else "out of order")')" = "100000 100000 4000000 in order"
done

echo "$pass passed, $fail failed"
test $fail = 0
