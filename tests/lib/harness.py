"""The shared test harness: building and running tests/programs/ under the preload library,
expectations, reading mf_print's CSV and tree, the profile's files read directly (with the
offsets of build/mf_format.py, generated from c_core/mf_format.h), the programs whose counts
the tests know, and the test registry (@test) that tests/run_tests.py runs. Every test
module imports this and no other test module. Standard library only."""

import csv
import glob
import io
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, "build")
OUT = os.path.join(BUILD, "tests")
PROGRAMS = os.path.join(REPO, "tests", "programs")
LIB = os.environ.get("MF_TEST_LIB", os.path.join(BUILD, "libmalloc_freq.so"))  # another build, to show a test fails without a fix
MF_PRINT = os.environ.get("MF_TEST_PRINT", os.path.join(BUILD, "mf_print"))  # another build, likewise
CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror"]
TIMEOUT = 300  # seconds, per child process
# A machine's debuginfod servers (Debian's profile.d sets DEBUGINFOD_URLS) would be asked by
# every mf_print run and change its footer: the debuginfod tests start their own. An
# exported COLUMNS would cut the text the tests compare: the narrow tests set their own.
for _var in ("DEBUGINFOD_URLS", "DEBUGINFOD_TIMEOUT", "DEBUGINFOD_PROGRESS", "DEBUGINFOD_VERBOSE",
             "COLUMNS"):
    os.environ.pop(_var, None)

# The preload library's exports: the C allocation functions and every global operator new
# (plain, nothrow, aligned, aligned nothrow; new and new[]).
ALLOC_API = {"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
             "valloc", "pvalloc",
             "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
             "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
             "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t"}
# The calls that take away what making the profile's files needs: the library makes them
# first, then calls glibc's; and pthread_create, before which it loads libunwind
# (lib_preload/mf_guard.c).
GUARD_API = {"setuid", "setgid", "seteuid", "setegid", "setreuid", "setregid", "setresuid",
             "setresgid", "setfsuid", "setfsgid", "setgroups", "chroot", "unshare", "setns",
             "setrlimit", "setrlimit64", "prlimit", "prlimit64", "pthread_create", "prctl"}

def _format_module():
    """build/mf_format.py, which `make` generates from c_core/mf_format.h."""
    path = os.path.join(BUILD, "mf_format.py")
    header = os.path.join(REPO, "c_core", "mf_format.h")
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(header):
        sys.exit(f"tests: {path} is missing or older than {header}; run `make` first")
    sys.path.insert(0, BUILD)
    import mf_format
    return mf_format


F = _format_module()  # the on-disk format: F.entry.calls, F.ENTRY_SIZED, ...
MF_FN_NAMES = F.FN_NAMES  # enum mf_fn, by index


class TestFailure(Exception):
    pass


def expect(cond, message):
    if not cond:
        raise TestFailure(message)


def wait_for(cond, what):
    """Polls cond every 10 ms until it is true; fails after TIMEOUT seconds (a bound on a
    test gone wrong, not a measurement)."""
    deadline = time.monotonic() + TIMEOUT
    while not cond():
        expect(time.monotonic() < deadline, f"no {what} after {TIMEOUT} s")
        time.sleep(0.01)


def expect_eq(got, want, what):
    if got != want:
        raise TestFailure(f"{what}: expected {want!r}, got {got!r}")


class Skip(Exception):
    """Raised by need(): the test cannot run here, for the reason given (a tool or module
    that is missing). The runner says each reason once and counts the tests it skipped."""


def need(have, what):
    """Skips the calling test unless `have`; `what` says what is missing and how to get it."""
    if not have:
        raise Skip(what)


# ---- building and running -----------------------------------------------------------

_built = {}


def build(name, sources, cxx=False, shared=False, libs=()):
    """Compiles tests/programs/<sources> into build/tests/<name> once per run."""
    if name in _built:
        return _built[name]
    os.makedirs(OUT, exist_ok=True)
    out = os.path.join(OUT, name)
    cmd = ["g++" if cxx else "gcc"] + CFLAGS
    if shared:
        cmd += ["-shared", "-fPIC"]
    cmd += ["-o", out] + [os.path.join(PROGRAMS, s) for s in sources] + list(libs)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise TestFailure(f"cannot compile {name}: {r.stderr.strip()}")
    _built[name] = out
    return out


def mf_print_sources():
    """mf_print's .c files (every folder under mf_print/, as the Makefile finds them) and its
    -I flags (c_core's and each folder's that holds a header): for a test that builds its
    own mf_print."""
    src, inc = [], {os.path.join(REPO, "c_core")}
    for d, _, files in os.walk(os.path.join(REPO, "mf_print")):
        src += [os.path.join(d, f) for f in files if f.endswith(".c")]
        if any(f.endswith(".h") for f in files):
            inc.add(d)
    return sorted(src), ["-I" + d for d in sorted(inc)]


def mf_print_libs():
    """The libraries mf_print links (the Makefile's PRINT_LIBS: libdw's and its debuginfod
    client's, zlib, ncurses for --watch)."""
    r = subprocess.run(["pkg-config", "--libs", "ncursesw"], capture_output=True, text=True)
    curses = r.stdout.split() if r.returncode == 0 else ["-lncursesw", "-ltinfo"]
    return ["-ldw", "-ldebuginfod", "-lelf", "-liberty", "-lz"] + curses


def c_program(name, libs=("-lpthread",)):
    return build(name, [name + ".c"], libs=libs)


# tests/programs/wrapper_sites.c at MALLOC_FREQ_SAMPLE=1: each site, its xmalloc or xstrdup
# folded into it, -> calls, bytes (test_fold.py, test_mf_print_formats.py).
WRAPPER_SITES = {
    "parse_args via xmalloc": (300, 300 * 16),
    "build_table via xmalloc": (500, 500 * 32),
    "read_lines via xmalloc": (700, 700 * 48),
    "arena_get via xmalloc": (500, 500 * 64),
    "format_name via xstrdup": (70, 70 * 6),
}

_run_dirs = []


def fresh_dir():
    d = tempfile.mkdtemp(prefix="mf_test_")
    _run_dirs.append(d)
    return d


