"""Debug files from debuginfod servers (DEBUGINFOD_URLS), as libdw fetches them for
mf_print: a stripped library's sites come out named from a real `debuginfod` serving its
separate debug file; --offline does not ask; a server that is down, one that never answers
(--debuginfod-timeout) and one that serves another ELF for the build id (refused) each cost
one line on stderr, and the report is printed with the library's frames unnamed."""

import http.server
import os
import pty
import shutil
import subprocess
import threading
import time
import urllib.request

import harness as rt


def stripped_run():
    """libnodebug.so built with -g, its debug information copied to a directory of its own,
    then stripped; the program run under the profiler. Returns (profile, lib, debug dir)."""
    debug = os.path.join(rt.fresh_dir(), "served")
    os.makedirs(debug)
    lib, prog = rt.build_nodebug(os.path.join(rt.fresh_dir(), "build"), debug=True, strip=False)
    subprocess.run(["objcopy", "--only-keep-debug", lib, os.path.join(debug, "libnodebug.debug")],
                   check=True)
    subprocess.run(["strip", lib], check=True)
    return rt.run_ok([prog]).profile, lib, debug


def mf_print(args, url, timeout=rt.TIMEOUT):
    env = dict(os.environ, DEBUGINFOD_CACHE_PATH=os.path.join(rt.fresh_dir(), "cache"))
    if url:
        env["DEBUGINFOD_URLS"] = url
    r = subprocess.run([rt.MF_PRINT] + args, capture_output=True, text=True, env=env,
                       timeout=timeout)
    rt.expect_eq(r.returncode, 0, f"mf_print {' '.join(args)}'s exit status ({r.stderr!r})")
    return r


def on_terminal(argv, url):
    """What argv (an mf_print run) writes to stderr when that is a terminal."""
    env = dict(os.environ, DEBUGINFOD_URLS=url,
               DEBUGINFOD_CACHE_PATH=os.path.join(rt.fresh_dir(), "cache"))
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    rt.expect_eq(p.wait(timeout=rt.TIMEOUT), 0, "mf_print's exit status on a terminal")
    return out.decode(errors="replace")


def helper_sites(profile, url, extra=()):
    """The CSV rows whose stack starts in the library: {site: calls}."""
    r = mf_print(["-f", "csv", *extra, profile], url)
    sites = {}
    for row in rt.parse_csv(r.stdout):
        if "nodebug_alloc" in row.stack:
            sites[row.stack[0]] = sites.get(row.stack[0], 0) + row.calls
    return sites, r.stderr


def expect_unnamed(sites, what):
    rt.expect(sum(sites.values()) == 300 and all(s.startswith("[libnodebug.so+0x") for s in sites),
              f"{what}: the static helper unnamed in 300 calls: {sites}")


