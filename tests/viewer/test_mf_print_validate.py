"""mf_print's read+validate stage against hostile and damaged profiles (issue 12, "Any
directory, and never a number that lies"): every profile here is written by the real preload
library (tests/programs/four_threads.c: worker k calls site_worker_k (k+1)*100 times, 40 bytes
each) and then damaged with Python. mf_print must name each bad file in one line, print the
rest with the exact counts, never block, never cost more than the file's size allows, never
count a thing twice and never show a share above 100 %.

MF_TEST_PRINT=/path/to/an/older/mf_print runs these against another build."""

import json
import os
import random
import shutil
import stat
import struct
import subprocess
import time

import harness as rt

F = rt.F  # c_core/mf_format.h
T_STAMP, T_PID, T_TID, T_SEQ, T_MAX_DEPTH = (F.thread_header.stamp, F.thread_header.pid,
                                             F.thread_header.tid, F.thread_header.seq,
                                             F.thread_header.max_depth)
T_TOTALS, T_SEG_SIZE = F.thread_header.totals_calls, F.thread_header.segment_size
T_NSEG, T_SEG_OFF, SEG_ENTRIES = (F.thread_header.nsegments, F.thread_header.segment_offset,
                                  F.SEGMENT_ENTRIES_OFFSET)
ENTRY = rt.ENTRY  # F.entry.fields
T_UNPROF_SAMPLES, T_UNPROF_CALLS = (F.thread_header.unprofiled_samples,
                                    F.thread_header.unprofiled_calls)
T_HEADER_BYTES = F.THREAD_HEADER_BYTES
MF_DEPTH_MAX = F.DEPTH_MAX
MF_FLUSH_CALLS = F.FLUSH_CALLS
MF_THREAD_FILE_MAX = F.THREAD_FILE_MAX
P_HEADER_SIZE = F.process_header.header_size
MODULE = struct.Struct(F.module_record.format)
MF_MODULE_MAGIC = F.MODULE_MAGIC
WORKER_CALLS = {k: (k + 1) * 100 for k in range(4)}


def prefix():
    return "mf_print: "


def four_threads(prog=None, outdir=None):
    """A fresh exact profile of four_threads: (Run, {k: its thread file}) ."""
    r = rt.run_ok([prog or rt.c_program("four_threads")], outdir=outdir)
    tids = {}
    for line in r.stdout.splitlines():
        _, k, tid = line.split()
        tids[int(k)] = tid
    by_tid = {os.path.basename(f).split(".")[3]: f for f in rt.thread_files(r.profile)}
    return r, {k: by_tid[tid] for k, tid in tids.items()}


def copy_profile(profile, name="damaged"):
    dst = os.path.join(rt.fresh_dir(), name)
    shutil.copytree(profile, dst)
    return dst


def moved(path, profile):
    return os.path.join(profile, os.path.basename(path))


def read(path):
    with open(path, "rb") as f:
        return bytearray(f.read())


def write(path, data):
    with open(path, "wb") as f:
        f.write(bytes(data))


def file_entries(data):
    """(offset of the entry, its fields as a dict) of every published entry of a thread
    file."""
    return [(d["at"], d) for d in rt.thread_file_stacks(data)]


def site_entry(data):
    """The entry with the most calls (the worker's site) and its frames."""
    at, e = max(file_entries(data), key=lambda x: x[1]["calls"])
    return at, e, e["stack"]


def append_segment(data, cap, ncap, stacks):
    """Appends a segment of `cap` entries and `ncap` nodes holding stacks [(frames innermost
    first, samples, calls)], as the writer lays one out."""
    off = (len(data) + 4095) & ~4095
    data.extend(b"\0" * (off - len(data)))
    k = struct.unpack_from("<Q", data, T_NSEG)[0]
    his = rt.pc_his(data)
    seg = rt.stack_segment(k, cap, ncap, stacks, his)
    rt.set_pc_his(data, his)
    struct.pack_into("<Q", data, T_SEG_OFF + 8 * k, off)
    struct.pack_into("<Q", data, T_SEG_SIZE + 8 * k, len(seg))
    struct.pack_into("<Q", data, T_NSEG, k + 1)
    data.extend(seg)
    return data