class Run:
    def __init__(self, pid, rc, stdout, stderr, outdir):
        self.pid, self.rc, self.stdout, self.stderr, self.outdir = pid, rc, stdout, stderr, outdir

    @property
    def profile(self):
        """The malloc_freq.<pid> directory this run wrote."""
        return os.path.join(self.outdir, f"malloc_freq.{self.pid}")


def profiled_env(outdir, sample="1", extra=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("MALLOC_FREQ_"):
            del env[k]
    env["LD_PRELOAD"] = LIB
    env["MALLOC_FREQ_DIR"] = outdir
    if sample is not None:
        env["MALLOC_FREQ_SAMPLE"] = sample
    env.update(extra or {})
    return env


def run(argv, profile=True, sample="1", extra_env=None, outdir=None):
    """Runs argv (under the profiler unless profile=False) in a fresh output directory."""
    outdir = outdir or fresh_dir()
    if profile:
        env = profiled_env(outdir, sample, extra_env)
    else:
        env = {k: v for k, v in os.environ.items()
               if k != "LD_PRELOAD" and not k.startswith("MALLOC_FREQ_")}
        env.update(extra_env or {})
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         cwd=outdir)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise TestFailure(f"{' '.join(argv)} timed out after {TIMEOUT} s")
    return Run(p.pid, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
               outdir)


def run_ok(argv, rc=0, **kw):
    r = run(argv, **kw)
    expect(r.rc == rc, f"{os.path.basename(argv[0])} exited {r.rc}, expected {rc}; "
                       f"stderr: {r.stderr.strip()[-500:]!r}")
    expect(os.path.isdir(r.profile), f"no profile directory {r.profile}")
    return r


