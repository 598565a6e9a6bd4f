"""A fresh `1+1` through one `rsandbox serve --stdio`, timed in three situations that
alternate: 15 ms after the previous answer, 15 ms after an `Rscript --vanilla -e 1+1`
run (as the bench's S1 row is: interleaved with its peer), and 15 ms after an untimed
request. Prints the p50 of each.

    python3 bench/scripts/after_a_peer.py target/release/rsandbox 100
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


times = {"15 ms after the previous answer": [], "15 ms after an Rscript run": [],
         "15 ms after an untimed request": []}
for i in range(rounds + 5):
    time.sleep(0.015)
    idle = fresh_eval(i)
    subprocess.run(["Rscript", "--vanilla", "-e", "1+1"], capture_output=True, check=True)
    time.sleep(0.015)
    after_r = fresh_eval(i)
    time.sleep(0.015)
    fresh_eval(i)
    time.sleep(0.015)
    after_request = fresh_eval(i)
    if i >= 5:  # the first rounds warm up
        for key, value in zip(times, (idle, after_r, after_request)):
            times[key].append(value)
for key, values in times.items():
    values.sort()
    print(f"{key}: p50 {values[len(values) // 2]:.3f} ms")
server.stdin.close()
server.wait()
