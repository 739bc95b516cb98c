#!/usr/bin/env bash
# make test-fuzz: builds tests/fuzz/fuzz_reader.c with clang's libFuzzer under ASan+UBSan,
# seeds it with real profiles made here by the preload library on small programs of
# tests/programs/ (per reader, as fuzz_reader.c takes its input: a thread file and its
# process file; saved profiles mf_print --save wrote of them, gzipped and not; live heap
# files of live_heap.c with their process and thread files), and fuzzes each of mf_print's
# readers with its model and reports for a share of MF_FUZZ_SECONDS (60) seconds. A crash,
# a sanitizer report, a leak of time (-timeout, 10 s an input) or memory (-rss_limit_mb)
# fails it, and the input that did is kept in build/fuzz/ (crash-*, timeout-*, oom-*): run
# build/fuzz/fuzz_reader FILE to replay it.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/fuzz
seconds=${MF_FUZZ_SECONDS:-60}
readers="thread pprof live timeline"
rm -rf "$out" && mkdir -p "$out/runs"
for r in $readers; do mkdir -p "$out/seeds/$r" "$out/corpus/$r"; done
cd "$top" # report_html.c's .incbin names its page from here
# mf_print's objects but main's, built by the Makefile's rules with clang's instrumentation.
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all"
make -s --no-print-directory BUILD="$out/lib" CC=clang \
    CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $sanitize" "$out/lib/mf_print.a"
clang -O1 -g -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE $(make -s --no-print-directory mf_print-include) \
    -fsanitize=fuzzer $sanitize -o "$out/fuzz_reader" \
    "$top/tests/fuzz/fuzz_reader.c" "$out/lib/mf_print.a" -ldw -ldebuginfod -lelf -liberty -lz
cd "$out"

# Profiles: each program at two sampling intervals; live_heap's with its live heap, each
# of its modes that exits by itself.
for prog in four_threads exact_sites many_threads live_heap; do
    gcc -O1 -g -fno-omit-frame-pointer -o "$prog" "$top/tests/programs/$prog.c" -lpthread
done
profile() { # name, program and its arguments, under the environment given before
    local run=$out/runs/$1 && shift && mkdir -p "$run"
    (cd "$run" && MALLOC_FREQ_DIR=. LD_PRELOAD="$top/build/libmalloc_freq.so" "$@" \
        </dev/null >/dev/null)
}
for prog in four_threads exact_sites many_threads; do
    for sample in 1 100; do
        MALLOC_FREQ_SAMPLE=$sample profile "$prog.$sample" "../../$prog"
    done
done
for mode in temps leaks threads; do
    for live in all sampled; do
        MALLOC_FREQ_LIVE=$live MALLOC_FREQ_SAMPLE=1 profile "live_heap.$mode.$live" \
            ../../live_heap "$mode"
    done
done
# Timelines: the launcher records one of each run (short runs: a point or two).
for prog in four_threads exact_sites; do
    "$top/build/malloc_freq" -q -s 1 -o "runs/tl.$prog" -- "./$prog" >/dev/null
