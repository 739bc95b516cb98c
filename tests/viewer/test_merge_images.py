"""A program's process images read as one (issue 34; docs/design.md §14).

A build runs cc1 once a file, each at other addresses (ASLR). mf_print keeps the stacks of
the images of one program whose modules are the same files laid out alike as one stack,
moved to the first image's addresses: a build's 685,918 raw stacks, each compile's apart,
became one per stack of each program, and its summary took a third of the time in a fifth
of the memory. No report may
change for it: in a run directory of several programs, each run a few times,
  - each stack's calls, bytes and samples in the whole run's CSV are the sums of that
    stack's in each process directory read alone;
  - the tree's "N distinct" stacks and "folded ... in N stacks" are the sums of each
    directory's;
  - a site is an estimate (~) in the whole run's tree exactly where it is one in some
    directory's;
  - the JSON report, which names each stack's process, still lists every image's stacks
    apart."""

import json
import os
import re
import shutil
import subprocess

import harness as rt

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_into(run_dir, argv, sample="1", cwd=None, rc=0):
    p = subprocess.run(argv, env=rt.profiled_env(run_dir, sample), cwd=cwd or run_dir,
                       capture_output=True, text=True, timeout=rt.TIMEOUT)
    rt.expect_eq(p.returncode, rc, f"{' '.join(argv)}'s status (stderr {p.stderr[-300:]!r})")


def process_dirs(run_dir):
    return sorted(os.path.join(run_dir, d) for d in os.listdir(run_dir)
                  if d.startswith("malloc_freq."))


def stack_sums(rows_lists):
    """{(stack, via): [calls, bytes, samples]} summed over lists of CSV rows."""
    sums = {}
    for rows in rows_lists:
        for r in rows:
            s = sums.setdefault((tuple(r.stack), r.via), [0, 0, 0])
            s[0] += r.calls
            s[1] += r.bytes
            s[2] += r.samples
    return sums


def header_count(text, pattern):
    m = re.search(pattern, text)
    rt.expect(m, f"{pattern!r} in the tree's header: {text[:900]!r}")
    return int(m.group(1).replace(",", ""))


def sites(text):
    """{site: estimated} of a --depth 1 tree."""
    out = {}
    for line in text.splitlines():
        m = rt._TREE_LINE.match(line)
        if m:
            e = rt.TreeLine(m)
            out[e.text] = out.get(e.text, False) or m.group(1) == "~"
    return out


def json_stacks(args):
    """The stacks of the JSON report, which reads each image's apart."""
    doc = json.loads(rt.mf_print(["--format", "json"] + args).stdout)
    return sum(1 for s in doc["stacks"] if s["process"] is not None)


def expect_read_together_as_alone(run_dir, extra=()):
    dirs = process_dirs(run_dir)
    whole = rt.csv_rows(run_dir, extra=["--no-fold"] + list(extra))
    alone = [rt.csv_rows(d, extra=["--no-fold"] + list(extra)) for d in dirs]
    got = {k: tuple(v) for k, v in stack_sums([whole]).items()}
    want = {k: tuple(v) for k, v in stack_sums(alone).items()}
    bad = [k for k in set(got) | set(want) if got.get(k) != want.get(k)]
    rt.expect(not bad, f"{len(bad)} of {len(want)} stacks differ read together, e.g. "
                       f"{[(k, got.get(k), want.get(k)) for k in bad[:3]]}")
    # Not folded: a wrapper found without a name is found by its callers over the whole
    # profile, so a directory alone may find fewer.
    opts = ["--depth", "1", "--threshold", "0", "--width", "0", "--no-fold"]
    tree = rt.mf_print(opts + list(extra) + [run_dir]).stdout
    trees = [rt.mf_print(opts + list(extra) + [d]).stdout for d in dirs]
    distinct = r"stacks\s+([\d,]+) distinct"
    rt.expect_eq(header_count(tree, distinct), sum(header_count(t, distinct) for t in trees),
                 "the run's distinct stacks against the sum of its directories'")
    rt.expect_eq(header_count(tree, distinct), json_stacks([run_dir] + list(extra)),
                 "the run's distinct stacks against the JSON report's (images apart)")
    est = {}
    for t in trees:
        for site, e in sites(t).items():
            est[site] = est.get(site, False) or e
    got_est = sites(tree)
    rt.expect_eq(sorted(got_est), sorted(est), "the run's sites against its directories'")
    wrong = [s for s in est if got_est[s] != est[s]]
    rt.expect(not wrong, f"estimated (~) read together but not alone, or the other way: "
                         f"{wrong[:5]}")
    return whole, tree


