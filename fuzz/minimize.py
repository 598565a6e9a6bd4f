#!/usr/bin/env python3
"""Grow a committed corpus from fuzzing runs, keeping it small.

    python3 fuzz/minimize.py TARGET DIR... [--budget 150]

Runs libFuzzer's set-cover merge over fuzz/corpus/TARGET and the DIRs (corpora of
longer runs) to learn which features (edges: hit counts are not counted) each input
covers, then keeps the committed inputs and adds, one
at a time, the input that covers the most edges not yet covered, up to BUDGET files in
all (the repository keeps each corpus under 200 files).
"""
import argparse
import os
import shutil
import subprocess
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("target")
parser.add_argument("dirs", nargs="+")
parser.add_argument("--budget", type=int, default=150)
args = parser.parse_args()
corpus = os.path.join(here, "corpus", args.target)

with tempfile.TemporaryDirectory() as work:
    control = os.path.join(work, "control")
    os.mkdir(os.path.join(work, "out"))
    subprocess.run(
        ["cargo", "fuzz", "run", "--sanitizer", "none", args.target, os.path.join(work, "out"), corpus]
        + [os.path.abspath(d) for d in args.dirs]
        + ["--", "-set_cover_merge=1", "-use_counters=0", f"-merge_control_file={control}"],
        cwd=here, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines = open(control).read().split("\n")

count = int(lines[0])
files = lines[2:2 + count]
edges = {}
for line in lines[2 + count:]:
    if line.startswith("FT "):
        fields = line.split()
        edges[int(fields[1])] = set(map(int, fields[2:]))
kept = [i for i, f in enumerate(files) if os.path.dirname(os.path.abspath(f)) == corpus]
covered = set().union(*(edges.get(i, set()) for i in kept))
rest = [i for i in range(count) if i not in kept]
added = 0
while len(kept) < args.budget and rest:
    best = max(rest, key=lambda i: (len(edges.get(i, set()) - covered), -os.path.getsize(files[i])))
    if not edges.get(best, set()) - covered:
        break
    kept.append(best)
    rest.remove(best)
    covered |= edges[best]
    shutil.copy(files[best], corpus)
    added += 1
total = set().union(*edges.values())
print(f"{args.target}: {added} inputs added, {len(kept)} in all, {len(covered)} of {len(total)} features")