done
# Saved profiles of each process directory, trimmed and not, and of the live heap's.
n=0
for dir in runs/*/malloc_freq.*; do
    n=$((n + 1))
    "$top/build/mf_print" --save "runs/saved.$n.pb.gz" "$dir" >/dev/null
    "$top/build/mf_print" --no-trim --save "runs/saved.$n.untrimmed.pb.gz" "$dir" >/dev/null
    if ls "$dir"/live.*.mfl >/dev/null 2>&1; then
        "$top/build/mf_print" --live --save "runs/saved.$n.live.pb.gz" "$dir" >/dev/null
    fi
done
python3 - "$out/runs" "$out/seeds" "$top/tests/lib" <<'PY'
import glob, gzip, os, struct, sys
runs, seeds = sys.argv[1:3]
sys.path.insert(0, sys.argv[3])
from harness import F  # c_core/mf_format.h
live_header, live_record, live_stats = F.live_header.size, F.live_record.size, F.live_stats.size
count = {}

def seed(reader, data):
    n = count.get(reader, 0)
    count[reader] = n + 1
    with open(os.path.join(seeds, reader, f"seed{n:03d}"), "wb") as f:
        f.write(data)

def compact_live(data, records=1024, stats=64):
    """The live file as the reader takes it, its tables cut to the records alive and the
    statistics used (a table's order is the writer's hashing, which the reader does not
    need), so that it fits the fuzzer's inputs."""
    h = F.live_header
    (cap, scap), (roff, soff) = (struct.unpack_from("<II", data, h.capacity),
                                 struct.unpack_from("<QQ", data, h.records_offset))
    live = [data[roff + i * live_record:roff + (i + 1) * live_record] for i in range(cap)]
    live = [r for r in live if struct.unpack_from("<I", r, F.live_record.state)[0]
            == F.LIVE_RECORD_LIVE][:records]
    used = [data[soff + i * live_stats:soff + (i + 1) * live_stats] for i in range(scap)]
    used = [s for s in used if struct.unpack_from("<Q", s)[0]][:stats]
    pow2 = lambda k: 1 << max(k - 1, 0).bit_length()
    ncap, nscap = pow2(len(live)), pow2(len(used))
    head = bytearray(data[:live_header])
    struct.pack_into("<II", head, h.capacity, ncap, nscap)
    struct.pack_into("<QQ", head, h.records_offset, live_header, live_header + ncap * live_record)
    return (bytes(head) + b"".join(live) + bytes((ncap - len(live)) * live_record) +
            b"".join(used) + bytes((nscap - len(used)) * live_stats))

for proc in sorted(glob.glob(os.path.join(runs, "*", "malloc_freq.*", "process.*.mfp"))):
    d = os.path.dirname(proc)
    p = open(proc, "rb").read()
    lives = glob.glob(os.path.join(d, "live.*.mfl"))
    for t in sorted(glob.glob(os.path.join(d, "thread.*.mft")))[:4]:
        data = open(t, "rb").read()
        if lives:  # each thread file with the records of its stacks, with its process file
            live = compact_live(open(lives[0], "rb").read())
            seed("live", struct.pack("<I", 2 << 30 | len(data)) + data +
                 struct.pack("<I", len(p)) + p + live)
        else:
            seed("thread", struct.pack("<I", len(data)) + data + p)
            # and as two images of one program (fuzz_reader.c: bit 29)
            seed("thread", struct.pack("<I", 1 << 29 | len(data)) + data + p)
for tl in sorted(glob.glob(os.path.join(runs, "tl.*", "timeline.mftl"))):
    d = glob.glob(os.path.join(os.path.dirname(tl), "malloc_freq.*"))[0]
    p = open(glob.glob(os.path.join(d, "process.*.mfp"))[0], "rb").read()
    data = open(sorted(glob.glob(os.path.join(d, "thread.*.mft")))[0], "rb").read()
    seed("timeline", struct.pack("<I", 3 << 30 | len(data)) + data +
         struct.pack("<I", len(p)) + p + open(tl, "rb").read())
for saved in sorted(glob.glob(os.path.join(runs, "saved.*.pb.gz"))):
    data = open(saved, "rb").read()
    flag = 1 if ".untrimmed." in saved else 0  # read with --no-trim, as written
    seed("pprof", struct.pack("<I", 1 << 30 | flag) + data)
    seed("pprof", struct.pack("<I", 1 << 30 | flag) + gzip.decompress(data))
print(", ".join(f"{n} {r} seeds" for r, n in sorted(count.items())) + " from real profiles")
PY
# Inputs that once failed (tests/fuzz/regressions/): seeds of every reader, so each is run
# first (its leading word names its reader).
for r in $readers; do cp "$top"/tests/fuzz/regressions/* "seeds/$r/"; done

# mf_print's messages about bad files go to stderr: closed (-close_fd_mask=2, libFuzzer keeps
# its own), sanitizer reports go to files instead.
# mf_print leaves some memory to exit (the directory name processes point to, interned
# names): no leak check, but -rss_limit_mb stops memory that grows with every input.
export ASAN_OPTIONS=detect_leaks=0:log_path=$out/asan
export UBSAN_OPTIONS=print_stacktrace=1:log_path=$out/ubsan
nreaders=$(echo $readers | wc -w)
share=$((seconds / nreaders > 0 ? seconds / nreaders : 1))
failed=0
for r in $readers; do
    rc=0
    ./fuzz_reader -max_total_time="$share" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
        -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$out/$r-" "corpus/$r" \
        "seeds/$r" 2>"fuzz.$r.log" || rc=$?
    grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "fuzz.$r.log" |
        sed "s/^/$r: /" || true
    if [ $rc != 0 ]; then
        tail -30 "fuzz.$r.log"
        cat asan.* ubsan.* 2>/dev/null | head -80
        echo "FAIL fuzz_reader on the $r reader (exit $rc; the input is kept in $out as $r-*)"
        failed=1
        break
    fi
    echo "PASS fuzz_reader on the $r reader: ${share} s, $(ls "corpus/$r" | wc -l) inputs in its corpus"
done
exit $failed