def run_print(args, timeout=60):
    try:
        r = subprocess.run([rt.MF_PRINT] + args, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise rt.TestFailure(f"mf_print {' '.join(args)} did not end in {timeout} s")
    rt.expect(r.returncode < 128 and r.returncode >= 0,
              f"mf_print died of a signal (status {r.returncode}): {r.stderr[-300:]!r}")
    return r


def csv_sites(stdout):
    rows = rt.parse_csv(stdout.decode())
    sites = {}
    for row in rows:
        sites[row.site] = sites.get(row.site, 0) + row.calls
    return sites


def expect_workers(stdout, workers, what):
    sites = csv_sites(stdout)
    got = {k: sites.get(f"site_worker_{k}", 0) for k in range(4)}
    want = {k: (WORKER_CALLS[k] if k in workers else 0) for k in range(4)}
    rt.expect_eq(got, want, f"{what}: calls per worker site")


def skip_line(profile, path, why):
    return f"{prefix()}skipping {os.path.basename(profile)}/{os.path.basename(path)}: {why}"


# ---- 0. header sizes -----------------------------------------------------------------------

@rt.test
def test_validate_process_header_sizes():
    """Format 8's process header is whole from the start (format 6 got rules_learned,
    rules_loaded and the ramp's two fields without a new version, and was read short): one
    of 8 bytes less is refused in one line, the image's frames then unsymbolized; one of 8
    bytes more (a later writer's field) is read as before, its report the same."""
    r, _ = four_threads()
    want = run_print(["--dir", r.profile, "--format", "csv"])
    h = rt.F.process_header
    for delta in (-8, 8):
        bad = copy_profile(r.profile, "header%+d" % delta)
        (proc,) = [os.path.join(bad, f) for f in os.listdir(bad) if f.startswith("process.")]
        data = read(proc)
        struct.pack_into("<I", data, h.header_size, h.size + delta)
        write(proc, data[:h.size + min(delta, 0)] + bytes(max(delta, 0)) + data[h.size:])
        got = run_print(["--dir", bad, "--format", "csv"])
        if delta < 0:
            rt.expect(skip_line(bad, proc, "bad header size %d" % (h.size + delta)).encode()
                      in got.stderr, f"a header of {h.size + delta} bytes: {got.stderr!r}")
        else:
            rt.expect_eq((got.returncode, got.stderr, got.stdout), (0, b"", want.stdout),
                         f"a header of {h.size + delta} bytes: status, stderr, report")


# ---- 1. depth ------------------------------------------------------------------------------

@rt.test
def test_validate_refuses_stacks_deeper_than_the_writer_makes():
    """max_depth 4096 (the old reader took up to 65,536; the writer records at most 512): the
    file is named and skipped, the other threads printed. A stack of exactly 512 frames, the
    writer's deepest, prints whole in the tree: 512 levels, the total above 100 % noted."""
    r, files = four_threads()
    bad = copy_profile(r.profile)
    path = moved(files[3], bad)
    data = read(path)
    _, e, frames = site_entry(data)
    site = frames[-4]  # site_worker_3, worker, start_thread, clone3: the outermost four
    struct.pack_into("<I", data, T_MAX_DEPTH, 4096)
    write(path, append_segment(data, 2048, 8192, [([site] * 4096, 1, 1)]))
    out = run_print(["--dir", bad, "--format", "csv"])
    rt.expect_eq(out.stderr.decode().splitlines(),
                 [skip_line(bad, path, "bad max_depth 4096 (malloc_freq records at most 512 "
                                       "frames)")], "stderr")
    rt.expect_eq(out.returncode, 0, "exit status")
    expect_workers(out.stdout, {0, 1, 2}, "depth 4096")

    # The deepest the writer makes: 512 frames of site_worker_3, one call.
    ok = copy_profile(r.profile, "deepest")
    path = moved(files[3], ok)
    data = read(path)
    struct.pack_into("<I", data, T_MAX_DEPTH, MF_DEPTH_MAX)
    write(path, append_segment(data, 256, 1024, [([site] * MF_DEPTH_MAX, 1, 1)]))
    out = run_print(["--dir", ok, "--threshold", "0"])
    rt.expect_eq((out.returncode, out.stderr), (0, b""), "the 512-frame stack: status, stderr")
    lines = rt.tree_lines(out.stdout.decode())
    chain = [x for x in lines if x.name == "site_worker_3"]
    rt.expect_eq(len(chain), MF_DEPTH_MAX, "site_worker_3 levels in the tree")
    rt.expect_eq(chain[0].calls, WORKER_CALLS[3] + 1, "site_worker_3's calls (its stack and "
                                                      "the 512-frame one)")
    rt.expect(all(x.percent <= 100 for x in lines), "a share above 100 %")


# ---- 2. cost bounded by size ---------------------------------------------------------------

def chained_file(path, depth=512, entries=2048):
    """A thread file of `entries` stacks of `depth` frames that share all but their
    innermost frame (one trunk of depth - 1 nodes): the writer's own layout, no module holds
    the addresses."""
    data = read(path)
    struct.pack_into("<Q", data, T_NSEG, 0)
    data = data[:T_HEADER_BYTES]
    struct.pack_into("<I", data, T_MAX_DEPTH, depth)
    trunk = [0x10000 + 16 * i for i in range(depth - 1)]
    append_segment(data, 4096, 16384,
                   [([0x900000 + 16 * i] + trunk, 1, 1) for i in range(entries)])
    return data


def node_at(data, i):
    """The file offset of segment 0's node i."""
    return rt.node_offset(data, rt.node_ref(0, i))


@rt.test
def test_validate_follows_node_chains_once_and_refuses_broken_ones():
    """Stacks share their outer frames' nodes (format 6 on): 2,048 stacks of 512 frames over
    one 511-node trunk read whole (each of the 2,048 distinct, 512 frames deep). A chain that
    is not whole is refused, in one line: a node whose caller comes after it (a loop), a
    chain longer than the header's max_depth, an entry whose node lies outside the file."""
    r, files = four_threads()
    good = copy_profile(r.profile, "trunk")
    path = moved(files[2], good)
    data = chained_file(path)
    write(path, data)
    calls = struct.unpack_from("<Q", data, T_TOTALS)[0]
    struct.pack_into("<Q", data, T_TOTALS, calls + 2048)
    write(path, data)
    out = run_print(["--dir", good, "--format", "csv", "--full-stacks", "--no-fold"])
    rt.expect_eq((out.returncode, out.stderr), (0, b""), "the shared trunk: status, stderr")
    rows = [row for row in rt.parse_csv(out.stdout.decode()) if len(row.stack) == 512]
    rt.expect_eq((len(rows), sum(row.calls for row in rows)), (2048, 2048),
                 "512-frame stacks and their calls")

    # node 5 (depth 6) calls node 7: its caller after it, a loop through 6 and 7
    # the header's max_depth one frame short of the chains' 512
    # the first entry's node in segment 3, which the file does not have
    (off0, _), = rt.thread_segments(data)
    first_entry = off0 + SEG_ENTRIES
    breaks = {
        "loop": (lambda d: struct.pack_into(
                     "<I", d, node_at(d, 5) + F.frame_node.up,
                     struct.unpack_from("<I", d, node_at(d, 5) + F.frame_node.up)[0]
                     & ~rt.NODE_PARENT_MASK | rt.node_ref(0, 7)),
                 "segment 0 entry 0: bad node"),
        "depth": (lambda d: struct.pack_into("<I", d, T_MAX_DEPTH, MF_DEPTH_MAX - 1),
                  "segment 0 entry 0: its stack is deeper than max_depth 511"),
        "outside": (lambda d: struct.pack_into("<I", d, first_entry + F.entry.node,
                                               rt.node_ref(3, 0)),
                    "segment 0 entry 0: bad node"),
        # the header's table of return addresses' high halves emptied: no node's is there
        "high half": (lambda d: struct.pack_into("<I", d, F.thread_header.npc_hi, 0),
                      "segment 0 entry 0: bad node"),
    }
    for kind, (damage, why) in breaks.items():
        bad = copy_profile(r.profile, kind)
        path = moved(files[2], bad)
        d = chained_file(path)
        damage(d)
        write(path, d)
        out = run_print(["--dir", bad, "--format", "csv"])
        err = out.stderr.decode().splitlines()
        rt.expect(len(err) == 1 and err[0].startswith(skip_line(bad, path, why)),
                  f"{kind}: stderr {err}")
        rt.expect_eq(out.returncode, 0, f"{kind}: exit status")
        expect_workers(out.stdout, {0, 1, 3}, kind)


def splitmix_inverse(x):
    """The inverse of mf_hash_u64 (splitmix64's finalizer)."""
    m = (1 << 64) - 1
    x ^= (x >> 31) ^ (x >> 62)
    x = (x * pow(0x94D049BB133111EB, -1, 1 << 64)) & m
    x ^= (x >> 27) ^ (x >> 54)
    x = (x * pow(0xBF58476D1CE4E5B9, -1, 1 << 64)) & m
    x ^= (x >> 30) ^ (x >> 60)
    return x


def one_module_everywhere(proc_path, exe):
    """Rewrites a process file to one module record: exe, at bias 0, covering every
    address, so that every frame's address is the symbolizer's cache key as it stands."""
    data = read(proc_path)
    hsize = struct.unpack_from("<I", data, P_HEADER_SIZE)[0]
    path = exe.encode()
    size = (MODULE.size + len(path) + 1 + 7) & ~7
    rec = bytearray(MODULE.pack(MF_MODULE_MAGIC, size, 0, 0, (1 << 64) - 1, 0, len(path), 0, 0,
                                b"\0" * 32) + path)
    rec.extend(b"\0" * (size - len(rec)))
    write(proc_path, data[:hsize] + rec)


def lone_thread_file(r, files, kind, max_depth):
    """A copy of r's profile named kind, worker 0's thread file alone in it with every address
    in one module (one_module_everywhere): (directory, the file's path, its header with no
    segment and max_depth as given), for a test to append segments of its own."""
    d = copy_profile(r.profile, kind)
    one_module_everywhere(rt.process_files(d)[0], rt.c_program("four_threads"))
    for k, f in files.items():
        if k != 0:
            os.unlink(moved(f, d))
    path = moved(files[0], d)
    data = read(path)[:T_HEADER_BYTES]
    struct.pack_into("<Q", data, T_NSEG, 0)
    struct.pack_into("<I", data, T_MAX_DEPTH, max_depth)
    return d, path, data


def fastest_csv(d):
    """mf_print --format csv of d twice: (the last run, the faster run's seconds)."""
    best = None
    for _ in range(2):
        t0 = time.monotonic()
        out = run_print(["--dir", d, "--format", "csv"], timeout=120)
        took = time.monotonic() - t0
        best = took if best is None else min(best, took)
    return out, best


@rt.test
def test_validate_hash_keys_cannot_be_chosen_to_collide():
    """65,536 return addresses that all share one probe chain under an unkeyed hash (they
    are the inverse of splitmix64 of i << 32): with a per-run key they cost what 65,536
    random addresses do (before: 13 times as much)."""
    r, files = four_threads()
    times = {}
    for kind in ("random", "colliding"):
        d, path, data = lone_thread_file(r, files, kind, 16)
        rng = random.Random(12)
        n = 65536
        addrs = ([splitmix_inverse(i << 32) for i in range(1, n + 1)] if kind == "colliding"
                 else [rng.getrandbits(64) | 1 for _ in range(n)])
        # 4,096 one-call stacks of 16 frames each (wide nodes: their high halves are more
        # than a header holds); the site's calls fit in the slack
        append_segment(data, 32768, 2 * 65536,
                       [(addrs[16 * i:16 * i + 16], 1, 1) for i in range(n // 16)])
        write(path, data)
        out, best = fastest_csv(d)
        rt.expect_eq((out.returncode, out.stderr), (0, b""), f"{kind}: status, stderr")
        rows = rt.parse_csv(out.stdout.decode())
        rt.expect_eq(sum(row.calls for row in rows if len(row.stack) == 16), n // 16,
                     f"{kind}: calls of the 16-frame stacks")
        times[kind] = best
    rt.expect(times["colliding"] < 3 * times["random"] + 0.3,
              f"colliding addresses took {times['colliding']:.2f} s, random ones "
              f"{times['random']:.2f} s")


def old_stack_hash_chain(frames, seed):
    """mf_print's stack hash before it was keyed, up to its final mix: a chain of
    (h ^ v) * K + (h >> 29) from a constant."""
    m = (1 << 64) - 1
    h = 0xCBF29CE484222325 ^ seed
    for v in frames:
        h = (((h ^ v) * 0x9E3779B97F4A7C15) + (h >> 29)) & m
    return h


@rt.test
def test_validate_stacks_cannot_be_chosen_to_share_a_hash():
    """16,384 two-frame stacks whose second frame is solved so that every stack's unkeyed
    hash is the same (the chain's last step is invertible): one probe chain for all of them,
    16,384^2 / 2 comparisons. Stacks are hashed with the run's key, so they cost what random
    stacks do."""
    r, files = four_threads()
    n, target = 16384, 0x0123456789ABCDEF
    k_inv = pow(0x9E3779B97F4A7C15, -1, 1 << 64)
    m = (1 << 64) - 1
    times = {}
    for kind in ("random", "colliding"):
        d, path, data = lone_thread_file(r, files, kind, 16)
        calls = struct.unpack_from("<Q", data, T_TOTALS)[0]  # malloc's exact calls
        struct.pack_into("<Q", data, T_TOTALS, calls + n)
        rng = random.Random(13)
        frames = []
        for i in range(n):
            v1 = 0x100000 + 16 * i
            if kind == "colliding":
                h1 = old_stack_hash_chain([v1], 2)  # seed: process 0, flags 0, depth 2
                v2 = (((target - (h1 >> 29)) * k_inv) & m) ^ h1
                assert old_stack_hash_chain([v1, v2], 2) == target
            else:
                v2 = rng.getrandbits(64) | 1
            frames += [v1, v2]
        append_segment(data, 32768, 3 * n, [(frames[2 * i:2 * i + 2], 1, 1) for i in range(n)])
        write(path, data)
        out, best = fastest_csv(d)
        rt.expect_eq((out.returncode, out.stderr), (0, b""), f"{kind}: status, stderr")
        rows = rt.parse_csv(out.stdout.decode())
        rt.expect_eq(sum(row.calls for row in rows if len(row.stack) == 2), n,
                     f"{kind}: calls of the two-frame stacks")
        times[kind] = best
    rt.expect(times["colliding"] < 3 * times["random"] + 0.3,
              f"colliding stacks took {times['colliding']:.2f} s, random ones "
              f"{times['random']:.2f} s")


MF_READ_SPLIT_MIN = 16 << 20  # mf_print/read/profile_read.c: a file this large is read in halves


@rt.test
def test_validate_a_large_file_is_read_whole_in_two_halves():
    """html_100k_stacks' thread file (100,000 one-call stacks, ~25 MB) is above the size
    from which two threads read it, a half each: every stack comes out, exact. Cut short
    inside its second half, it is named in one line."""
    r = rt.run_ok([rt.c_program("html_100k_stacks")])
    (path,) = rt.thread_files(r.profile)
    size = os.path.getsize(path)
    rt.expect(size >= MF_READ_SPLIT_MIN, f"the thread file is {size:,} bytes")
    out = run_print(["--dir", r.profile, "--format", "csv"])
    rt.expect_eq((out.returncode, out.stderr), (0, b""), "status, stderr")
    rows = rt.parse_csv(out.stdout.decode())
    by_bytes = {}
    for row in rows:
        by_bytes[row.bytes] = by_bytes.get(row.bytes, 0) + row.calls
    rt.expect_eq((len(rows), {row.calls for row in rows}, len({tuple(row.stack) for row in rows})),
                 (100000, {1}, 100000), "rows, calls per row, distinct stacks")
    rt.expect_eq(by_bytes, {16: 25000, 32: 25000, 48: 25000, 64: 25000}, "calls by size")
    bad = copy_profile(r.profile)
    os.truncate(moved(path, bad), size * 3 // 4)
    out = run_print(["--dir", bad, "--format", "csv"])
    err = out.stderr.decode().splitlines()
    rt.expect(len(err) == 1 and err[0].startswith(skip_line(bad, path, "truncated: segment")),
              f"stderr: {err}")
    rt.expect_eq(out.returncode, 0, "exit status")


# ---- 3. nothing counted twice, no sum that wraps, no share above 100 % ------------------------

@rt.test
def test_validate_a_directory_and_its_copy_are_read_once():
    """--dir A --dir copy-of-A: the copy's process file and each thread table are named and
    read once; the counts are A's, not twice A's."""
    r, files = four_threads()
    copy = copy_profile(r.profile, "copy-of-A")
    out = run_print(["--dir", r.profile, "--dir", copy, "--format", "csv"])
    name = os.path.basename(r.profile)
    want = [skip_line(copy, rt.process_files(copy)[0],
                      "a second file for the same process image (directory given twice?)")]
    for f in rt.thread_files(copy):
        want.append(skip_line(copy, f, f"the same thread table as {name}/{os.path.basename(f)} "
                                       "(its counts are read once)"))
    rt.expect_eq(out.stderr.decode().splitlines(), want, "stderr")
    rt.expect_eq(out.returncode, 0, "exit status")
    expect_workers(out.stdout, {0, 1, 2, 3}, "A and its copy")
    single = run_print(["--dir", r.profile])
    both = run_print(["--dir", r.profile, "--dir", copy])
    rt.expect_eq(rt.tree_header_total(both.stdout.decode()),
                 rt.tree_header_total(single.stdout.decode()), "the tree's total, A and copy")
    rt.expect_eq(rt.tree_header_total(single.stdout.decode()), rt.exact_total_calls(r.profile),
                 "the tree's total vs the headers")


@rt.test
def test_validate_totals_never_wrap():
    """One thread's malloc count set so that the sum over the files wraps to 10: the file is
    named and skipped; the total is the other files' sum, not a wrapped "10 (exact)"."""
    r, files = four_threads()
    bad = copy_profile(r.profile)
    path = moved(files[2], bad)
    others = sum(sum(rt.file_totals(f)[0]) for f in rt.thread_files(bad) if f != path)
    data = read(path)
    own = list(struct.unpack_from(f"<{F.FN_COUNT}Q", data, T_TOTALS))
    rest = sum(own) - own[0]
    huge = (1 << 64) + 10 - others - rest
    struct.pack_into("<Q", data, T_TOTALS, huge)
    write(path, data)
    out = run_print(["--dir", bad])
    from_file = huge + rest
    rt.expect_eq(out.stderr.decode().splitlines(),
                 [skip_line(bad, path, f"it counts {from_file:,} calls, more than a thread can "
                                       "make (2^60; damaged?)")], "stderr")
    rt.expect_eq(rt.tree_header_total(out.stdout.decode()), others, "the tree's total")
    lines = rt.tree_lines(out.stdout.decode())
    rt.expect(all(x.percent <= 100 for x in lines), "a share above 100 %")


@rt.test
def test_validate_stacks_above_the_thread_total_are_refused():
    """Worker 1's site holds 100 times its calls (and samples): far more than its thread
    counted, more than the calls a thread may not yet have added to its total (4,096): the
    file is named and skipped, no share of 10,000 % is printed."""
    r, files = four_threads()
    bad = copy_profile(r.profile)
    path = moved(files[1], bad)
    data = read(path)
    at, e, _ = site_entry(data)
    rt.set_entry_counts(data, e, e["samples"] * 100, e["calls"] * 100, e["bytes"] * 100)
    write(path, data)
    samples = sum(x["samples"] for _, x in file_entries(data)) + \
        struct.unpack_from("<Q", data, T_UNPROF_SAMPLES)[0]
    total = sum(rt.file_totals(path)[0])
    out = run_print(["--dir", bad, "--format", "csv"])
    rt.expect_eq(out.stderr.decode().splitlines(),
                 [skip_line(bad, path, f"its stacks hold {samples:,} samples, more than the "
                                       f"{total:,} calls it counted")], "stderr")
    expect_workers(out.stdout, {0, 2, 3}, "stacks above the total")


@rt.test
def test_validate_stacks_ahead_of_the_totals_never_show_above_100_percent():
    """A thread's stacks may run ahead of its total by the calls it has not yet added there
    (a live file, a killed process): worker 0's site 4,000 calls ahead, more than the whole
    profile's total. The tree says so in a note, takes shares of the stacks' sum, and shows
    none above 100 % (before: 3xx %)."""
    r, files = four_threads()
    bad = copy_profile(r.profile)
    path = moved(files[0], bad)
    data = read(path)
    at, e, _ = site_entry(data)
    rt.set_entry_counts(data, e, e["samples"] + 4000, e["calls"] + 4000, e["bytes"] + 4000 * 40)
    # Format 5: the slow path adds a sample to the header's size histogram with its entry,
    # so the histogram's class of 40 bytes (22) runs ahead with the site.
    c40 = F.thread_header.sizes + F.size_class.size * 22 + F.size_class.calls  # calls, bytes
    calls, nbytes = struct.unpack_from("<QQ", data, c40)
    struct.pack_into("<QQ", data, c40, calls + 4000, nbytes + 4000 * 40)
    write(path, data)
    total = rt.exact_total_calls(bad)
    out = run_print(["--dir", bad])
    text = out.stdout.decode()
    rt.expect_eq(out.stderr, b"", "stderr")
    stacks = total + 4000
    note = (f"  note       the stacks hold {stacks:,} calls, more than the exact total {total:,} "
            f"(a thread adds to its total every {MF_FLUSH_CALLS:,} calls: a live or killed "
            f"process); shares below are of {stacks:,}")
    rt.expect(note in text.splitlines(), f"no note {note!r} in {text[:900]!r}")
    lines = rt.tree_lines(text)
    site = [x for x in lines if x.top and x.name == "site_worker_0"]
    rt.expect_eq(len(site), 1, "site_worker_0 lines")
    rt.expect_eq(site[0].calls, WORKER_CALLS[0] + 4000, "site_worker_0's calls")
    rt.expect_eq(f"{site[0].percent:.2f}", f"{100.0 * (WORKER_CALLS[0] + 4000) / stacks:.2f}",
                 "site_worker_0's share")
    rt.expect(all(x.percent <= 100 for x in lines),
              f"a share above 100 %: {[x.percent for x in lines if x.percent > 100]}")


# ---- 4. only regular files -----------------------------------------------------------------

@rt.test
def test_validate_skips_fifos_devices_and_huge_files():
    """A thread file that is a FIFO (would block forever), a symbolic link to /dev/zero and a
    100 GB sparse file (each would end the report with "out of memory"): each named in one
    line, the rest printed, at once."""
    r, files = four_threads()
    bad = copy_profile(r.profile)
    stamp = os.path.basename(files[0]).split(".")[1]
    fifo = os.path.join(bad, f"thread.{stamp}.97.1.mft")
    link = os.path.join(bad, f"thread.{stamp}.98.2.mft")
    sparse = os.path.join(bad, f"thread.{stamp}.99.3.mft")
    os.mkfifo(fifo)
    os.symlink("/dev/zero", link)
    with open(sparse, "wb") as f:
        f.truncate(100 * 1024 ** 3)
    out = run_print(["--dir", bad, "--format", "csv"], timeout=30)
    rt.expect_eq(out.stderr.decode().splitlines(), [
        skip_line(bad, fifo, "not a regular file (a FIFO)"),
        skip_line(bad, link, "a symbolic link (not followed)"),
        skip_line(bad, sparse, f"too large ({100 * 1024 ** 3:,} bytes; at most "
                               f"{MF_THREAD_FILE_MAX:,})")], "stderr")
    rt.expect_eq(out.returncode, 0, "exit status")
    expect_workers(out.stdout, {0, 1, 2, 3}, "with special files beside")


@rt.test
def test_validate_a_module_that_became_a_fifo():
    """The profiled program's file replaced by a FIFO: symbolization says so in one line and
    goes on (before: it blocked forever in open)."""
    src = rt.c_program("four_threads")
    d = rt.fresh_dir()
    prog = os.path.join(d, "four_threads_fifo")
    shutil.copy(src, prog)
    r, _ = four_threads(prog)
    os.unlink(prog)
    os.mkfifo(prog)
    out = run_print(["--dir", r.profile, "--format", "csv"], timeout=30)
    rt.expect_eq(out.stderr.decode().splitlines(),
                 [f"{prefix()}cannot read {prog}: not a regular file (a FIFO); its frames stay "
                  "unsymbolized"], "stderr")
    rows = rt.parse_csv(out.stdout.decode())
    rt.expect_eq(sum(row.calls for row in rows), rt.exact_total_calls(r.profile),
                 "CSV total vs the headers")


# ---- 5. control characters ------------------------------------------------------------------

@rt.test
def test_validate_paths_with_control_characters_are_escaped():
    """A program in a directory and under a name holding ESC [31m: the tree's header, its
    frame labels ([name+0x...]: the file is gone, so no symbols) and the stderr line show
    \\x1b, never the byte."""
    src = rt.c_program("four_threads")
    d = os.path.join(rt.fresh_dir(), "dir\x1b[31m")
    os.mkdir(d)
    prog = os.path.join(d, "ft\x1b[32m")
    shutil.copy(src, prog)
    r, _ = four_threads(prog)
    os.unlink(prog)
    out = run_print(["--dir", r.profile, "--threshold", "0"])
    shown = prog.replace("\x1b", "\\x1b")
    for what, text in (("stdout", out.stdout), ("stderr", out.stderr)):
        rt.expect(b"\x1b" not in text, f"an escape byte on {what}")
    rt.expect_eq(out.stderr.decode().splitlines(),
                 [f"{prefix()}cannot read {shown}: No such file or directory; its frames stay "
                  "unsymbolized"], "stderr")
    header = out.stdout.decode().splitlines()
    rt.expect_eq(header[1], f"  program    {shown} (pid {r.pid})", "the program line")
    labels = [x.name for x in rt.tree_lines(out.stdout.decode())
              if x.name.startswith("[ft")]
    rt.expect(labels and all(x.startswith("[ft\\x1b[32m+0x") for x in labels),
              f"frame labels {labels[:3]}")


# ---- 6. a live process ----------------------------------------------------------------------

@rt.test
def test_validate_a_running_process_is_called_a_snapshot():
    """Read while the process runs: the tree's header says it is still running and that the
    counts are a snapshot; after kill -9 it no longer does."""
    said = {}

    def while_alive(profile):
        out = run_print(["--dir", profile])
        said["alive"] = out.stdout.decode().splitlines()
        said["pid"] = int(profile.rsplit(".", 1)[1])
    profile, _ = rt.killed_live_sleeper("1", while_alive)
    line = (f"  running    pid {said['pid']} was still running when read: every count is a "
            "snapshot of that moment")
    rt.expect(line in said["alive"], f"no {line!r} in {said['alive'][:8]}")
    after = run_print(["--dir", profile]).stdout.decode().splitlines()
    rt.expect(not any(x.startswith("  running") for x in after), f"after kill: {after[:8]}")


@rt.test
def test_validate_base_compares_a_profile_with_its_copy():
    """--base copy-of-A A: each side is read afresh (before: the reader's stack map kept the
    old side's entries, and the new side's first stack probed them: a segmentation fault).
    Nothing changed: every site's change is 0."""
    r, _ = four_threads()
    copy = copy_profile(r.profile, "copy-of-A")
    out = run_print(["--base", copy, r.profile, "--format", "csv"])
    rt.expect_eq((out.returncode, out.stderr), (0, b""), "status, stderr")
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO(out.stdout.decode())))
    sites = {row["stack"]: (int(row["calls_change"]), int(row["new_calls"]))
             for row in rows if row["level"] == "site"}
    for k in range(4):
        rt.expect_eq(sites.get(f"site_worker_{k}"), (0, WORKER_CALLS[k]),
                     f"site_worker_{k}: (change, new calls)")
    rt.expect(all(int(row["calls_change"]) == 0 for row in rows), "a change in a copy")


@rt.test
def test_validate_identical_stacks_of_threads_are_one_stack():
    """50 threads allocate through one stack, 20 calls each, in 50 thread files: the reader
    merges their entries (hashed ahead of its map since 10^6 stacks wanted it) into one
    stack of 1,000 exact calls, beside main's stack of 10. A merge that went wrong leaves
    the CSV (merged by names) as it was, so JSON's raw stacks are what is checked."""
    r = rt.run_ok([rt.c_program("many_threads")])
    out = run_print(["--format", "json", r.profile])
    rt.expect_eq(out.returncode, 0, "exit status")
    stacks = json.loads(out.stdout)["stacks"]
    sites = {}
    for s in stacks:
        names = [f["function"] for f in s["frames"]]
        for site in ("site_thread", "site_main"):
            if site in names:
                sites.setdefault(site, []).append((s["calls"], s["samples"]))
    rt.expect_eq(sites, {"site_thread": [(1000, 1000)], "site_main": [(10, 10)]},
                 "stacks through each site: (calls, samples)")
