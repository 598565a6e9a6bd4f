#!/usr/bin/env python3
"""R's documentation examples, in plain `Rscript --vanilla` and in the sandbox.

For every help page of R's base packages that has examples (tools::Rd_db + tools::Rd2ex,
without \\dontrun and \\donttest: extract.R), take the page's example code's outcome in
plain R (`timeout 120 Rscript --vanilla`, in a fresh directory) and run it in the sandbox
(`rsandbox serve --stdio`, one server, an `eval` with a 60 s timeout, --jobs requests in
flight), and compare the outcome: ran to the end, or not (error, timeout, crash,
violation). Output text is not compared (plots, timings, random numbers and temporary
file names differ).

The plain-R side is cached: plain-r-baseline.tsv holds each page's plain outcome with the
R version and a hash of the page's code it was taken with (written by --update-baseline).
A page whose R version and code hash match its line is not run in plain R; any other page
is (a new R version: every page, and the run says how to update the baseline). Plain R is
R's own examples on the host, trusted and deterministic enough to cache; the sandbox side
always runs.

A difference is
  program  the sandbox withholds programs: an `execve` violation, or an error that
           names system()/system2()/pipe()/Sys.which() or a shell;
  network  the sandbox has no sockets: connection, URL, download errors;
  known    any other difference listed in known-differences.tsv (with its reason);
  unexpected  any other difference: a fidelity bug, or a new one to explain.
A page plain R does not finish within its timeout is "slow": not compared, not a failure
(a baseline line with outcome timeout is not used: the page runs in plain R again).
The run fails on an unexpected difference, and on a listed one that no longer occurs
(so the list stays true). Usage:

  tests/r-examples/run.py --rsandbox target/debug/rsandbox [--jobs 2] [--only RE] [PKG ...]
  tests/r-examples/run.py --update-baseline [--only RE] [PKG ...]   plain R only
  tests/r-examples/run.py --no-baseline ...                         plain R for every page
"""

import argparse
import hashlib
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
    p.add_argument("--jobs", type=int, default=2,
                   help="sandbox evaluations in flight at once (default 2: on 2 cores 3 or 4 are no "
                        "faster, the evaluations are CPU-bound)")
    p.add_argument("--plain-jobs", type=int, default=2,
                   help="plain Rscript runs at once, for pages the baseline does not cover")
    p.add_argument("--timeout", type=int, default=60, help="seconds per example in the sandbox")
    p.add_argument("--plain-timeout", type=int, default=120,
                   help="seconds per example in plain R (its default device, pdf, is slower "
                        "than the sandbox's png on plot-heavy pages: grDevices/hcl writes a "
                        "71 MB PDF, 74 s against 28 s on a loaded 2-core machine)")
    p.add_argument("--only", help="regular expression over PKG/TOPIC: run only those pages")
    p.add_argument("--known", default=os.path.join(HERE, "known-differences.tsv"))
    p.add_argument("--baseline", default=os.path.join(HERE, "plain-r-baseline.tsv"))
    p.add_argument("--update-baseline", action="store_true",
                   help="run the selected pages in plain R only (timeout --baseline-timeout) "
                        "and write their lines into --baseline (other pages' lines are kept "
                        "when only some pages are selected)")
    p.add_argument("--baseline-timeout", type=int, default=300,
                   help="seconds per example in plain R under --update-baseline (default 300)")
    p.add_argument("--no-baseline", action="store_true",
                   help="run every page in plain R, ignoring the baseline")
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


BASELINE_HEADER = """\
# Plain `Rscript --vanilla` outcomes of R's documentation examples, the cached plain-R side
# of tests/r-examples/run.py. Written by `scripts/r-examples.sh --update-baseline`; a line
# is used only while R's version and the page's code (sha256 of the code run, first 16
# hex digits) are the same, otherwise the page runs in plain R again.
page\tr_version\tcode_sha256\toutcome\tms\terror
"""
BASELINE_FIELDS = ["page", "r_version", "code_sha256", "outcome", "ms", "error"]


def code_hash(code):
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def read_baseline(path):
    base = {}
    if not os.path.exists(path):
        return base
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#") or line.startswith("page\t"):
                continue
            parts = line.split("\t")
            if len(parts) != len(BASELINE_FIELDS):
                sys.exit(f"{path}:{n}: expected {len(BASELINE_FIELDS)} tab-separated fields "
                         f"({', '.join(BASELINE_FIELDS)}), got {line!r}")
            row = dict(zip(BASELINE_FIELDS, parts))
            row["ms"] = int(row["ms"])
            base[row["page"]] = row
    return base