def mf_print(args, check=True):
    r = subprocess.run([MF_PRINT] + args, capture_output=True, text=True, timeout=TIMEOUT)
    if check and r.returncode != 0:
        raise TestFailure(f"mf_print {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r


def build_id_of(path):
    """The ELF file's build id, in hex."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def build_nodebug(where, debug, strip, debug_dir=None):
    """nodebug_lib as where/libnodebug.so (with -g or not, stripped or not; its debug
    information moved to debug_dir/.build-id/ if given) and nodebug_main as where/prog,
    linked to it by its path (rpath)."""
    os.makedirs(where, exist_ok=True)
    lib, prog = os.path.join(where, "libnodebug.so"), os.path.join(where, "prog")
    src = os.path.join(PROGRAMS, "nodebug_lib.c")
    flags = ["-O1", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror"]
    steps = [["gcc"] + flags + (["-g"] if debug else []) + ["-shared", "-fPIC", "-o", lib, src],
             ["gcc"] + flags + ["-g", "-o", prog, os.path.join(PROGRAMS, "nodebug_main.c"),
                                "-L" + where, "-lnodebug", "-Wl,-rpath," + where]]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        expect(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr.strip()}")
    if debug_dir:
        build_id = build_id_of(lib)
        target = os.path.join(debug_dir, ".build-id", build_id[:2], build_id[2:] + ".debug")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        subprocess.run(["objcopy", "--only-keep-debug", lib, target], check=True)
    if strip:
        subprocess.run(["strip", lib], check=True)
    return lib, prog


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def csv_frames(field):
    """A CSV stack or locations field as its frames: split at ';', each percent-decoded
    (mf_print encodes '%', ';', control characters and bytes that are not UTF-8 as %XX).
    A byte that is not UTF-8 comes back as a lone surrogate (errors="surrogateescape"):
    .encode(errors="surrogateescape") gives the name's bytes."""
    return [urllib.parse.unquote(f, errors="surrogateescape") for f in field.split(";")]


class Row:
    def __init__(self, d):
        self.calls = int(d["calls"])
        self.bytes = int(d["bytes"])
        self.samples = int(d["samples"])
        self.stack = csv_frames(d["stack"])
        self.locations = csv_frames(d["locations"])
        self.via = csv_frames(d["via"])[0]  # the wrapper folded into the site, "" if none

    @property
    def site(self):
        return function_name(self.stack[0])


def function_name(frame):
    """A frame's function without a C++ parameter list: `site(int)` -> `site`."""
    return frame.split("(", 1)[0] if not frame.startswith("[") else frame


def csv_rows(*dirs, extra=()):
    """mf_print's CSV for the profile directories, as Rows; stderr must be empty."""
    args = []
    for d in dirs:
        args += ["--dir", d]
    r = mf_print(args + ["--format", "csv"] + list(extra))
    expect(r.stderr == "", f"mf_print --format csv wrote to stderr: {r.stderr.strip()!r}")
    return parse_csv(r.stdout)


def parse_csv(text):
    reader = csv.DictReader(io.StringIO(text))
    expect(reader.fieldnames == ["calls", "bytes", "samples", "stack", "locations", "via"],
           f"CSV header is {reader.fieldnames}")
    return [Row(d) for d in reader]


def site_rows(rows, site):
    return [r for r in rows if r.site == site]


def site_totals(rows, site):
    """(calls, bytes, samples) summed over the rows whose allocation site is `site`."""
    rs = site_rows(rows, site)
    return (sum(r.calls for r in rs), sum(r.bytes for r in rs), sum(r.samples for r in rs))


def expect_sites(rows, expected, exact=True):
    """expected: {site: (calls, bytes)}; each site's rows must sum to exactly that."""
    bad = []
    for site, (calls, nbytes) in expected.items():
        got_calls, got_bytes, got_samples = site_totals(rows, site)
        if (got_calls, got_bytes) != (calls, nbytes):
            bad.append(f"{site}: expected {calls} calls {nbytes} bytes, "
                       f"got {got_calls} calls {got_bytes} bytes")
        elif exact and got_samples != got_calls:
            bad.append(f"{site}: {got_calls} calls but {got_samples} samples (not exact)")
    expect(not bad, "; ".join(bad))


def csv_total(rows):
    return sum(r.calls for r in rows)


# ---- the tree format (mf_print/render.c) ---------------------------------------------

def tree_text(*dirs, threshold=None, extra=()):
    args = []
    for d in dirs:
        args += ["--dir", d]
    if threshold is not None:
        args += ["--threshold", str(threshold)]
    r = mf_print(args + list(extra))
    expect(r.stderr == "", f"mf_print (tree) wrote to stderr: {r.stderr.strip()!r}")
    return r.stdout


_NUMBER = r"(\d[\d,]*)"
# A report line: calls (~ when estimated), ±error, percent, bytes ("512 B", "1.2 KiB"),
# ±error of the bytes (a column 7 wide when the tree has estimates), then the tree glyphs and
# the function (mf_print/report_tree.c, mf_line).
_TREE_LINE = re.compile(r"^\s*(~?)([\d,]+)(?:\s+±(\S+))?\s+(\d+(?:\.\d+)?)%\s+"
                        r"(\d+(?:\.\d+)?\s\S+)(?: (?:±(\S+) *| {7}))?  (.*)$")


class TreeLine:
    def __init__(self, m):
        self.calls = int(m.group(2).replace(",", ""))
        self.error = m.group(3)  # e.g. "3.4%", or None for an exact count
        self.percent = float(m.group(4))
        self.bytes_error = m.group(6)  # the same for the bytes
        rest = m.group(7)
        self.top = not rest.startswith(("│", "├", "└", " "))  # top level: no tree glyph
        self.text = rest.lstrip("│├└─ ")  # `site (file.c:12)` or a fold line

    @property
    def name(self):
        return self.text.split(" (")[0]


def tree_header_total(text):
    """The exact total call count the tree's header states (`  calls      N (exact), ...`)."""
    for line in text.splitlines():
        m = re.match(r"\s*calls\s+" + _NUMBER + r" \(exact\)", line)
        if m:
            return int(m.group(1).replace(",", ""))
    raise TestFailure(f"no total in the tree header: {text[:400]!r}")


def tree_lines(text):
    entries = [TreeLine(m) for m in map(_TREE_LINE.match, text.splitlines()) if m]
    expect(entries, f"no entries in the tree: {text[:400]!r}")
    return entries


# ---- the on-disk format, read directly (c_core/mf_format.h, through build/mf_format.py) -----

ENTRY = struct.Struct(F.entry.format)
ENTRY_VAR = struct.Struct(F.entry_var.format)
ENTRY_CLASS_BITS = 0xFF << F.ENTRY_CLASS_SHIFT


def thread_files(profile):
    return sorted(glob.glob(os.path.join(profile, "thread.*.mft")))


def process_files(profile):
    return sorted(glob.glob(os.path.join(profile, "process.*.mfp")))


def read_struct(path, cls, field, fmt="<Q"):
    """One field of the struct at the start of a file: read_struct(p, F.process_header,
    "sample_interval")."""
    at = getattr(cls, field)
    with open(path, "rb") as f:
        return struct.unpack_from(fmt, f.read(at + struct.calcsize(fmt)), at)[0]


def write_struct(path, cls, field, value, fmt="<Q"):
    """Overwrites one field of the struct at the start of a file (to damage or doctor it)."""
    with open(path, "r+b") as f:
        f.seek(getattr(cls, field))
        f.write(struct.pack(fmt, value))


def file_totals(path):
    """The exact per-function call and byte counts in a thread file's header."""
    with open(path, "rb") as f:
        data = f.read(F.thread_header.totals_bytes + 8 * F.FN_COUNT)
    expect(data[:8] == F.THREAD_MAGIC, f"{path} has no thread magic")
    calls = struct.unpack_from(f"<{F.FN_COUNT}Q", data, F.thread_header.totals_calls)
    nbytes = struct.unpack_from(f"<{F.FN_COUNT}Q", data, F.thread_header.totals_bytes)
    return calls, nbytes


def thread_flags(path):
    return read_struct(path, F.thread_header, "flags", "<I")


def table_threads(path):
    """How many threads recorded into a thread file (a table passes to the next new thread
    when its thread exits)."""
    return read_struct(path, F.thread_header, "threads")


def thread_segments(data):
    """(file offset, bytes) of each published segment of a thread file's bytes."""
    n = struct.unpack_from("<Q", data, F.thread_header.nsegments)[0]
    return [(struct.unpack_from("<Q", data, F.thread_header.segment_offset + 8 * k)[0],
             struct.unpack_from("<Q", data, F.thread_header.segment_size + 8 * k)[0])
            for k in range(n)]


# F.frame_node: its return address's low half, then its caller's reference with, in the top
# bits, which of the thread header's pc_hi is its high half (F.NODE_WIDE: the next slot's
# first word, a wide node).
NODE = struct.Struct("<II")
assert (NODE.size, F.frame_node.up) == (F.frame_node.size, 4)
NODE_PARENT_MASK = (1 << F.NODE_HI_SHIFT) - 1


def node_ref(k, i):
    """MF_NODE_REF: the node in segment k's node slot i."""
    return (k << 20 | i) + 1


def node_offset(data, ref):
    """The file offset of the node ref refers to (a segment's nodes follow its entries)."""
    off, _ = thread_segments(data)[(ref - 1) >> 20]
    cap = struct.unpack_from("<I", data, off + F.segment_header.capacity)[0]
    return off + F.SEGMENT_ENTRIES_OFFSET + cap * ENTRY.size + ((ref - 1) & 0xFFFFF) * NODE.size


def pc_his(data):
    """The thread header's high halves of return addresses (mf_thread_header.pc_hi), in order."""
    n = struct.unpack_from("<I", data, F.thread_header.npc_hi)[0]
    return list(struct.unpack_from(f"<{min(n, F.PC_HI_MAX)}I", data, F.thread_header.pc_hi))


def set_pc_his(data, his):
    """Writes the high halves his into a thread file's bytearray's header."""
    struct.pack_into(f"<I{len(his)}I", data, F.thread_header.npc_hi, len(his), *his)


def node_pc(data, his, ref):
    """The return address, caller and slots (2 if wide) of node ref of a thread file's bytes
    whose header's high halves are his (pc_his)."""
    at = node_offset(data, ref)
    lo, up = NODE.unpack_from(data, at)
    hi = up >> F.NODE_HI_SHIFT
    high = NODE.unpack_from(data, at + NODE.size)[0] if hi == F.NODE_WIDE else his[hi]
    return high << 32 | lo, up & NODE_PARENT_MASK, 2 if hi == F.NODE_WIDE else 1


def module_records(process_file):
    """The module records of a process file: [(path, record)], in the order written."""
    with open(process_file, "rb") as f:
        data = f.read()
    at, out = F.process_header.size, []
    while at + F.module_record.size <= len(data):
        rec = dict(zip(F.module_record.fields,
                       struct.unpack_from(F.module_record.format, data, at)))
        expect_eq(rec["magic"], F.MODULE_MAGIC, f"module record magic at {at}")
        start = at + F.module_record.size
        out.append((data[start:start + rec["path_len"]].decode(), rec))
        at += rec["record_size"]
    expect_eq(at, len(data), "the process file's end (after its last module record)")
    return out


def stored_return_addresses(profile):
    """The distinct return addresses of a one-image profile's stacks as its thread files
    store them, each as (module path, offset from its load bias), or ("", address) outside
    every module: a walk learns or loads a rule for each (the rule cache's keys)."""
    (pf,) = process_files(profile)
    mods = [(rec["lo"], rec["hi"], rec["bias"], path) for path, rec in module_records(pf)]
    out = set()
    for path in thread_files(profile):
        with open(path, "rb") as f:
            data = f.read()
        for _, pc, _ in thread_file_nodes(data):
            out.add(next(((m, pc - bias) for lo, hi, bias, m in mods if lo <= pc < hi), ("", pc)))
    return out


def thread_file_nodes(data):
    """Every published node of a thread file's bytes, in file order: (ref, return address,
    caller's ref)."""
    his = pc_his(data)
    for k, (off, _) in enumerate(thread_segments(data)):
        used = struct.unpack_from("<Q", data, off + F.segment_header.nodes_used)[0]
        i = 0
        while i < used:
            ref = node_ref(k, i)
            pc, parent, slots = node_pc(data, his, ref)
            yield ref, pc, parent
            i += slots


def thread_file_stacks(data):
    """Every published stack of a thread file's bytes, in file order, as a dict: "key",
    "node", "calls", "bytes"; "samples", "calls_sq", "bytes_var" (a narrow entry's: its
    calls, its calls, 0); "flags" without MF_ENTRY_WIDE and the class bits; "wide";
    "size_class" (None without MF_ENTRY_SIZED); "stack" (its return addresses, innermost
    first: its chain of nodes) and "depth"; "at" (the entry's file offset) and "var_at" (its
    struct mf_entry_var's, the next three slots, or None). The one place the tests decode how
    a thread file stores its stacks (format 11)."""
    out, his = [], pc_his(data)
    for off, _ in thread_segments(data):
        cap = struct.unpack_from("<I", data, off + F.segment_header.capacity)[0]
        start = off + F.SEGMENT_ENTRIES_OFFSET
        i = 0
        while i < cap:
            at = start + i * ENTRY.size
            d = dict(zip(F.entry.fields, ENTRY.unpack_from(data, at)))
            if not d["key"]:
                break  # entries are published in slot order
            # the flags' low four beside the node, the class beside the key, a wide one's
            # epoch in its extra slots
            flags = (d["node"] >> F.ENTRY_NODE_BITS & 0xF |
                     d["key"] >> F.ENTRY_KEY_BITS << F.ENTRY_CLASS_SHIFT)
            d["node"] &= (1 << F.ENTRY_NODE_BITS) - 1
            d["key"] &= (1 << F.ENTRY_KEY_BITS) - 1
            d["wide"] = bool(flags & F.ENTRY_WIDE)
            if d["wide"] and i + F.ENTRY_VAR_SLOTS >= cap:
                raise TestFailure(f"a wide entry past the last slots of a segment at {off}")
            d["var_at"] = at + ENTRY.size if d["wide"] else None
            if d["wide"]:
                d.update(zip(F.entry_var.fields, ENTRY_VAR.unpack_from(data, d["var_at"])))
                flags |= d["epoch"] << F.ENTRY_EPOCH_SHIFT
            else:
                d.update(samples=d["calls"], calls_sq=d["calls"], bytes_var=0.0)
            d["flags"] = flags & ~(F.ENTRY_WIDE | ENTRY_CLASS_BITS)
            d["size_class"] = ((flags & ENTRY_CLASS_BITS) >> F.ENTRY_CLASS_SHIFT
                               if flags & F.ENTRY_SIZED else None)
            stack, ref = [], d["node"]
            while ref:
                pc, parent, _ = node_pc(data, his, ref)
                if parent >= ref:
                    raise TestFailure(f"node {ref}'s caller {parent} was not made before it")
                stack.append(pc)
                ref = parent
            d["stack"] = stack
            d["depth"] = len(stack)
            d["at"] = at
            out.append(d)
            i += 1 + F.ENTRY_VAR_SLOTS if d["wide"] else 1
    return out


def set_entry_counts(data, e, samples, calls, nbytes):
    """Writes an entry's samples, calls and bytes (e: thread_file_stacks's dict) into a
    thread file's bytearray; a narrow entry's samples are its calls, its counts 32-bit."""
    if e["wide"]:
        struct.pack_into("<QQQ", data, e["var_at"] + F.entry_var.calls, calls, nbytes, samples)
    elif samples != calls:
        raise TestFailure(f"a narrow entry cannot hold {samples} samples of {calls} calls")
    else:
        struct.pack_into("<II", data, e["at"] + F.entry.calls, calls, nbytes)


def set_entry_class(data, e, size_class):
    """Writes a sized entry's size class (the top 8 bits of its key word)."""
    at = e["at"] + F.entry.key
    key = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, at,
                     key & ((1 << F.ENTRY_KEY_BITS) - 1) | size_class << F.ENTRY_KEY_BITS)