@rt.test
def test_debuginfod_names_a_stripped_librarys_sites():
    rt.need(shutil.which("debuginfod"), "debuginfod (Debian package debuginfod)")
    profile, lib, served = stripped_run()
    port = rt.free_port()
    db = os.path.join(rt.fresh_dir(), "index.sqlite")
    server = subprocess.Popen(["debuginfod", "-F", served, "-p", str(port), "-d", db],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        build_id = rt.build_id_of(lib)
        for _ in range(200):  # until it has scanned the directory
            try:
                urllib.request.urlopen(f"{url}/buildid/{build_id}/debuginfo", timeout=5).read()
                break
            except OSError:
                time.sleep(0.05)
        sites, err = helper_sites(profile, url)
        rt.expect_eq(sites, {"helper": 300}, "the library's sites with the debug file served")
        rt.expect_eq(err, "", "stderr of a run that fetched a debug file, into a pipe")
        # On a terminal, a progress line while the download runs, erased when it ends.
        progress = on_terminal([rt.MF_PRINT, "-f", "csv", profile], url)
        rt.expect("mf_print: debuginfod: libnodebug.so's debug information" in progress
                  and progress.endswith("\r\x1b[K"), f"the terminal's stderr: {progress!r}")
        tree = mf_print([profile], url).stdout
        rt.expect("helper (nodebug_lib.c:9)" in tree, f"the site's line: {tree!r}")
        rt.expect("not symbolized in full" not in tree, f"a footer: {tree!r}")
        # --offline: not asked, and the footer does not send to a server.
        sites, err = helper_sites(profile, url, ["--offline"])
        expect_unnamed(sites, "--offline")
        rt.expect_eq(err, "", "--offline's stderr")
    finally:
        server.kill()
        server.wait()
    # The server down: one line, the report whole.
    r = mf_print([profile], url)
    lines = r.stderr.splitlines()
    rt.expect(len(lines) == 1 and "Connection refused" in lines[0] and "libnodebug.so" in lines[0],
              f"one line for a server that is down: {r.stderr!r}")
    rt.expect(lib in r.stdout and "helper" not in r.stdout.split("not symbolized")[0],
              f"the report, its footer naming the library: {r.stdout!r}")


class _Server:
    """An HTTP server on a free port of 127.0.0.1 whose GET is handle(request)."""

    def __init__(self, handle):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                handle(self)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@rt.test
def test_debuginfod_slow_server_stops_at_the_time_limit():
    profile, lib, _ = stripped_run()
    asked = threading.Event()
    release = threading.Event()

    def never_answers(req):
        asked.set()
        release.wait(300)  # libdebuginfod alone would wait 90 s (DEBUGINFOD_TIMEOUT)

    server = _Server(never_answers)
    try:
        # Without the limit this run would outlast the 60 s it is given.
        r = mf_print(["--debuginfod-timeout", "1", profile], server.url, timeout=60)
    finally:
        release.set()
        server.close()
    rt.expect(asked.is_set(), "the server was not asked")
    lines = r.stderr.splitlines()
    rt.expect(len(lines) == 1 and "gave up after 1 s (--debuginfod-timeout)" in lines[0]
              and "libnodebug.so" in lines[0], f"one line for the time limit: {r.stderr!r}")
    rt.expect(lib in r.stdout, f"the footer names the library: {r.stdout!r}")
    rt.expect_one_line_error(["--debuginfod-timeout", "0", profile], "--debuginfod-timeout 0")


@rt.test
def test_debuginfod_refuses_a_debug_file_of_another_build():
    profile, lib, _ = stripped_run()
    other = rt.c_program("exact_sites")  # an ELF file with debug information, not the library's
    with open(other, "rb") as f:
        body = f.read()
    asked = []

    def serves_another(req):
        asked.append(req.path)
        req.send_response(200)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    server = _Server(serves_another)
    try:
        sites, err = helper_sites(profile, server.url)
    finally:
        server.close()
    rt.expect(any(rt.build_id_of(lib) in p for p in asked), f"the library's build id asked: {asked}")
    expect_unnamed(sites, "another build's debug file")
    lines = err.splitlines()
    rt.expect(len(lines) == 1 and "another build id: refused" in lines[0]
              and "libnodebug.so" in lines[0], f"one line for the refused file: {err!r}")


@rt.test
def test_debuginfod_footer_says_how_to_fetch_a_debian_programs_debug_information():
    with open("/etc/os-release") as f:
        rt.need("ID=debian" in f.read().split(), "Debian (/etc/os-release)")
    sort = shutil.which("sort")
    profile = rt.run_ok([sort, "/etc/os-release"]).profile
    fetch = ("instead of installing them: export DEBUGINFOD_URLS=https://debuginfod.debian.net, "
             "and mf_print fetches the packages' debug information from that server")
    footer = mf_print([profile], None).stdout.split("not symbolized in full")[-1]
    rt.expect("stripped, no debug information: install coreutils-dbgsym" in footer
              and footer.endswith("\n" + fetch + "\n"), f"the footer with DEBUGINFOD_URLS unset: {footer!r}")
    for args in (["--offline"], ["--debuginfod-timeout", "1"]):
        url = None if args == ["--offline"] else f"http://127.0.0.1:{rt.free_port()}"
        footer = mf_print(args + [profile], url).stdout.split("not symbolized in full")[-1]
        rt.expect("coreutils-dbgsym" in footer and "DEBUGINFOD_URLS" not in footer,
                  f"the footer with {args}: {footer!r}")
