#!/usr/bin/env python3
"""The examples of README.md and docs/*.md, run again: each marked example's commands are run
and their output must still have the shape the document shows (the same lines once numbers,
times, hex and paths are set aside), so a change that alters a report's layout fails here
until the documents are re-pasted.

    python3 tests/docs/test_docs.py [-k SUBSTRING] [FILE.md ...]           check
    python3 tests/docs/test_docs.py --update [-k SUBSTRING] [FILE.md ...]  re-paste the outputs

A marked example is a fenced block preceded by an HTML comment (invisible on GitHub):

    <!-- docs-test: run [cwd=repo] [cd=SUBDIR] [needs=go,sqlite3] [compare=N]
    set-up lines, run first with `bash -e` (not shown)
    -->
    ```console
    $ a command, as a reader would type it (a trailing backslash continues it)
    its output (stdout and stderr, as on a terminal)
    $ the next command, in the same directory
    ...
    ```

`run` starts in a fresh scratch directory holding links to the repository's top-level files
(so `build/mf_print` and `tests/programs/x.c` work as from a clone), with build/ first on PATH
(so `mf_print` and `malloc_freq` work as installed); `continue` goes on in the previous
example's directory; `cwd=repo` runs in the repository itself (`make demo`); `cd=SUBDIR`
runs the commands in a subdirectory the set-up made. `needs=` names tools without which the
example is skipped, said so. `compare=N` compares only the first N lines of each output
(a sampled run's sites vary from run to run; its header does not). The scratch directory is shown as
/tmp/demo in the documents. Commands never name a pid: they use `malloc_freq.*` or a
MALLOC_FREQ_DIR of their own, so that they run unchanged. The test itself is
test_docs_examples_match_the_code (tests/run_tests.py -k docs)."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MF_DOCS_BUILD", os.path.join(REPO, "build"))
DISPLAY_DIR = "/tmp/demo"  # how the scratch directory reads in the documents
TIMEOUT = 600  # seconds, per command

DIRECTIVE = re.compile(r"^<!-- docs-test:\s*(run|continue)\b(.*)$")  # at the line's start
FENCE = re.compile(r"^(\s*)```")


class Example:
    def __init__(self, path, line, mode, options, setup, indent, start, end, body):
        self.path, self.line, self.mode, self.options = path, line, mode, options
        self.setup, self.indent, self.start, self.end, self.body = setup, indent, start, end, body

    def commands(self):
        """[(command, [expected output lines])] from the block's body."""
        out, i, lines = [], 0, self.body
        while i < len(lines):
            if not lines[i].startswith("$ "):
                raise ValueError(f"{self.path}:{self.line}: output before the first command")
            cmd = [lines[i][2:]]
            while cmd[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd.append(lines[i])
            i += 1
            expected = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expected.append(lines[i])
                i += 1
            out.append(("\n".join(cmd), expected))
        return out


def parse(path):
    """The marked examples of one markdown file, in order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    examples, i = [], 0
    while i < len(lines):
        m = DIRECTIVE.match(lines[i])
        if not m:
            i += 1
            continue
        first, mode, rest = i, m.group(1), m.group(2)
        setup = []
        if "-->" in rest:
            rest = rest.split("-->")[0]
        else:
            i += 1
            while i < len(lines) and "-->" not in lines[i]:
                setup.append(lines[i].strip())
                i += 1
        options = dict(o.split("=", 1) if "=" in o else (o, "") for o in rest.split())
        i += 1
        f = FENCE.match(lines[i]) if i < len(lines) else None
        if not f:
            raise ValueError(f"{path}:{first + 1}: a docs-test comment must come right before "
                             "its fenced block")
        indent = f.group(1)
        start = i + 1
        j = start
        while j < len(lines) and not (FENCE.match(lines[j]) and
                                      lines[j].strip() == "```"):
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip()
                for ln in lines[start:j]]
        examples.append(Example(path, first + 1, mode, options, setup, indent, start, j, body))
        i = j + 1
    return examples


MONTHS = r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b"


def shape(line):
    """A line with what changes from run to run set aside: paths, hex, numbers, months,
    and the width of the columns that numbers make."""
    line = re.sub(r"(?<![\w.])/[^\s:,;()'\"`]+", "<path>", line)
    line = re.sub(r"\b0x[0-9a-fA-F]+\b", "<hex>", line)
    line = re.sub(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", "<hex>", line)
    line = re.sub(MONTHS, "<mon>", line)
    line = re.sub(r"\d[\d,.:]*\d|\d", "<n>", line)
    line = re.sub(r"<n> ?(ns|us|µs|ms|s)\b", "<n> <time>", line)
    line = re.sub(r"<n> ?(B|KiB|MiB|GiB|TiB|kB|MB|GB)\b", "<n> <bytes>", line)
    line = line.replace("±>", "±")
    line = re.sub(r"\s+", " ", line).strip()
    return line


def scratch_dir():
    d = tempfile.mkdtemp(prefix="mf_docs_")
    for name in os.listdir(REPO):
        if name not in (".git",) and not name.startswith("build-"):
            os.symlink(os.path.join(REPO, name), os.path.join(d, name))
    if BUILD != os.path.join(REPO, "build"):
        os.remove(os.path.join(d, "build"))
        os.symlink(BUILD, os.path.join(d, "build"))
    return d


def environment():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_FREQ_") and k not in ("LD_PRELOAD", "PYTHONMALLOC")}
    env["PATH"] = BUILD + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["LANG"] = env["LC_ALL"] = "C.UTF-8"
    env.pop("COLUMNS", None)
    # Cargo builds the Rust examples once, in the repository's own target directory.
    env.setdefault("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return env


def display(text, workdir):
    """The output as the documents show it: the scratch directory as /tmp/demo."""
    if workdir == REPO:
        return text
    for d in {workdir, os.path.realpath(workdir)}:
        text = text.replace(d, DISPLAY_DIR)
    return text


def run_example(ex, workdir, env):
    """Runs the example's set-up and commands; returns [(command, expected, got)] or raises
    RuntimeError when the set-up fails."""
    if ex.setup:
        r = subprocess.run(["bash", "-e", "-c", "\n".join(ex.setup)], cwd=workdir, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
        if r.returncode != 0:
            raise RuntimeError(f"{ex.path}:{ex.line}: set-up failed (exit {r.returncode}):\n"
                               + r.stdout.decode("utf-8", "replace")[-2000:])
    results = []
    cwd = os.path.join(workdir, ex.options.get("cd", ""))
    for cmd, expected in ex.commands():
        r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT)
        got = display(r.stdout.decode("utf-8", "replace"), workdir)
        got_lines = got.split("\n")
        if got_lines and got_lines[-1] == "":
            got_lines.pop()
        results.append((cmd, expected, got_lines))
    return results


def first_difference(expected, got, prefix=None):
    """The first line where the two differ in shape, or None. With prefix, only the first
    that many lines count: the rest of a sampled run's output is shown, not compared."""
    if prefix is not None:
        expected, got = expected[:prefix], got[:prefix]
    a, b = [shape(x) for x in expected], [shape(x) for x in got]
    for k in range(max(len(a), len(b))):
        if k >= len(a) or k >= len(b) or a[k] != b[k]:
            want = expected[k] if k < len(expected) else "(no more lines)"
            have = got[k] if k < len(got) else "(no more lines)"
            return k, want, have
    return None


def missing_tools(ex):
    return [t for t in ex.options.get("needs", "").split(",") if t and not shutil.which(t)]


def documents():
    docs = os.path.join(REPO, "docs")
    return [os.path.join(REPO, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def check(paths, substring=None, update=False, log=print):
    """Runs every marked example of the files; returns the list of failures (strings).
    With update, writes each example's new output into its file instead."""
    failures = []
    env = environment()
    dirs = []
    try:
        for path in paths:
            examples = parse(path)
            if update:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
            workdir = None
            # Later examples are rewritten first, so that earlier line numbers stay right.
            replacements = []
            for ex in examples:
                rel = os.path.relpath(path, REPO)
                if ex.mode == "run" or workdir is None:
                    if ex.options.get("cwd") == "repo":
                        workdir = REPO
                    else:
                        workdir = scratch_dir()
                        dirs.append(workdir)
                if substring and not any(substring in c for c, _ in ex.commands()):
                    continue
                missing = missing_tools(ex)
                if missing:
                    log(f"SKIP {rel}:{ex.line}: needs {', '.join(missing)}")
                    continue
                try:
                    results = run_example(ex, workdir, env)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    failures.append(str(e))
                    log(f"FAIL {rel}:{ex.line}: {e}")
                    continue
                bad = []
                for cmd, expected, got in results:
                    prefix = ex.options.get("compare")
                    diff = first_difference(expected, got, int(prefix) if prefix else None)
                    if diff:
                        k, want, have = diff
                        bad.append(f"{rel}:{ex.line}: `{cmd.splitlines()[0]}`, output line "
                                   f"{k + 1}:\n  document: {want}\n  now:      {have}")
                if update:
                    body = []
                    for cmd, _, got in results:
                        body += ["$ " + cmd.split("\n")[0]] + cmd.split("\n")[1:] + got
                    replacements.append((ex, [ex.indent + b if b else b for b in body]))
                    log(f"{'UPDATED' if bad else 'SAME'} {rel}:{ex.line}")
                elif bad:
                    failures += bad
                    for b in bad:
                        log(f"FAIL {b}")
                else:
                    log(f"PASS {rel}:{ex.line}")
            if update and replacements:
                for ex, body in reversed(replacements):
                    lines[ex.start:ex.end] = body
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(lines))
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    return failures


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def broken_links(paths):
    """Every relative link of the files whose file or #anchor does not exist."""
    anchors, bad = {}, []

    def headings(path):
        if path not in anchors:
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
            anchors[path] = {slug(m) for m in re.findall(r"^#+ (.*)$", text, flags=re.M)}
        return anchors[path]

    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            rel = os.path.relpath(path, REPO)
            if not os.path.exists(dest):
                bad.append(f"{rel}: ({target}): no such file")
            elif anchor and dest.endswith(".md") and anchor not in headings(dest):
                bad.append(f"{rel}: ({target}): no such heading")
    return bad


sys.path.insert(0, os.path.join(REPO, "tests", "lib"))  # also when run on its own
import harness as rt  # noqa: E402


@rt.test
def test_docs_examples_match_the_code():
    """Every marked example of README.md and docs/*.md, run again, prints what the document
    shows (in shape: numbers, times, hex and paths aside)."""
    failures = check(documents(), log=lambda s: None)
    rt.expect(not failures, "\n".join(failures) +
              "\n(re-paste with `python3 tests/docs/test_docs.py --update` if the change is meant)")


@rt.test
def test_docs_links_resolve():
    """Every relative link of README.md and docs/*.md names a file that exists and, for a
    markdown file, a heading it has."""
    bad = broken_links(documents())
    rt.expect(not bad, "\n".join(bad))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="re-paste the outputs into the files")
    ap.add_argument("-k", metavar="SUBSTRING", help="only examples with a command containing it")
    ap.add_argument("files", nargs="*", help="markdown files (default: README.md, docs/*.md)")
    args = ap.parse_args()
    for path in (os.path.join(BUILD, "mf_print"), os.path.join(BUILD, "libmalloc_freq.so")):
        if not os.path.exists(path):
            print(f"test_docs.py: {path} is missing; run `make` first", file=sys.stderr)
            return 2
    paths = [os.path.abspath(p) for p in args.files] or documents()
    failures = broken_links(paths)
    for b in failures:
        print(f"FAIL {b}")
    failures += check(paths, args.k, args.update)
    if not args.update:
        print(f"{len(failures)} example(s) differ" if failures else "every example matches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