def stack_segment(k, cap, ncap, stacks, his):
    """Segment k as the writer lays one out (format 11), of cap entry slots and ncap node
    slots, holding entries [(frames innermost first, samples, calls)] and their nodes, shared
    where their outer frames are; the nodes are made outermost first, so each caller precedes
    its callees. An entry whose samples are its calls is narrow (a slot), any other wide
    (1 + F.ENTRY_VAR_SLOTS). his: the file's high halves of return addresses (pc_his), to which new ones are
    added up to F.PC_HI_MAX; a node whose high half is not among them is wide (two slots)."""
    nodes, index, entries = [], {}, []
    for frames, samples, calls in stacks:
        parent = 0
        for pc in reversed(frames):
            if (parent, pc) not in index:
                high = pc >> 32
                if high not in his and len(his) < F.PC_HI_MAX:
                    his.append(high)
                hi = his.index(high) if high in his else F.NODE_WIDE
                index[(parent, pc)] = node_ref(k, len(nodes))
                nodes.append((pc & 0xFFFFFFFF, hi << F.NODE_HI_SHIFT | parent))
                if hi == F.NODE_WIDE:
                    nodes.append((high, 0))
            parent = index[(parent, pc)]
        entries.append((parent, samples, calls))
    slots = sum(1 if samples == calls else 1 + F.ENTRY_VAR_SLOTS for _, samples, calls in entries)
    if slots > cap or len(nodes) > ncap:
        raise TestFailure(f"{slots} entry slots, {len(nodes)} nodes in a segment of "
                          f"{cap}, {ncap}")
    seg = bytearray(F.SEGMENT_ENTRIES_OFFSET + cap * ENTRY.size + ncap * NODE.size)
    struct.pack_into("<IIQQ", seg, 0, cap, ncap, len(nodes), slots)
    at = F.SEGMENT_ENTRIES_OFFSET
    for i, (node, samples, calls) in enumerate(entries):
        wide = samples != calls
        key = (0x123457 + i) & ((1 << F.ENTRY_KEY_BITS) - 1) or 1
        if wide:
            ENTRY.pack_into(seg, at, key, node | F.ENTRY_WIDE << F.ENTRY_NODE_BITS, 0, 0)
            ENTRY_VAR.pack_into(seg, at + ENTRY.size, calls, calls * 40, samples, calls, 0.0, 0, 0)
        else:
            ENTRY.pack_into(seg, at, key, node, calls, calls * 40)
        at += ENTRY.size * (1 + F.ENTRY_VAR_SLOTS if wide else 1)
    for i, n in enumerate(nodes):
        NODE.pack_into(seg, F.SEGMENT_ENTRIES_OFFSET + cap * ENTRY.size + i * NODE.size, *n)
    seg.extend(b"\0" * ((-len(seg)) % 4096))
    return seg


