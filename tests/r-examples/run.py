#!/usr/bin/env python3
"""R's documentation examples, in plain `Rscript --vanilla` and in the sandbox.

For every help page of R's base packages that has examples (tools::Rd_db + tools::Rd2ex,
without \\dontrun and \\donttest: extract.R), run the page's example code once in plain
R (`timeout 120 Rscript --vanilla`, in a fresh directory) and once in the sandbox
(`rsandbox serve --stdio`, an `eval` with a 60 s timeout), and compare the outcome: ran to
the end, or not (error, timeout, crash, violation). Output text is not compared (plots,
timings, random numbers and temporary file names differ).

A difference is
  program  the sandbox withholds programs: an `execve` violation, or an error that
           names system()/system2()/pipe()/Sys.which() or a shell;
  network  the sandbox has no sockets: connection, URL, download errors;
  known    any other difference listed in known-differences.tsv (with its reason);
  unexpected  any other difference: a fidelity bug, or a new one to explain.
A page plain R does not finish within its timeout is "slow": not compared, not a failure.
The run fails on an unexpected difference, and on a listed one that no longer occurs
(so the list stays true). Usage:

  tests/r-examples/run.py --rsandbox target/debug/rsandbox [--jobs 2] [--only RE] [PKG ...]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["base", "stats", "utils", "graphics", "grDevices", "methods", "datasets",
            "tools", "grid", "splines"]
# Attached by Rscript (and by the sandbox) already; example() attaches the page's own
# package, as R CMD check's PKG-Ex.R does.
DEFAULT_ATTACHED = {"base", "stats", "utils", "graphics", "grDevices", "methods", "datasets"}

PROGRAM_RE = re.compile(
    r"\b(system2?|pipe|Sys\.which|shQuote)\s*\(|\bexecve\b|cannot run|\bsh: |"
    r"error in running command|status 127", re.I)
NETWORK_RE = re.compile(
    r"socket|\burl\(|cannot open URL|download|internet|resolve host|could not resolve|"
    r"libcurl|curl_|\bhttps?://|connection refused|network", re.I)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rsandbox", default="target/debug/rsandbox")
    p.add_argument("--jobs", type=int, default=2, help="examples run at once (default 2)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per example in the sandbox")
    p.add_argument("--plain-timeout", type=int, default=120,
                   help="seconds per example in plain R (its default device, pdf, is slower "
                        "than the sandbox's png on plot-heavy pages: grDevices/hcl writes a "
                        "71 MB PDF, 74 s against 28 s on a loaded 2-core machine)")
    p.add_argument("--only", help="regular expression over PKG/TOPIC: run only those pages")
    p.add_argument("--known", default=os.path.join(HERE, "known-differences.tsv"))
    p.add_argument("--report", help="write every page's outcomes here (TSV)")
    p.add_argument("--verbose", action="store_true", help="print each page as it finishes")
    p.add_argument("packages", nargs="*", default=PACKAGES)
    return p.parse_args()


def read_known(path):
    known = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[1].strip():
                sys.exit(f"{path}:{n}: expected PKG/TOPIC<TAB>reason, got {line!r}")
            known[parts[0].strip()] = parts[1].strip()
    return known


def one_line(text, limit=200):
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain_error(stderr):
    """The error Rscript printed: from the last line starting 'Error' to the end."""
    lines = stderr.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Error"):
            return "\n".join(l for l in lines[i:] if l != "Execution halted")
    return "\n".join(lines[-5:])


def run_plain(rscript, code, timeout):
    d = tempfile.mkdtemp(prefix="rex-plain-")
    try:
        with open(os.path.join(d, "ex.R"), "w", encoding="utf-8") as f:
            f.write(code)
        # The sandbox's environment: C.UTF-8, UTC, HOME and TMPDIR the work directory.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
               "TZ": "UTC", "HOME": d, "TMPDIR": d}
        t0 = time.monotonic()
        p = subprocess.run(["timeout", "-k", "5", str(timeout), rscript, "--vanilla", "ex.R"],
                           cwd=d, env=env, stdin=subprocess.DEVNULL, capture_output=True)
        ms = int((time.monotonic() - t0) * 1000)
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode == 0:
            return {"outcome": "ok", "error": "", "ms": ms}
        if p.returncode in (124, 137):
            return {"outcome": "timeout", "error": f"over {timeout} s", "ms": ms}
        if p.returncode < 0 or p.returncode > 128:
            return {"outcome": "crashed", "error": err[-300:], "ms": ms}
        return {"outcome": "error", "error": plain_error(err), "ms": ms}
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Server:
    """`rsandbox serve --stdio`: eval requests matched to responses by id."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "serve", "--stdio"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=None)
        self.lock = threading.Lock()
        self.waiting = {}
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "event" in msg:
                continue
            with self.lock:
                slot = self.waiting.pop(msg.get("id"), None)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
        with self.lock:  # the server ended: wake everyone
            for slot in self.waiting.values():
                slot[1] = {"error": {"code": "server_exited", "message": "server exited"}}
                slot[0].set()
            self.waiting.clear()

    def eval(self, code, timeout):
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            slot = [threading.Event(), None]
            self.waiting[rid] = slot
            req = {"id": rid, "op": "eval", "code": code, "timeout": timeout,
                   "limits": {"max_output": "16M"}}
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        # The server kills an evaluation at its timeout: a missing answer is the engine's.
        if not slot[0].wait(timeout + 60):
            with self.lock:
                self.waiting.pop(rid, None)
            return {"error": {"code": "no_response",
                              "message": f"no response {timeout + 60} s after the request"}}
        return slot[1]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run_sandbox(server, code, timeout):
    t0 = time.monotonic()
    msg = server.eval(code, timeout)
    ms = int((time.monotonic() - t0) * 1000)
    if "error" in msg and "result" not in msg:
        e = msg["error"]
        return {"outcome": "engine:" + e.get("code", "?"), "error": e.get("message", ""), "ms": ms}
    r = msg["result"]
    err = ""
    if r.get("error"):
        call = r["error"].get("call")
        err = (f"Error in {call} : " if call else "Error: ") + (r["error"].get("message") or "")
    elif r.get("violation"):
        err = f"violation: {r['violation'].get('syscall')}"
    elif r.get("syntax_error"):
        err = "syntax error: " + r["syntax_error"].get("message", "")
    elif r["outcome"] != "ok":
        err = (r.get("stderr") or "")[-300:]
    out = {"outcome": r["outcome"], "error": err, "ms": ms}
    if r.get("violation"):
        out["syscall"] = r["violation"].get("syscall")
    return out


