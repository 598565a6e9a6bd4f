"""`rsandbox serve --http`, driven with a real HTTP client (httpx2, from the MCP venv):
every endpoint, every error path, session ownership across tokens, the caps, and a
mixed load of good and bad requests at 32 connections.

Usage: api_checks.py RSANDBOX_BINARY [LOAD_REQUESTS]. One line per check; exits
non-zero on the first failed one.
"""
import asyncio
import base64
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import httpx2

BINARY = sys.argv[1]
LOAD = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([BINARY, "serve", "--http", "127.0.0.1:0", "--prefork", "2", *args], env=ENV,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        found = re.search(r"listening on (http://\S+)", line)
        assert found, f"no address on stderr: {line!r}"
        self.url = found.group(1)

    def children(self):
        """Processes below the server (the zygote and its sandboxes)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])

    def stop(self):
        """SIGTERM: exit 0, and nothing the server started is left."""
        children = self.children()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        assert code == 0, f"SIGTERM ends the server cleanly, got {code}: {self.proc.stderr.read()}"
        deadline = time.time() + 10
        while any(os.path.exists(f"/proc/{p}") for p in children) and time.time() < deadline:
            time.sleep(0.1)
        left = [p for p in children if os.path.exists(f"/proc/{p}")]
        assert not left, f"processes of the server still alive: {left}"


def error_code(r):
    return r.json()["error"]["code"]


async def main():
    refused = subprocess.run([BINARY, "serve", "--http", "0.0.0.0:0"], env=ENV, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--token-file" in refused.stderr, refused
    print("ok a non-loopback address without --token-file is refused (exit 2)")

    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(f"alice:{ALICE}\nbob:{BOB}\n")
    os.chmod(f.name, 0o600)
    server = Server("--token-file", f.name, "--max-timeout", "60", "--max-memory", "1G",
                    "--max-in-flight-per-token", "4", "--max-sessions-per-token", "2")
    alice = httpx2.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {ALICE}"}, timeout=120)
    bob = httpx2.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {BOB}"}, timeout=120)
    anonymous = httpx2.AsyncClient(base_url=server.url, timeout=120)
    try:
        assert (await anonymous.get("/healthz")).text == "ok\n"
        assert (await anonymous.get("/readyz")).status_code == 200
        spec = (await anonymous.get("/openapi.json")).json()
        assert spec["openapi"].startswith("3.") and "/v1/eval" in spec["paths"] and "EvalResult" in spec["components"]["schemas"]
        print("ok healthz, readyz, openapi.json (generated) without a token")

        for bad in [anonymous, httpx2.AsyncClient(base_url=server.url, headers={"Authorization": "Bearer nope-nope-nope-nope"})]:
            r = await bad.post("/v1/eval", json={"code": "1"})
            assert r.status_code == 401 and error_code(r) == "unauthorized", r.text
        assert (await anonymous.get("/metrics")).status_code == 401
        print("ok 401 without a valid token, JSON error")

        r = await alice.post("/v1/eval", json={"code": "x <- 1:10; mean(x)"})
        assert r.status_code == 200 and r.json()["outcome"] == "ok" and r.json()["value"] == 5.5, r.text
        files = [{"path": "in/data.csv", "data_base64": base64.b64encode(b"a,b\n1,2\n").decode()}]
        r = await alice.post("/v1/eval", json={"code": "write.csv(read.csv('in/data.csv') * 2, 'out.csv', row.names = FALSE)",
                                                "files": files, "collect": ["*.csv"]})
        out = {f["path"]: base64.b64decode(f["data_base64"]) for f in r.json()["files"]}
        assert out == {"out.csv": b'"a","b"\n2,4\n'}, r.json()["files"]
        r = await alice.post("/v1/eval", json={"code": "system('id')"})
        assert r.status_code == 200 and r.json()["outcome"] == "violation", r.text
        r = await alice.post("/v1/eval", json={"code": "Sys.sleep(5)", "timeout": 0.5})
        assert r.json()["outcome"] == "timeout", r.text
        print("ok eval: value, files in and out, violation and timeout as outcomes")

        for body, what in [(b'{"code":', "malformed JSON"), (b'{"code": 5}', "wrong type"), (b'{"code": "1", "nope": 1}', "unknown field"),
                           (b'{"code": "1", "timeout": 600}', "timeout above the cap"), (b'{"code": "1", "limits": {"memory": "8G"}}', "memory above the cap"),
                           (b'{"code": ""}', "empty code"), (b'{"code": "1", "limits": {"memory": "lots"}}', "bad size")]:
            r = await alice.post("/v1/eval", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and error_code(r) == "bad_input", (what, r.status_code, r.text)
        # On a connection of its own: the server answers before reading the whole body
        # and closes the connection.
        async with httpx2.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {ALICE}"}, timeout=120) as once:
            r = await once.post("/v1/eval", content=b'{"code": "' + b"1" * (17 << 20) + b'"}', headers={"Content-Type": "application/json"})
        assert r.status_code == 413, (r.status_code, r.text[:200])
        print("ok 400 for bad bodies and limits above the caps (never lowered silently), 413 for oversized")

        r = await alice.post("/v1/sessions", json={"limits": {"memory": "512M"}})
        assert r.status_code == 201, r.text
        sid = r.json()["session"]
        r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "y <- 41"})
        r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "y + 1"})
        assert r.json()["value"] == 42, r.text
        r = await alice.put(f"/v1/sessions/{sid}/files/notes/a.txt", content=b"hello")
        assert r.status_code == 200 and r.json()["size"] == 5, r.text
        r = await alice.get(f"/v1/sessions/{sid}/files/notes/a.txt")
        assert base64.b64decode(r.json()["data_base64"]) == b"hello", r.text
        r = await alice.get(f"/v1/sessions/{sid}/files/../../etc/passwd")
        assert r.status_code in (400, 404), r.text
        for call in [bob.post(f"/v1/sessions/{sid}/execute", json={"code": "y"}), bob.delete(f"/v1/sessions/{sid}"),
                     bob.get(f"/v1/sessions/{sid}/files/notes/a.txt")]:
            r = await call
            assert r.status_code == 404 and error_code(r) == "not_found", r.text
        running = asyncio.create_task(alice.post(f"/v1/sessions/{sid}/execute", json={"code": "Sys.sleep(3); 'slept'"}))
        await asyncio.sleep(1)
        r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "1"})
        assert r.status_code == 409 and error_code(r) == "busy", r.text
        r = await alice.post(f"/v1/sessions/{sid}/interrupt")
        assert r.json()["interrupted"] is True, r.text
        r = await running
        assert r.json()["outcome"] == "interrupted", r.text
        r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "y"})
        assert r.json()["value"] == 41, "an interrupt keeps the state: " + r.text
        second = (await alice.post("/v1/sessions", json={})).json()["session"]
        r = await alice.post("/v1/sessions", json={})
        assert r.status_code == 409 and "2 sessions" in r.json()["error"]["message"], r.text
        assert (await alice.delete(f"/v1/sessions/{second}")).status_code == 204
        assert (await alice.delete(f"/v1/sessions/{sid}")).status_code == 204
        r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "1"})
        assert r.status_code == 404, r.text
        print("ok sessions: state, files, another token gets 404, 409 busy, interrupt keeps state, cap, delete")

        slow = [alice.post("/v1/eval", json={"code": "Sys.sleep(2); 1"}) for _ in range(6)]
        answers = await asyncio.gather(*slow)
        statuses = sorted(r.status_code for r in answers)
        assert statuses.count(200) == 4 and statuses.count(429) == 2, statuses
        limited = next(r for r in answers if r.status_code == 429)
        assert limited.headers["Retry-After"] == "1" and error_code(limited) == "rate_limited", limited.headers
        r = await bob.post("/v1/eval", json={"code": "'bob is not limited by alice'"})
        assert r.status_code == 200, r.text
        metrics = (await alice.get("/metrics")).text
        assert 'route="/v1/eval",status="429"} 2' in metrics and 'outcome="violation"' in metrics, metrics
        print("ok 429 with Retry-After past the token's in-flight cap (per token), metrics count it")
    finally:
        for c in (alice, bob, anonymous):
            await c.aclose()
        server.stop()
        os.unlink(f.name)

    # Load and abuse at 32 connections: every request answered with its status, nothing
    # left running, the server's memory back near where it started.
    server = Server("--max-in-flight-per-token", "64")
    try:
        limits = httpx2.Limits(max_connections=32)
        async with httpx2.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
            await client.post("/v1/eval", json={"code": "1"})
            rss_before = server.rss_kb()
            kinds = [
                ({"code": "1 + 1"}, 200, "ok"),
                ({"code": "Sys.sleep(3)", "timeout": 0.3}, 200, "timeout"),
                ({"code": "x <- numeric(1e9)", "limits": {"memory": "256M"}}, 200, "error|memory_limit"),
                ({"code": "repeat cat(strrep('x', 1e5))", "limits": {"max_output": "1M"}}, 200, "output_limit"),
                ({"code": "for (i in 1:200) parallel::mcparallel(Sys.sleep(5))", "limits": {"nproc": 20}}, 200, "error|process_limit|ok"),
                (b'{"code": ', 400, None),
                ({"code": "1", "timeout": -1}, 400, None),
            ]
            latencies = []
            counts = {}

            async def one(i):
                body, status, outcomes = kinds[i % len(kinds)]
                t = time.perf_counter()
                if isinstance(body, bytes):
                    r = await client.post("/v1/eval", content=body, headers={"Content-Type": "application/json"})
                else:
                    r = await client.post("/v1/eval", json=body)
                elapsed = time.perf_counter() - t
                assert r.status_code == status, (body, r.status_code, r.text[:300])
                if outcomes:
                    assert r.json()["outcome"] in outcomes.split("|"), (body, r.json()["outcome"], r.json().get("error"))
                if i % len(kinds) == 0:
                    latencies.append(elapsed)
                counts[status] = counts.get(status, 0) + 1

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(LOAD)))
            took = time.perf_counter() - t0
            for kind in ["/v1/sessions/unknown/execute"]:
                r = await client.post(kind, json={"code": "1"})
                assert r.status_code == 404, r.text
            await asyncio.sleep(1)
            rss_after = server.rss_kb()
        q = statistics.quantiles(latencies, n=100)
        print(f"ok {LOAD} mixed requests at 32 connections, each with its status ({counts}); {LOAD / took:.0f} requests/s; "
              f"eval 1+1 under that load: p50 {statistics.median(latencies) * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms; "
              f"server RSS {rss_before} -> {rss_after} kB")
        # Near where it started: the allocator keeps some arenas, not what the load held.
        assert rss_after < rss_before + 100 * 1024, f"the server kept {rss_after - rss_before} kB"
    finally:
        server.stop()


asyncio.run(main())