def file_entries_full(profile):
    """Every stack of the profile's thread files (thread_file_stacks), each with "large": its
    samples if they were all taken for their size (MF_ENTRY_LARGE), else 0. A stack's
    narrow entry and the wide one that took its later samples (MF_ENTRY_WIDE) are one here,
    their counts added, as a reader adds them."""
    out = []
    for path in thread_files(profile):
        with open(path, "rb") as f:
            merged = {}
            for d in thread_file_stacks(f.read()):
                key = (tuple(d["stack"]), d["flags"], d["size_class"])
                if key in merged:
                    m = merged[key]
                    for field in ("samples", "calls", "bytes", "calls_sq", "bytes_var"):
                        m[field] += d[field]
                    continue
                merged[key] = d
            for d in merged.values():
                d["large"] = d["samples"] if d["flags"] & F.ENTRY_LARGE else 0
                out.append(d)
    return out


def file_entries(profile):
    """(calls, samples, calls_sq, (key, depth, flags)) of every stack entry in the profile's
    thread files."""
    return [(d["calls"], d["samples"], d["calls_sq"], (d["key"], d["depth"], d["flags"]))
            for d in file_entries_full(profile)]


def exact_total_calls(*profiles):
    """All calls counted in the profiles' thread headers (exact in every mode)."""
    return sum(sum(file_totals(f)[0]) for p in profiles for f in thread_files(p))


def exact_calls_per_fn(profile):
    per_fn = [0] * F.FN_COUNT
    for f in thread_files(profile):
        for i, c in enumerate(file_totals(f)[0]):
            per_fn[i] += c
    return per_fn


def fn_totals(profile):
    """(calls, bytes) per allocation function over all thread files."""
    files = [file_totals(f) for f in thread_files(profile)]
    return [(sum(c[fn] for c, _ in files), sum(b[fn] for _, b in files))
            for fn in range(F.FN_COUNT)]


def thread_totals(profile):
    """Each thread's total calls and bytes, in the order of their sequence numbers."""
    files = sorted(thread_files(profile), key=lambda f: int(os.path.basename(f).split(".")[2]))
    return [tuple(sum(counts) for counts in file_totals(f)) for f in files]


def process_flags(profile):
    """flags from the profile's process file (struct mf_process_header)."""
    return read_struct(process_files(profile)[0], F.process_header, "flags", "<I")


def sample_interval(profile):
    """sample_interval from the profile's process file (struct mf_process_header)."""
    return read_struct(process_files(profile)[0], F.process_header, "sample_interval")


# ---- programs whose counts the tests know ---------------------------------------------------

