"""A fresh `1+1` through one `rsandbox serve --stdio`, timed after the server sat idle for
5 to 200 ms since its previous answer, and after a `sleep 0.1` or an `Rscript --vanilla
-e 1+1` run (then 15 ms), all alternating. Prints the p50 of each.

    python3 bench/scripts/idle_gap.py target/release/rsandbox 60
"""
import io
import json
import subprocess
import sys
import time

cli, rounds = sys.argv[1], int(sys.argv[2])
server = subprocess.Popen([cli, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, bufsize=0)
answers = io.BufferedReader(server.stdout)


def fresh_eval(i):
    """Round trip of one fresh evaluation, in ms."""
    start = time.perf_counter()
    server.stdin.write((json.dumps({"id": i, "op": "eval", "code": "1+1"}) + "\n").encode())
    answer = json.loads(answers.readline())
    assert answer["result"]["outcome"] == "ok", answer
    return (time.perf_counter() - start) * 1000


def idle(seconds):
    return lambda: time.sleep(seconds)


def run_then_wait(command):
    return lambda: (subprocess.run(command, capture_output=True, check=True), time.sleep(0.015))


cases = {f"{ms} ms after the previous answer": idle(ms / 1000) for ms in (5, 15, 30, 50, 100, 200)}
cases["after `sleep 0.1`, then 15 ms"] = run_then_wait(["sleep", "0.1"])
cases["after `Rscript --vanilla -e 1+1`, then 15 ms"] = run_then_wait(["Rscript", "--vanilla", "-e", "1+1"])
times = {name: [] for name in cases}
for i in range(rounds + 3):
    for name, before in cases.items():
        before()
        elapsed = fresh_eval(i)
        if i >= 3:  # the first rounds warm up
            times[name].append(elapsed)
for name, values in times.items():
    values.sort()
    print(f"{name}: p50 {values[len(values) // 2]:.3f} ms")
server.stdin.close()
server.wait()
