#!/usr/bin/env bash
# make test-fuzz: builds tests/fuzz/fuzz_reader.c with clang's libFuzzer under ASan+UBSan,
# seeds it with real profiles (the preload library on small programs of tests/programs/, a
# thread file and its process file per seed, as fuzz_reader.c reads them), and fuzzes
# mf_print's reader, model and reports for MF_FUZZ_SECONDS (60) seconds. A crash, a
# sanitizer report, a leak of time (-timeout, 10 s an input) or memory (-rss_limit_mb)
# fails it, and the input that did is kept in build/fuzz/ (crash-*, timeout-*, oom-*):
# run build/fuzz/fuzz_reader FILE to replay it.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/fuzz
seconds=${MF_FUZZ_SECONDS:-60}
rm -rf "$out" && mkdir -p "$out/seeds" "$out/corpus" "$out/runs"
cd "$top" # report_html.c's .incbin names its page from here
clang -O1 -g -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE -I"$top/c_core" -I"$top/mf_print" \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o "$out/fuzz_reader" \
    "$top/tests/fuzz/fuzz_reader.c" $(ls "$top"/mf_print/*.c | grep -v '/main\.c$') \
    -ldw -lelf -liberty -lz
cd "$out"

# Seeds: each thread file of each run, with its process file behind it.
for prog in four_threads exact_sites many_threads; do
    gcc -O1 -g -fno-omit-frame-pointer -o "$prog" "$top/tests/programs/$prog.c" -lpthread
    for sample in 1 100; do
        run=$out/runs/$prog.$sample && mkdir -p "$run"
        (cd "$run" && MALLOC_FREQ_DIR=. MALLOC_FREQ_SAMPLE=$sample \
            LD_PRELOAD="$top/build/libmalloc_freq.so" "../../$prog" >/dev/null)
    done
done
python3 - "$out/runs" "$out/seeds" <<'PY'
import glob, os, struct, sys
runs, seeds = sys.argv[1:]
n = 0
for proc in sorted(glob.glob(os.path.join(runs, "*", "malloc_freq.*", "process.*.mfp"))):
    d = os.path.dirname(proc)
    p = open(proc, "rb").read()
    for t in sorted(glob.glob(os.path.join(d, "thread.*.mft")))[:4]:
        data = open(t, "rb").read()
        with open(os.path.join(seeds, f"seed{n:03d}"), "wb") as f:
            f.write(struct.pack("<I", len(data)) + data + p)
        n += 1
print(f"{n} seeds from real profiles")
PY
# Inputs that once failed (tests/fuzz/regressions/): seeds too, so each is run first.
cp "$top"/tests/fuzz/regressions/* seeds/

# mf_print's messages about bad files go to stderr: closed (-close_fd_mask=2, libFuzzer keeps
# its own), sanitizer reports go to files instead.
# mf_print leaves some memory to exit (the directory name processes point to, interned
# names): no leak check, but -rss_limit_mb stops memory that grows with every input.
export ASAN_OPTIONS=detect_leaks=0:log_path=$out/asan
export UBSAN_OPTIONS=print_stacktrace=1:log_path=$out/ubsan
rc=0
./fuzz_reader -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
    -close_fd_mask=2 -print_final_stats=1 corpus seeds 2>fuzz.log || rc=$?
grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb)' fuzz.log || true
if [ $rc != 0 ]; then
    tail -30 fuzz.log
    cat asan.* ubsan.* 2>/dev/null | head -80
    echo "FAIL fuzz_reader (exit $rc; the input is kept in $out)"
    exit 1
fi
echo "PASS fuzz_reader: ${seconds} s, $(ls corpus | wc -l) inputs in the corpus"