@rt.test
def test_a_programs_images_read_together_count_as_each_read_alone():
    """Exact counts: wrapper_sites three times (named wrappers folded), output_status and
    git (not ours) twice each, in one run directory."""
    run_dir = rt.fresh_dir()
    wrappers, status = rt.c_program("wrapper_sites"), rt.c_program("output_status")
    repo = rt.small_repository()
    for _ in range(3):
        run_into(run_dir, [wrappers])
    for _ in range(2):
        run_into(run_dir, [status], rc=3)
        run_into(run_dir, ["git", "-C", repo, "log", "--stat", "-q"])
    rt.expect_eq(len(process_dirs(run_dir)), 7, "process directories")
    expect_read_together_as_alone(run_dir)
    # Three images' exact counts at each site: one CSV row each, three times its counts.
    rows = rt.csv_rows(run_dir)
    for site, (calls, nbytes) in rt.WRAPPER_SITES.items():
        name, via = site.split(" via ")
        got = [(x.calls, x.bytes, x.samples) for x in rows if x.site == name and x.via == via]
        rt.expect_eq(got, [(3 * calls, 3 * nbytes, 3 * calls)], f"CSV rows of {site}")
    # Folded by name: the stacks folded in the run are the sum of its directories'.
    folded = r"folded\s+wrappers into their callers in ([\d,]+) stacks"
    texts = [rt.tree_text(d) for d in process_dirs(run_dir)]
    rt.expect_eq(header_count(rt.tree_text(run_dir), folded),
                 sum(header_count(t, folded) for t in texts if re.search(folded, t)),
                 "the stacks folded in the run against the sum of its directories'")
    # --check with no live heap rule reads the images merged: exact sums, to the call.
    out = rt.mf_print(["--check", "calls(parse_args) <= 900; calls(build_table) < 1500; "
                       "bytes(read_lines) == 100800", run_dir], check=False)
    rt.expect_eq((out.returncode, out.stderr), (4, ""), "--check's status and stderr")
    rt.expect_eq(out.stdout.splitlines(),
                 [" calls(parse_args) <= 900: 900", "-calls(build_table) < 1500",
                  "+calls(build_table) = 1,500: at the limit", " bytes(read_lines) == 100800: "
                  "100,800", "check: 1 of 3 rules broken"], "--check's verdict")
    # The JSON report names each stack's process: every image's stacks stay apart.
    doc = json.loads(rt.mf_print(["--format", "json", run_dir]).stdout)
    procs = {s["process"] for s in doc["stacks"] if s["process"] is not None}
    rt.expect_eq(len(procs), 7, "processes the JSON report's stacks name")


@rt.test
def test_compiles_read_together_give_each_compiles_estimates():
    """cc1 (not ours) in the default mode: a tiny compile, exact, then three of this
    project's sources past the exact stretch; and the gcc driver and as of each."""
    run_dir = rt.fresh_dir()
    # First a compile that ends inside its stretch, exact: the image the others' stacks move
    # to (directories are read in pid order), whose counts are not estimates where theirs are.
    tiny = os.path.join(run_dir, "tiny.c")
    with open(tiny, "w") as f:
        f.write("int tiny(int x) { return x + 1; }\n")
    run_into(run_dir, ["gcc", "-O2", "-c", tiny, "-o", os.devnull], sample=None)
    for src in ("mf_print/read/profile_read.c", "mf_print/model/symbolize.c",
                "mf_print/report/report_tree.c"):
        run_into(run_dir, ["gcc", "-O2", "-g", "-D_GNU_SOURCE", "-Ic_core", "-Imf_print/base",
                           "-Imf_print/read", "-Imf_print/model", "-Imf_print/report",
                           "-Imf_print", "-c", src, "-o", os.devnull], sample=None, cwd=REPO)
    whole, tree = expect_read_together_as_alone(run_dir)
    rt.expect(any(e for e in sites(tree).values()),
              "some site of the compiles is an estimate (past the exact stretch)")
    rt.expect(any("cc1" in open(os.path.join(d, f), "rb").read().decode(errors="replace")
                  for d in process_dirs(run_dir) for f in os.listdir(d) if f.endswith(".mfp")),
              "cc1 among the processes")


@rt.test
def test_an_images_thread_files_read_apart_count_once():
    """An image's thread files in two directories, another image of the program read in
    between: each stack of it still counts once (its pairs are counted once)."""
    prog = rt.c_program("same_stack_threads")
    run_dir = rt.fresh_dir()
    for _ in range(3):
        run_into(run_dir, [prog])
    a, b, c = process_dirs(run_dir)
    threads = rt.thread_files(b)
    rt.expect(len(threads) >= 4, f"thread files of same_stack_threads: {threads}")
    # Read in this order: a whole; b's process file and half its threads; c whole; the rest
    # of b's threads. b's stacks move to a's addresses, and c's touch them in between.
    y, z = os.path.join(run_dir, "y"), os.path.join(run_dir, "z")
    os.mkdir(y, 0o700)
    os.mkdir(z, 0o700)
    for f in rt.process_files(b) + threads[:len(threads) // 2]:
        shutil.move(f, y)
    for f in threads[len(threads) // 2:]:
        shutil.move(f, z)
    os.rmdir(b)
    dirs = [a, y, c, z]
    tree = rt.mf_print(["--no-fold", "--depth", "1", "--threshold", "0", "--width", "0"] +
                       dirs).stdout
    distinct = r"stacks\s+([\d,]+) distinct"
    rt.expect_eq(header_count(tree, distinct), json_stacks(dirs),
                 "distinct stacks against the JSON report's (images apart)")
    rows = rt.csv_rows(*dirs, extra=["--no-fold"])
    rt.expect_eq(sum(r.calls for r in rows), rt.exact_total_calls(*dirs),
                 "the stacks' calls against the thread files' exact totals")