# tests/programs/exact_sites.c: site -> (calls, bytes)
EXACT_SITES = {
    "site_malloc": (1000, 1000 * 24),
    "site_calloc": (700, 700 * 80),
    "site_realloc": (500, 8 * 500 * 501 // 2),
    "site_posix_memalign": (300, 300 * 100),
    "site_aligned_alloc": (200, 200 * 64),
    "site_memalign": (150, 150 * 40),
    "site_valloc": (120, 120 * 10),
    "site_pvalloc": (110, 110 * 5),
    "site_deep": (90, 90 * 1000),
    "site_thread_work": (250 + 500 + 750 + 1000, 2500 * 48),
    "site_lingering": (333, 333 * 7),
}
# Levels of `descend` between main and each site (exact_sites.c's main and worker).
EXACT_DESCEND = {"site_malloc": 1, "site_calloc": 3, "site_realloc": 5,
                 "site_posix_memalign": 7, "site_aligned_alloc": 9, "site_memalign": 11,
                 "site_valloc": 13, "site_pvalloc": 15, "site_deep": 18}



def expect_exact_sites_with(extra_env, reach_main=False, program=None):
    """Runs exact_sites (or a build of it with more sources): every site's counts exact, every
    level of `descend` in its stacks (and main below them, if reach_main). Returns the run
    and its CSV rows."""
    r = run_ok([program or c_program("exact_sites")], extra_env=extra_env)
    expect_eq(r.stdout, "exact_sites done\n", "program output")
    rows = csv_rows(r.profile)
    expect_sites(rows, EXACT_SITES)
    for site, levels in EXACT_DESCEND.items():
        for row in site_rows(rows, site):
            names = [function_name(f) for f in row.stack]
            expect_eq(names.count("descend"), levels, f"descend frames above {site}")
            if reach_main:
                expect("main" in names, f"{site}'s stack does not reach main: {row.stack}")
    return r, rows



# tests/programs/hostile_frames.c: site -> (calls, bytes)
HOSTILE_SITES = {"malloc_with_fp": (5 * 100 + 5 * 10, 550 * 40),
                 "on_signal_stack": (50, 50 * 24), "on_coroutine": (70, 70 * 56)}



def killed_live_sleeper(sample, while_alive=lambda profile: None):
    """Runs live_sleeper, calls while_alive(profile) while it sleeps, kills it with SIGKILL and
    checks that the headers' totals did not change. Returns the profile directory and those
    totals."""
    prog = c_program("live_sleeper")
    outdir = fresh_dir()
    p = subprocess.Popen([prog], stdout=subprocess.PIPE, env=profiled_env(outdir, sample),
                         cwd=outdir)
    try:
        ready, _, _ = select.select([p.stdout], [], [], TIMEOUT)
        expect(ready, f"live_sleeper said nothing in {TIMEOUT} s")
        expect_eq(p.stdout.readline(), b"ready\n", "live_sleeper's first line")
        profile = os.path.join(outdir, f"malloc_freq.{p.pid}")
        while_alive(profile)
        live_totals = thread_totals(profile)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=TIMEOUT)
        expect_eq(p.returncode, -signal.SIGKILL, "exit status")
        expect_eq(thread_totals(profile), live_totals, "header totals after kill -9 vs alive")
        return profile, live_totals
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def expect_one_line_error(args, what):
    r = mf_print(args, check=False)
    expect(r.returncode != 0, f"{what}: mf_print {' '.join(args)} exited 0")
    lines = r.stderr.splitlines()
    expect(len(lines) == 1 and lines[0].strip(),
           f"{what}: expected one line on stderr, got {r.stderr!r}")
    expect(r.returncode < 128, f"{what}: mf_print died of a signal (status {r.returncode})")



# tests/programs/sampled_sites.c: site -> (calls, bytes per call)
SAMPLED_SITES = {"site_hot": (2000000, 16), "site_warm": (500000, 32),
                 "site_mild": (100000, 64), "site_rare": (20000, 128)}
_exact_sampled = {}


# ---- the launcher ----------------------------------------------------------------------------

MAKE_PROJECT = os.path.join(REPO, "tests", "make_project")
LAUNCHER = os.environ.get("MF_TEST_LAUNCHER",  # another build, to show a test fails without a fix
                          os.path.join(BUILD, "malloc_freq"))


def clean_env(extra=None, drop=()):
    """The runner's environment without the profiler's variables (and PYTHONMALLOC, which
    the Python tests set themselves), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "PYTHONMALLOC") + tuple(drop)
           and not k.startswith("MALLOC_FREQ_")}
    env.update(extra or {})
    return env


class Launched:
    def __init__(self, p, out, err, cwd):
        self.rc, self.stdout, self.stderr, self.cwd = p.returncode, out, err, cwd

    @property
    def run_dir(self):
        """The one run directory the launcher made in its working directory."""
        dirs = [d for d in glob.glob(os.path.join(self.cwd, "malloc_freq.*")) if os.path.isdir(d)]
        expect_eq(len(dirs), 1, f"run directories in {self.cwd} ({dirs})")
        return dirs[0]


def launch(args, cwd=None, extra_env=None, env=None, stdin=b"", launcher=LAUNCHER):
    cwd = cwd or fresh_dir()
    p = subprocess.Popen([launcher] + args, cwd=cwd, env=env or clean_env(extra_env),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(stdin, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise TestFailure(f"malloc_freq {' '.join(args)} timed out after {TIMEOUT} s")
    return Launched(p, out.decode(errors="replace"), err.decode(errors="replace"), cwd)


def launch_ok(args, rc=0, **kw):
    r = launch(args, **kw)
    expect(r.rc == rc, f"malloc_freq {' '.join(args)} exited {r.rc}, expected {rc}; "
                          f"stderr: {r.stderr.strip()[-800:]!r}")
    return r


def process_dirs(run_dir):
    """The run's malloc_freq.<pid> directories."""
    return sorted(d for d in glob.glob(os.path.join(run_dir, "malloc_freq.*"))
                  if re.fullmatch(r"malloc_freq\.\d+", os.path.basename(d)))


def process_images(profile):
    """(pid, ppid, exe) of each process image that wrote into a malloc_freq.<pid> directory
    (struct mf_process_header)."""
    out = []
    h = F.process_header
    for path in process_files(profile):
        expect(read_struct(path, h, "magic", "8s") == F.PROCESS_MAGIC,
                  f"{path} has no process magic")
        pid, ppid = (read_struct(path, h, field, "<I") for field in ("pid", "ppid"))
        exe = read_struct(path, h, "exe", "256s")
        out.append((pid, ppid, exe.split(b"\0")[0].decode()))
    return out


def python_script(cwd, text, shebang=None):
    path = os.path.join(cwd, "script.py")
    with open(path, "w") as f:
        f.write((f"#!{shebang}\n" if shebang else "") + text)
    os.chmod(path, 0o755)
    return path


# ---- reports read back ----------------------------------------------------------------------

def pb_read_varint(buf, i):
    """The varint (LEB128, as protocol buffers write it) at buf[i]: (value, the index after)."""
    v, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pb_fields(buf):
    """A protobuf message's fields: [(number, wire type, int or bytes)]."""
    fields, i = [], 0

    def varint():
        nonlocal i
        v, i = pb_read_varint(buf, i)
        return v
    while i < len(buf):
        tag = varint()
        num, wire = tag >> 3, tag & 7
        expect(wire in (0, 2), f"wire type {wire} in mf_print's pprof output")
        if wire == 0:
            fields.append((num, 0, varint()))
        else:
            n = varint()
            fields.append((num, 2, bytes(buf[i:i + n])))
            i += n
    return fields


