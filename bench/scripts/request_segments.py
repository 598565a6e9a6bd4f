"""Where the time of a fresh `1+1` goes, through `serve --stdio` and `serve --http`: the
server's system calls are recorded with `perf record -k CLOCK_MONOTONIC` (the clock of
Python's `time.monotonic()`), and each request is cut at four of them:

    A  the client sends the request  -> the server's read of it returns
    B  that read                     -> the request goes to the sandbox (`sendto`)
    C  that send                     -> the sandbox's answer is read
    D  that read                     -> the response is written (HTTP: `writev`)
    E  that write                    -> the client has read the response

HTTP's D is also cut at the server's log line (its `write` to stderr). Each request comes
15 ms after the previous answer, as in the bench's S1; `--cold` runs `Rscript --vanilla -e
1+1` before each wait, as the bench's other rows do between S1's samples. Prints the
median of each part (E differs between the fronts by the client's own parsing, in Python).
Needs root (perf) and a release build:

    python3 bench/scripts/request_segments.py target/release/rsandbox 60 --cold
"""
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SENDTO, READ, WRITE, WRITEV, RECVFROM = 44, 0, 1, 20, 45


class Stdio:
    def __init__(self, cli):
        self.process = subprocess.Popen([cli, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.id = 0
        self.reads, self.writes = (READ,), (WRITE,)

    def call(self):
        self.id += 1
        self.process.stdin.write(json.dumps({"id": self.id, "op": "eval", "code": "1+1"}).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            answer = json.loads(self.process.stdout.readline())
            if answer.get("id") == self.id and "event" not in answer:
                assert answer["result"]["outcome"] == "ok", answer
                return


class Http:
    def __init__(self, cli):
        self.process = subprocess.Popen([cli, "serve", "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while True:
            line = self.process.stderr.readline().decode()
            assert line, "the server exited"
            if "listening on http://" in line:
                host, port = line.strip().split("http://")[1].rsplit(":", 1)
                break
        # Its log, drained as a log collector would (a reader woken by each line).
        import threading
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()
        self.socket = socket.create_connection((host, int(port)))
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.responses = self.socket.makefile("rb")
        self.reads, self.writes = (RECVFROM,), (WRITEV,)

    def call(self):
        body = b'{"code":"1+1"}'
        self.socket.sendall(b"POST /v1/eval HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                            b"content-length: %d\r\n\r\n" % len(body) + body)
        length = None
        while (line := self.responses.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length"):
                length = int(line.split(b":")[1])
        assert b'"ok"' in self.responses.read(length)


def segments(front, events, start, end):
    """The parts of one request from the server's system calls between start and end."""
    calls = [e for e in events if start <= e[0] <= end]
    exits = lambda i: next(f for f in calls[i + 1:] if f[2] == "exit" and f[1] == calls[i][1])
    read = next(e for e in calls if e[2] == "exit" and e[3] in front.reads)
    send = next(e for e in calls if e[2] == "enter" and e[3] == SENDTO and e[0] > read[0])
    answer = next(x for i, e in enumerate(calls)
                  if e[2] == "enter" and e[3] == READ and e[4] == send[4] and e[0] > send[0]
                  and (x := exits(i))[4] > 0)
    written = [e for e in calls if e[2] == "enter" and e[3] in front.writes and e[0] > answer[0]][-1]
    parts = {"A": read[0] - start, "B": send[0] - read[0], "C": answer[0] - send[0],
             "D": written[0] - answer[0], "E": end - written[0]}
    log = [e for e in calls if e[2] == "enter" and e[3] == WRITE and e[4] == "2" and answer[0] < e[0] < written[0]]
    if log:
        parts["D to the log line"] = log[0][0] - answer[0]
    return parts


def measure(kind, cli, rounds, cold):
    front = kind(cli)
    for _ in range(5):
        front.call()
        time.sleep(0.015)
    trace = tempfile.NamedTemporaryFile(suffix=".perf", delete=False).name
    perf = subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-o", trace, "-p", str(front.process.pid),
                             "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit"], stdout=subprocess.DEVNULL)
    time.sleep(1)
    requests = []
    for _ in range(rounds):
        if cold:
            subprocess.run(["Rscript", "--vanilla", "-e", "1+1"], stdout=subprocess.DEVNULL, check=True)
        time.sleep(0.015)
        start = time.monotonic()
        front.call()
        requests.append((start, time.monotonic()))
    perf.send_signal(2)
    perf.wait()
    front.process.kill()
    front.process.wait()
    script = subprocess.run(["perf", "script", "-i", trace, "-F", "tid,time,event,trace"], capture_output=True,
                            text=True, check=True).stdout
    os.unlink(trace)
    events = []
    for line in script.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+raw_syscalls:sys_(enter|exit):\s+NR (\d+) (?:\(([0-9a-f]*)|= (-?\d+))",
                     line)
        if m:
            value = m.group(5) if m.group(5) is not None else int(m.group(6))
            events.append((float(m.group(2)), int(m.group(1)), m.group(3), int(m.group(4)), value))
    parts = {}
    for start, end in requests:
        try:
            for name, seconds in segments(front, events, start, end).items():
                parts.setdefault(name, []).append(seconds)
        except StopIteration:
            pass  # a request whose calls the trace missed
    total = statistics.median(end - start for start, end in requests)
    print(f"{kind.__name__.lower()}: p50 {total * 1e6:.0f} us over {len(requests)} requests "
          f"({len(parts.get('A', []))} cut)")
    for name, values in parts.items():
        print(f"  {name:18} {statistics.median(values) * 1e6:6.0f} us")


if __name__ == "__main__":
    cli, rounds = sys.argv[1], int(sys.argv[2])
    for kind in (Stdio, Http):
        measure(kind, cli, rounds, "--cold" in sys.argv[3:])