def classify(plain, sandbox):
    """same, program, network, other, or slow (plain R over its timeout on a loaded
    machine: grDevices/hcl's 71 MB PDF; reported, not a failure)."""
    p_ok, s_ok = plain["outcome"] == "ok", sandbox["outcome"] == "ok"
    if p_ok == s_ok:
        return "same"
    if plain["outcome"] == "timeout":  # no verdict from plain R: not compared
        return "slow"
    if p_ok:  # the sandbox stopped where plain R ran to the end
        if sandbox.get("syscall") in ("execve", "execveat"):
            return "program"
        if PROGRAM_RE.search(sandbox["error"]):
            return "program"
        if NETWORK_RE.search(sandbox["error"]):
            return "network"
    return "other"


def main():
    a = parse_args()
    rsandbox = os.path.abspath(a.rsandbox)
    if not os.access(rsandbox, os.X_OK):
        sys.exit(f"{rsandbox}: not built (cargo build --workspace)")
    rscript = shutil.which("Rscript") or sys.exit("Rscript not found")
    known = read_known(a.known)
    only = re.compile(a.only) if a.only else None

    start = time.monotonic()
    exdir = tempfile.mkdtemp(prefix="rex-examples-")
    try:
        subprocess.run([rscript, "--vanilla", os.path.join(HERE, "extract.R"), exdir,
                        *a.packages], check=True, stdout=subprocess.DEVNULL)
        pages = []
        for pkg in a.packages:
            for name in sorted(os.listdir(os.path.join(exdir, pkg))):
                page = f"{pkg}/{name[:-2]}"
                if only and not only.search(page):
                    continue
                with open(os.path.join(exdir, pkg, name), encoding="utf-8") as f:
                    body = f.read()
                head = "" if pkg in DEFAULT_ATTACHED else f"library({pkg})\n"
                pages.append((pkg, page, head + body))
    finally:
        shutil.rmtree(exdir, ignore_errors=True)
    print(f"{len(pages)} help pages with examples; {a.jobs} at a time, "
          f"timeouts {a.plain_timeout} s in plain R, {a.timeout} s in the sandbox", flush=True)

    server = Server(rsandbox)
    results = {}
    done = [0]
    done_lock = threading.Lock()

    def task(item):
        pkg, page, code = item
        plain = run_plain(rscript, code, a.plain_timeout)
        sandbox = run_sandbox(server, code, a.timeout)
        kind = classify(plain, sandbox)
        if kind == "other" and page in known:
            kind = "known"
        results[page] = (pkg, plain, sandbox, kind)
        with done_lock:
            done[0] += 1
            if a.verbose or kind not in ("same", "known"):
                print(f"[{done[0]}/{len(pages)}] {page}: {kind} (plain {plain['outcome']}"
                      f" {plain['ms']} ms, sandbox {sandbox['outcome']} {sandbox['ms']} ms)",
                      flush=True)

    try:
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            list(pool.map(task, pages))
    finally:
        server.close()
    wall = time.monotonic() - start

    # The table.
    kinds = ["same", "program", "network", "known", "other", "slow"]
    rows = {pkg: dict.fromkeys(kinds, 0) for pkg in a.packages}
    for pkg, _, _, kind in results.values():
        rows[pkg][kind] += 1
    print()
    print(f"{'package':<10} {'examples':>8} {'same':>6} {'program':>8} {'network':>8}"
          f" {'known':>6} {'unexpected':>10} {'slow':>5}")
    total = dict.fromkeys(kinds, 0)
    for pkg in a.packages:
        r = rows[pkg]
        n = sum(r.values())
        if not n:
            continue
        for k in kinds:
            total[k] += r[k]
        print(f"{pkg:<10} {n:>8} {r['same']:>6} {r['program']:>8} {r['network']:>8}"
              f" {r['known']:>6} {r['other']:>10} {r['slow']:>5}")
    print(f"{'total':<10} {sum(total.values()):>8} {total['same']:>6} {total['program']:>8}"
          f" {total['network']:>8} {total['known']:>6} {total['other']:>10} {total['slow']:>5}")
    print("(slow: plain R ran over its timeout, so the page is not compared)")

    # Every difference, one line each.
    diffs = sorted((page, v) for page, v in results.items() if v[3] != "same")
    if diffs:
        print("\ndifferences (plain R -> sandbox):")
        for page, (pkg, plain, sandbox, kind) in diffs:
            why = one_line(known.get(page, ""), 120) if kind == "known" else one_line(
                sandbox["error"] if plain["outcome"] == "ok" else plain["error"])
            print(f"  {kind:<10} {page}: {plain['outcome']} -> {sandbox['outcome']}: {why}")

    # Listed differences that no longer occur (among the pages that ran).
    stale = [p for p in sorted(known) if p in results and results[p][3] != "known"]
    for page in stale:
        print(f"\nSTALE {page}: listed in {os.path.basename(a.known)} but "
              f"{results[page][3]} now (plain {results[page][1]['outcome']}, "
              f"sandbox {results[page][2]['outcome']}): remove the line")
    unexpected = [p for p, v in diffs if v[3] == "other"]
    for page in unexpected:
        print(f"\nUNEXPECTED {page}: plain R {results[page][1]['outcome']}, sandbox "
              f"{results[page][2]['outcome']}\n  plain:   {one_line(results[page][1]['error'], 400)}"
              f"\n  sandbox: {one_line(results[page][2]['error'], 400)}")

    if a.report:
        with open(a.report, "w", encoding="utf-8") as f:
            f.write("page\tkind\tplain\tplain_ms\tsandbox\tsandbox_ms\tplain_error\tsandbox_error\n")
            for page in sorted(results):
                pkg, plain, sandbox, kind = results[page]
                f.write("\t".join([page, kind, plain["outcome"], str(plain["ms"]),
                                   sandbox["outcome"], str(sandbox["ms"]),
                                   one_line(plain["error"], 300),
                                   one_line(sandbox["error"], 300)]) + "\n")

    print(f"\nwall time {wall:.0f} s for {len(results)} pages ({a.jobs} at a time)")
    if wall > 360:
        print("note: over 6 minutes; split the run by package across CI jobs "
              "(scripts/r-examples.sh base stats; scripts/r-examples.sh utils graphics ...)")
    if unexpected or stale:
        print(f"FAILED: {len(unexpected)} unexpected, {len(stale)} stale")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