def pb_varint(v):
    """A protobuf varint's bytes."""
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_field(num, payload):
    """A protobuf field: a varint for an int payload, else length-delimited bytes."""
    if isinstance(payload, int):
        return pb_varint(num << 3) + pb_varint(payload)
    return pb_varint(num << 3 | 2) + pb_varint(len(payload)) + payload


def calls_by_program(dirs):
    """{executable's basename: exact calls} from the files: each thread file's header totals,
    given to the process image (stamp) whose process file names the executable."""
    exe, calls = {}, {}
    for d in dirs:
        for path in process_files(d):
            stamp = read_struct(path, F.process_header, "stamp")
            raw = read_struct(path, F.process_header, "exe", "256s")
            exe[stamp] = os.path.basename(raw.split(b"\0")[0].decode())
    for d in dirs:
        for path in thread_files(d):
            stamp = read_struct(path, F.thread_header, "stamp")
            name = exe.get(stamp, "?")
            calls[name] = calls.get(name, 0) + sum(file_totals(path)[0])
    return calls


def by_program_table(text):
    """The --by program tree's table: {program: (calls, processes)}."""
    table, inside = {}, False
    for line in text.splitlines():
        if re.match(r"\s*calls\s+%\s+bytes\s+processes\s+program$", line):
            inside = True
            continue
        if inside:
            m = re.match(r"\s*([\d,]+)\s+[\d.]+%\s+[\d.]+ \S+\s+(\d+)  (.+)$", line)
            if not m:
                break
            table[m.group(3)] = (int(m.group(1).replace(",", "")), int(m.group(2)))
    expect(table, f"no program table in the --by program report: {text[:600]!r}")
    return table


# ---- workloads more than one group runs ----------------------------------------------------

# short_runs.c: site -> (calls per 50, bytes per call)
def size_class(size):
    """mf_size_class (c_core/mf_format.h) of a size of 4 bytes or more: four classes a
    doubling."""
    e = size.bit_length() - 1
    return 1 + 4 * e + ((size >> (e - 2) if e >= 2 else size << (2 - e)) & 3)


SHORT_SITES = {"site_a": (20, 24), "site_b": (15, 40), "site_c": (10, 72), "site_d": (4, 136),
               "site_e": (1, 264)}


# thread_errno.c: its four threads' sites -> (calls, bytes)
THREAD_ERRNO_SITES = {"site_thread_%d" % k: ((k + 1) * 100, (k + 1) * 100 * 24) for k in range(4)}


def unwound_stacks(profile):
    """(frames, calls, bytes, samples) of every stack, allocator and start-up frames kept, but
    the loader's own calls in dlopen: how many it makes depends on the objects already
    loaded, and libunwind-only loads libunwind at start-up where the rules may never."""
    return sorted((tuple(row.stack), row.calls, row.bytes, row.samples)
                  for row in csv_rows(profile, extra=("--no-trim", "--full-stacks"))
                  if "_dl_open" not in row.stack)