def write_baseline(path, base):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(BASELINE_HEADER)
        for page in sorted(base):
            r = base[page]
            f.write("\t".join([page, r["r_version"], r["code_sha256"], r["outcome"],
                               str(r["ms"]), one_line(r["error"], 300)]) + "\n")
    os.replace(tmp, path)


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
    # plain-r-baseline.tsv caches what this returns: a change to how plain R is run here
    # needs `scripts/r-examples.sh --update-baseline`.
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
    if not a.update_baseline and not os.access(rsandbox, os.X_OK):
        sys.exit(f"{rsandbox}: not built (cargo build --workspace)")
    rscript = shutil.which("Rscript") or sys.exit("Rscript not found")
    known = read_known(a.known)
    only = re.compile(a.only) if a.only else None

    start = time.monotonic()
    exdir = tempfile.mkdtemp(prefix="rex-examples-")
    try:
        subprocess.run([rscript, "--vanilla", os.path.join(HERE, "extract.R"), exdir,
                        *a.packages], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(exdir, "R_VERSION"), encoding="utf-8") as f:
            r_version = f.read().strip()
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

    base = read_baseline(a.baseline)
    base_name = os.path.relpath(a.baseline)

    if a.update_baseline:
        print(f"{len(pages)} help pages with examples, in plain R ({r_version}); "
              f"{a.plain_jobs} at a time, timeout {a.baseline_timeout} s", flush=True)
        done = [0]
        lock = threading.Lock()

        def plain_task(item):
            pkg, page, code = item
            plain = run_plain(rscript, code, a.baseline_timeout)
            with lock:
                done[0] += 1
                base[page] = {"page": page, "r_version": r_version,
                              "code_sha256": code_hash(code), **plain}
                if a.verbose or plain["outcome"] != "ok":
                    print(f"[{done[0]}/{len(pages)}] {page}: {plain['outcome']} "
                          f"{plain['ms']} ms {one_line(plain['error'], 160)}", flush=True)

        with ThreadPoolExecutor(max_workers=a.plain_jobs) as pool:
            list(pool.map(plain_task, pages))
        if not only and a.packages == PACKAGES:  # a full update: drop pages that are gone
            ran = {page for _, page, _ in pages}
            for page in [p for p in base if p not in ran]:
                del base[page]
        write_baseline(a.baseline, base)
        outcomes = {}
        for _, page, _ in pages:
            outcomes[base[page]["outcome"]] = outcomes.get(base[page]["outcome"], 0) + 1
        print(f"wrote {base_name}: {len(pages)} pages updated "
              f"({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))}), "
              f"{len(base)} in all, in {time.monotonic() - start:.0f} s")
        if outcomes.get("timeout"):
            print("note: a timeout line is not used (the page runs in plain R every time); "
                  "rerun on a quieter machine or with a larger --baseline-timeout")
        return 0

    # Which pages the baseline covers.
    cached, stale_version, changed, missing = {}, 0, 0, 0
    for _, page, code in pages:
        row = None if a.no_baseline else base.get(page)
        if row is None:
            missing += 1
        elif row["r_version"] != r_version:
            stale_version += 1
        elif row["code_sha256"] != code_hash(code):
            changed += 1
        elif row["outcome"] == "timeout":
            missing += 1
        else:
            cached[page] = {"outcome": row["outcome"], "error": row["error"], "ms": row["ms"],
                            "cached": True}
    to_plain = [item for item in pages if item[1] not in cached]
    print(f"{len(pages)} help pages with examples; sandbox: {a.jobs} at a time, timeout "
          f"{a.timeout} s; plain R ({r_version}): {len(cached)} from {base_name}, "
          f"{len(to_plain)} to run ({a.plain_jobs} at a time, timeout {a.plain_timeout} s)",
          flush=True)
    if a.no_baseline:
        print("(--no-baseline: every page runs in plain R)")
    else:
        why = []
        if stale_version:
            vs = sorted({base[p]["r_version"] for _, p, _ in pages
                         if p in base and base[p]["r_version"] != r_version})
            why.append(f"{stale_version} taken with another R version ({'; '.join(vs)}, "
                       f"not {r_version})")
        if changed:
            why.append(f"{changed} whose example code changed")
        if missing:
            why.append(f"{missing} not in it (or a timeout there)")
        if why:
            print(f"baseline: {', '.join(why)}: run in plain R now. To cache them, "
                  f"update the baseline and commit it:\n  scripts/r-examples.sh "
                  f"--update-baseline   (plain R only, about 10 minutes on 2 cores)",
                  flush=True)

    # Longest first (the baseline's plain-R time is the estimate), so that a slow page
    # does not start last and leave the other workers idle at the end.
    est = {page: base[page]["ms"] if page in base else 0 for _, page, _ in pages}
    pages.sort(key=lambda item: -est[item[1]])

    server = Server(rsandbox)
    plains, sandboxes = dict(cached), {}
    results = {}
    done = [0]
    done_lock = threading.Lock()

    def finish(pkg, page):
        """Both sides are in (under done_lock): classify and report."""
        plain, sandbox = plains[page], sandboxes[page]
        kind = classify(plain, sandbox)
        if kind == "other" and page in known:
            kind = "known"
        results[page] = (pkg, plain, sandbox, kind)
        done[0] += 1
        if a.verbose or kind not in ("same", "known"):
            src = "baseline" if plain.get("cached") else f"{plain['ms']} ms"
            print(f"[{done[0]}/{len(pages)}] {page}: {kind} (plain {plain['outcome']}"
                  f" {src}, sandbox {sandbox['outcome']} {sandbox['ms']} ms)", flush=True)

    def plain_task(item):
        pkg, page, code = item
        plain = run_plain(rscript, code, a.plain_timeout)
        with done_lock:
            plains[page] = plain
            if page in sandboxes:
                finish(pkg, page)

    def sandbox_task(item):
        pkg, page, code = item
        sandbox = run_sandbox(server, code, a.timeout)
        with done_lock:
            sandboxes[page] = sandbox
            if page in plains:
                finish(pkg, page)

    try:
        # Plain R first, then the sandbox: run side by side they would share the 2 cores
        # and push heavy pages towards their timeouts, for no gain in total time.
        with ThreadPoolExecutor(max_workers=a.plain_jobs) as pool:
            list(pool.map(plain_task, to_plain))
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            list(pool.map(sandbox_task, pages))
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

    print(f"\nwall time {wall:.0f} s for {len(results)} pages ({a.jobs} at a time in the "
          f"sandbox, {len(to_plain)} run in plain R)")
    if wall > 360:
        print("note: over 6 minutes; split the run by package across CI jobs "
              "(scripts/r-examples.sh base stats; scripts/r-examples.sh utils graphics ...)")
    if unexpected or stale:
        print(f"FAILED: {len(unexpected)} unexpected, {len(stale)} stale")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
