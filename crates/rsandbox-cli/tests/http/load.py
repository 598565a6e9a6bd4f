"""Load and abuse for `rsandbox serve --http`: N requests at 32 connections mixing good
evaluations (plain and streamed), timeouts, memory bombs, output floods, fork bombs, R
errors, violations, malformed JSON, bad limits, oversized bodies, unknown sessions and
jobs, bad and missing tokens. Every request must get its status (and outcome); after the
load the server's memory is back near where it started and no sandbox is left.

Usage: load.py RSANDBOX_BINARY [REQUESTS] [--clean] [--connections N]. With --clean,
only `eval 1+1` (for the figures). Prints one `ok` line with requests/s and the p50/p99
latency of `eval 1+1` under that load.
"""
import asyncio
import statistics
import sys
import tempfile
import time
import os

import httpx2

from server import Server

BINARY = sys.argv[1]
LOAD = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
CLEAN = "--clean" in sys.argv
CONNECTIONS = int(sys.argv[sys.argv.index("--connections") + 1]) if "--connections" in sys.argv else 32
TOKEN = "load-token-0123456789abcdef"
ONE_PLUS_ONE = ({"code": "1 + 1"}, 200, "ok")

# (body, status, outcomes or None, how): a cycle of 20 requests.
MIX = [ONE_PLUS_ONE] * 6 + [
    ({"code": "Sys.sleep(3)", "timeout": 0.3}, 200, "timeout"),
    ({"code": "x <- numeric(1e9)", "limits": {"memory": "256M"}}, 200, "error|memory_limit"),
    ({"code": "repeat cat(strrep('x', 1e5))", "limits": {"max_output": "1M"}}, 200, "output_limit"),
    ({"code": "for (i in 1:200) parallel::mcparallel(Sys.sleep(5))", "limits": {"nproc": 20}}, 200, "error|process_limit|ok"),
    ({"code": "stop('as planned')"}, 200, "error"),
    ({"code": "system('id')"}, 200, "violation"),
    ({"code": "cat('streamed'); 2"}, 200, "stream"),
    (b'{"code": ', 400, None),
    ({"code": "1", "timeout": -1}, 400, None),
    ({"code": "1", "limits": {"memory": "64G"}}, 400, None),
    ({"code": "1"}, 401, "bad-token"),
    ({"code": "1"}, 401, "no-token"),
    ({"code": "1"}, 404, "unknown-session"),
    (None, 404, "unknown-job"),
]
assert len(MIX) == 20
OVERSIZED = b'{"code": "' + b"1" * (17 << 20) + b'"}'


async def main():
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(f"load:{TOKEN}\n")
    os.chmod(f.name, 0o600)
    # Node "load": the made-up ids s-load-… below are this server's own, never handed out.
    server = Server(BINARY, "--token-file", f.name, "--max-in-flight-per-token", "64",
                    "--max-requests-per-minute-per-token", "1000000", node="load")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        limits = httpx2.Limits(max_connections=CONNECTIONS)
        async with httpx2.AsyncClient(base_url=server.url, timeout=120, limits=limits, headers=auth) as client:
            await client.post("/v1/eval", json={"code": "1"})
            rss_before = server.rss_kb()
            latencies, counts = [], {}

            async def one(i):
                body, status, how = ONE_PLUS_ONE if CLEAN else MIX[i % len(MIX)]
                t = time.perf_counter()
                if not CLEAN and i % 1000 == 500:
                    answer = await oversized()
                    counts[answer] = counts.get(answer, 0) + 1
                    return
                if how == "stream":
                    async with client.stream("POST", "/v1/eval", json=body, headers={"Accept": "text/event-stream"}) as r:
                        text = (await r.aread()).decode()
                    assert r.status_code == 200 and "event: output" in text and "event: result" in text, text[:300]
                elif how == "unknown-job":
                    r = await client.get(f"/v1/jobs/j-load-{i:032x}")
                elif how == "unknown-session":
                    r = await client.post(f"/v1/sessions/s-load-{i:032x}/execute", json=body)
                elif how in ("bad-token", "no-token"):
                    headers = {"Authorization": "Bearer wrong-wrong-wrong-wrong"} if how == "bad-token" else {}
                    async with httpx2.AsyncClient(base_url=server.url, timeout=120, headers=headers) as other:
                        r = await other.post("/v1/eval", json=body)
                elif isinstance(body, bytes):
                    r = await client.post("/v1/eval", content=body, headers={"Content-Type": "application/json"})
                else:
                    r = await client.post("/v1/eval", json=body)
                elapsed = time.perf_counter() - t
                assert r.status_code == status, (body if not isinstance(body, bytes) else body[:40], r.status_code, r.text[:300])
                if status == 200 and how != "stream":
                    assert r.json()["outcome"] in how.split("|"), (body, r.json()["outcome"], r.json().get("error"))
                elif status >= 400:
                    assert r.json()["error"]["code"], r.text
                if (body, status, how) == ONE_PLUS_ONE:
                    assert r.json()["value"] == 2
                    latencies.append(elapsed)
                counts[status] = counts.get(status, 0) + 1

            async def oversized():
                # On a connection of its own: the server answers 413 from the headers and
                # closes without reading the body, so a client still sending may see the
                # connection reset before it reads the answer (HTTP/1.1 has no cure for
                # that without 100-continue); either way the body was refused.
                async with httpx2.AsyncClient(base_url=server.url, timeout=120, headers=auth) as alone:
                    try:
                        r = await alone.post("/v1/eval", content=OVERSIZED, headers={"Content-Type": "application/json"})
                        assert r.status_code == 413, r.text[:300]
                        return 413
                    except (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError):
                        return "reset"

            async def connection(c):
                # A closed loop per connection: latencies are the server's, not a queue's.
                for i in range(c, LOAD, CONNECTIONS):
                    try:
                        await one(i)
                    except httpx2.HTTPError as e:
                        kind = MIX[i % len(MIX)]
                        raise AssertionError(f"request {i} ({kind[2]}, {str(kind[0])[:80]}) got no answer: {e!r}") from e

            t0 = time.perf_counter()
            await asyncio.gather(*(connection(c) for c in range(CONNECTIONS)))
            took = time.perf_counter() - t0
            await asyncio.sleep(1)
            rss_after = server.rss_kb()
            metrics = (await client.get("/metrics")).text
        assert sum(counts.values()) == LOAD, counts
        q = statistics.quantiles(latencies, n=100)
        what = "eval 1+1 requests" if CLEAN else "mixed requests"
        print(f"ok {LOAD} {what} at {CONNECTIONS} connections, each with its status ({dict(sorted(counts.items(), key=str))}); "
              f"{LOAD / took:.0f} requests/s; eval 1+1: p50 {statistics.median(latencies) * 1000:.1f} ms, "
              f"p99 {q[98] * 1000:.1f} ms; server RSS {rss_before} -> {rss_after} kB")
        assert "rsandbox_sandboxes_busy 0" in metrics, [l for l in metrics.splitlines() if "busy" in l]
        # Near where it started: the allocator keeps some arenas, not what the load held.
        assert rss_after < rss_before + 100 * 1024, f"the server kept {rss_after - rss_before} kB"
    finally:
        server.stop()
        os.unlink(f.name)


asyncio.run(main())