def short_runs_program(flags=()):
    """tests/programs/short_runs.c, built with the compiler flags given (once per run)."""
    name = "short_runs" + "".join(f.replace("-", "_") for f in flags)
    if not flags:
        return build("short_runs", ["short_runs.c"])
    out = os.path.join(OUT, name)
    if not os.path.exists(out):
        os.makedirs(OUT, exist_ok=True)
        cmd = ["gcc", "-g", "-Wall", "-Wextra", "-Werror"] + list(flags) + [
            "-o", out, os.path.join(PROGRAMS, "short_runs.c")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        expect(r.returncode == 0, f"cannot compile {name}: {r.stderr.strip()}")
    return out


def git_env(repo):
    home = os.path.dirname(repo)
    return {"HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat", "LC_ALL": "C",
            "GIT_AUTHOR_DATE": "2026-01-01T00:00:00", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00"}


def small_repository():
    """A small repository: 40 commits over 6 files, made anew
    for each test (a passing test's directories are removed)."""
    repo = os.path.join(fresh_dir(), "repo")
    os.makedirs(repo)
    env = dict(os.environ, **git_env(repo))

    def git(*args):
        subprocess.run(["git", "-C", repo] + list(args), check=True, env=env,
                       capture_output=True)

    git("init", "-q")
    git("config", "user.name", "Short Run")
    git("config", "user.email", "short@run.invalid")
    for c in range(40):
        for f in range(6):
            if (c + f) % 3 == 0:
                with open(os.path.join(repo, f"file{f}.txt"), "a") as fh:
                    fh.writelines(f"commit {c} file {f} line {i}: {'x' * (c % 7 + i)}\n"
                                  for i in range(12))
        git("add", "-A")
        git("commit", "-q", "-m", f"change {c}\n\nthe body of change {c}")
    return repo


# ---- --watch: its view driven through tests/programs/watch_phases.c's gated phases ------------

WATCH_DEADLINE = 60  # seconds to wait for each condition the view shows: generous, for a loaded machine
WATCH_PHASES = ("phase_a", "phase_b", "phase_c")


def watch_top_row(text):
    """The fields of the first row under the view's column heads, or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "calls/s" in line and line.rstrip().endswith("site") and i + 1 < len(lines):
            return lines[i + 1].split()
    return None


def watch_running_top(text):
    """The site on top of a view while a process runs and that site allocates (its calls/s
    neither "-" nor 0), or None: a view whose rates are all 0 (the program without the CPU
    for a whole interval, or ended) is sorted by the totals, which say nothing of the phase."""
    if not re.search(r"^processes: [1-9]\d* running", text, re.M):
        return None
    row = watch_top_row(text)
    return row[-1] if row and len(row) > 1 and row[0] not in ("-", "0") else None


def watch_blocks(stream, raw):
    """The text blocks mf_print --watch writes to the pipe stream, each once complete (the
    blank line after it, or the end of the stream), as they come; every byte read is added to
    the bytearray raw."""
    fd, pending = stream.fileno(), b""
    while True:
        ready, _, _ = select.select([fd], [], [], WATCH_DEADLINE)
        expect(ready, f"no text from the view in {WATCH_DEADLINE} s: {bytes(raw[-600:])!r}")
        chunk = os.read(fd, 65536)
        raw += chunk
        if not chunk:
            if pending.strip(b"\n"):
                yield pending.decode(errors="replace")
            return
        *done, pending = (pending + chunk).split(b"\n\n")
        for block in done:
            yield block.decode(errors="replace")


def drive_watch_phases(views, gates):
    """Takes watch_phases.c's gated run (its gate directory gates) through its phases as a
    view shows them: each phase's file is made once the view has it on top, not before, so
    that no phase ends unseen however late the view gets the CPU. views: the view's texts as
    they come (tmux captures, text blocks), ending when the view does. Returns the sites on
    top while they allocate, in turn (each once)."""
    tops, want, since = [], list(WATCH_PHASES), time.monotonic()
    for text in views:
        site = watch_running_top(text)
        if site in WATCH_PHASES and (not tops or tops[-1] != site):
            tops.append(site)
        if want and site == want[0]:
            open(os.path.join(gates, site[-1]), "w").close()
            want.pop(0)
            since = time.monotonic()
        expect(time.monotonic() - since < WATCH_DEADLINE,
               f"in {WATCH_DEADLINE} s the view did not show "
               f"{want[0] + ' on top' if want else 'the end of the run'}:\n{text}")
    expect(not want, f"the view ended before it showed {want[:1]} on top")
    return tops


# ---- the registry --------------------------------------------------------------------------

TESTS = []


def test(fn):
    """Registers a test: a function that raises TestFailure (expect) when what it checks is
    not so, or Skip (need) when it cannot run here."""
    TESTS.append(fn)
    return fn


# ---- hostile names (tests/programs/hostile_names.c): what every report must escape ----

# hostile_K (tests/programs/hostile_names.c): 2K calls of 8K bytes, K alive at exit.
HOSTILE_NAMES = {
    1: b"esc\x1b[2Jclear",
    2: b"osc52\x1b]52;c;SGVsbG8=\x07",
    3: b"\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",
    4: b"bel\x07cr\rlf\nend",
    5: b"ls\xe2\x80\xa8ps\xe2\x80\xa9",
    6: b"bad\xff\xfe\xc0\xafutf8",
    7: b'=HYPERLINK("http://evil.example","x")',
    8: b"+1+2",
    9: b"-2+3",
    10: b"@SUM(A1)",
    11: b"\tlead tab",
    12: b"\rlead cr",
    13: b'q"uo,te;semi',
    14: b"</script><script>alert(1)</script>",
    15: b"L" * 5000 + b"\x1b[31m",
    16: b"c1\xc2\x9b31m\\",
}
HOSTILE_WRAPPER = b"@wrap\x1b]52;c;d3JhcA==\x07"  # folded with --fold '^@wrap'

def hostile_program():
    """hostile_names.c without debug information, its sites renamed to HOSTILE_NAMES (and
    wrap to HOSTILE_WRAPPER) with objcopy, so that the symbol table names them."""
    plain = build("hostile_names", ["hostile_names.c"], libs=("-g0",))
    renamed = plain + ".renamed"
    if renamed in _built.values():
        return renamed
    argv = [b"objcopy", b"--redefine-sym", b"wrap=" + HOSTILE_WRAPPER]
    for k, name in HOSTILE_NAMES.items():
        argv += [b"--redefine-sym", b"hostile_%d=" % k + name]
    r = subprocess.run(argv + [plain.encode(), renamed.encode()], capture_output=True)
    expect(r.returncode == 0, f"objcopy failed: {r.stderr!r}")
    _built["hostile_names.renamed"] = renamed
    return renamed


# What may not reach a terminal (or a CSV, whose controls are percent-encoded): C0 but the
# newline, DEL, C1, U+2028/9; and bytes that are not UTF-8 (checked by decoding).
RAW = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")


def esc(b):
    """mf_esc (mf_print/base/util.c): how a name reads in text for a person."""
    out, i = [], 0
    while i < len(b):
        for n in (1, 2, 3, 4):
            try:
                ch = b[i:i + n].decode("utf-8")
                break
            except UnicodeDecodeError:
                ch = None
        if ch is None:
            out.append("\\x%02x" % b[i])
            i += 1
            continue
        cp = ord(ch)
        control = cp < 0x20 or cp == 0x7f or 0x80 <= cp < 0xa0 or cp in (0x2028, 0x2029)
        if control:
            out.append("\\x%02x" % cp if cp < 0x80 else "\\u%04x" % cp)
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
        i += n
    return "".join(out)


def check_text(what, data):
    """For a terminal: UTF-8, and no control character but the newline."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TestFailure(f"{what}: bytes that are not UTF-8 reach the terminal: {e}")
    m = RAW.search(data)
    expect(not m, f"{what}: a raw control character reaches the terminal: "
                  f"{data[max(0, m.start() - 40):m.end() + 40]!r}" if m else "")
    return text


# ---- the timeline (tests/programs/timeline_phases.c) -----------------------------------------

# timeline_phases: three phases of a second, PHASE_CALLS calls each, of these sites in turn.
PHASE_CALLS = 50000
PHASES = ("phase_a", "phase_b", "phase_c")


def phases_run(sample):
    """The launcher's run of timeline_phases at -s sample: (run directory, the borders
    {site: (start_s, end_s)} relative to the timeline's start, the --timeline JSON)."""
    prog = c_program("timeline_phases")
    cwd = fresh_dir()
    borders = os.path.join(cwd, "borders.txt")
    r = launch_ok(["-q", "-s", str(sample), "--", prog, borders], cwd=cwd)
    run = r.run_dir
    out = mf_print(["--timeline", "--format", "json", run])
    tl = json.loads(out.stdout)
    phases = {}
    with open(borders) as f:
        for line in f:
            name, start, end, calls = line.split()
            expect_eq(int(calls), PHASE_CALLS, "the program's calls per phase")
            phases["phase_" + name] = ((int(start) - tl["start_ns"]) / 1e9,
                                       (int(end) - tl["start_ns"]) / 1e9)
    return run, phases, tl


def site_series(tl, name):
    sites = [s for s in tl["sites"] if s["name"] == name]
    expect_eq(len(sites), 1, f"sites named {name} in the timeline")
    return sites[0]
