"""`rsandbox serve --http`, driven with a real HTTP client (httpx2, from the MCP venv):
every endpoint, every error path, session ownership across tokens, the caps, streaming
and tool calls, jobs, the connection timeouts, the logs and a graceful stop.

Usage: api_checks.py RSANDBOX_BINARY. One line per check; exits non-zero on the first
failed one. The load test is load.py.
"""
import asyncio
import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx2

from server import ENV, Server

BINARY = sys.argv[1]
ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"


def error_code(r):
    return r.json()["error"]["code"]


async def main():
    refused = subprocess.run([BINARY, "serve", "--http", "0.0.0.0:0"], env=ENV, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--token-file" in refused.stderr, refused
    print("ok a non-loopback address without --token-file is refused (exit 2)")

    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(f"alice:{ALICE}\nbob:{BOB}\n")
    os.chmod(f.name, 0o600)
    server = Server(BINARY, "--token-file", f.name, "--max-timeout", "60", "--max-memory", "1G",
                    "--max-in-flight-per-token", "4", "--max-sessions-per-token", "2", "--job-retention", "3")
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
                           (b'{"code": ""}', "empty code"), (b'{"code": "1", "limits": {"memory": "lots"}}', "bad size"),
                           (b'{"code": "1", "limits": {"max_output": "1G"}}', "max_output above the cap")]:
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
            assert r.status_code == 404 and error_code(r) == "unknown_session", r.text
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
        assert 'route="/v1/eval",status="429",token="alice"} 2' in metrics and 'outcome="violation"' in metrics, metrics
        assert 'rsandbox_violations_total{syscall="execve"}' in metrics, metrics
        assert 'rsandbox_http_request_seconds_bucket{route="/v1/eval",le="+Inf"}' in metrics and "rsandbox_pool_idle " in metrics, metrics
        assert "rsandbox_queue 0" in metrics, [l for l in metrics.splitlines() if "queue" in l]
        print("ok 429 with Retry-After past the token's in-flight cap (per token), metrics count it")

        await routes_errors_and_files(server, alice, bob, anonymous)
        await streaming_and_tools(server, alice, bob)
        await jobs_and_snapshots(alice, bob)
        await logs_carry_the_request_id(server, alice)
    finally:
        for c in (alice, bob, anonymous):
            await c.aclose()
        server.stop()
        os.unlink(f.name)
    await readiness_is_cached()
    await per_minute_limit()
    await connection_timeouts()
    await graceful_stop()


SESSION_ID = re.compile(r"s-[a-z0-9-]{1,32}-[0-9a-f]{32}")


async def routes_errors_and_files(server, alice, bob, anonymous):
    # Every error has the JSON body, unknown routes and wrong methods included.
    for client, method, url, status, code in [(anonymous, "GET", "/nowhere", 404, "not_found"),
                                              (alice, "GET", "/v1/nope", 404, "not_found"),
                                              (alice, "DELETE", "/v1/eval", 405, "method_not_allowed"),
                                              (alice, "PUT", "/v1/sessions", 405, "method_not_allowed"),
                                              (anonymous, "GET", "/v1/sessions", 401, "unauthorized")]:
        r = await client.request(method, url)
        assert r.status_code == status and error_code(r) == code, (method, url, r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/json"), r.headers
    r = await anonymous.post("/v1/eval", json={"code": "1"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.headers

    # Ids: unguessable, with the node; the affinity header names the session.
    r = await alice.post("/v1/sessions", json={})
    assert r.status_code == 201 and SESSION_ID.fullmatch(r.json()["session"]), r.text
    sid = r.json()["session"]
    assert r.headers["x-rsandbox-session"] == sid, r.headers
    job = (await alice.post("/v1/jobs", json={"code": "1"})).json()["job"]
    assert re.fullmatch(r"j-[a-z0-9-]{1,32}-[0-9a-f]{32}", job), job
    assert job.split("-")[1:-1] == sid.split("-")[1:-1], "the same node tag"

    # The caller's sessions, and only theirs.
    listed = (await alice.get("/v1/sessions")).json()["sessions"]
    assert [s["session"] for s in listed] == [sid] and listed[0]["executing"] is False, listed
    assert (await bob.get("/v1/sessions")).json() == {"sessions": []}

    # Files: listed, read as JSON or as raw bytes.
    blob = bytes(range(256)) * 4
    assert (await alice.put(f"/v1/sessions/{sid}/files/data/blob.bin", content=blob)).status_code == 200
    await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "writeLines('hi', 'note.txt')"})
    r = await alice.get(f"/v1/sessions/{sid}/files")
    assert r.status_code == 200, r.text
    assert sorted((f["path"], f["size"]) for f in r.json()["files"]) == [("data/blob.bin", 1024), ("note.txt", 3)], r.json()
    assert r.json()["truncated"] is False
    assert (await bob.get(f"/v1/sessions/{sid}/files")).status_code == 404
    r = await alice.get(f"/v1/sessions/{sid}/files/data/blob.bin", headers={"Accept": "application/octet-stream"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream" and r.content == blob, r.headers
    r = await alice.get(f"/v1/sessions/{sid}/files/data/blob.bin")
    assert r.headers["content-type"].startswith("application/json") and base64.b64decode(r.json()["data_base64"]) == blob
    r = await alice.get(f"/v1/sessions/{sid}/files/missing.txt", headers={"Accept": "application/octet-stream"})
    assert r.status_code in (400, 404) and "error" in r.json(), r.text
    assert (await alice.delete(f"/v1/sessions/{sid}")).status_code == 204
    assert (await alice.get("/v1/sessions")).json() == {"sessions": []}
    for _ in range(100):
        if (await alice.get(f"/v1/jobs/{job}")).json()["state"] != "running":
            break
        await asyncio.sleep(0.1)
    print("ok JSON errors for unknown routes (404) and methods (405), 401 with WWW-Authenticate: Bearer; random ids "
          "with the node, x-rsandbox-session; the caller's sessions listed; files listed and read raw")


async def readiness_is_cached():
    audit = tempfile.mktemp(prefix="rsandbox-audit-")
    server = Server(BINARY, "--audit-log", audit)

    def checks():
        with open(audit) as f:
            return sum(1 for l in f if '"execute_start"' in l and '"invisible(NULL)"' in l)
    try:
        at_start = checks()
        async with httpx2.AsyncClient(base_url=server.url, timeout=120) as client:
            answers = await asyncio.gather(*(client.get("/readyz") for _ in range(30)))
            assert all(r.status_code == 200 and r.text == "ready\n" for r in answers), [r.status_code for r in answers]
            more = [(await client.get("/readyz")).status_code for _ in range(10)]
            assert more == [200] * 10, more
        made = checks() - at_start
        # One test sandbox per 5 s at most: 40 asks cost one or two, never one each.
        assert made <= 2, f"{made} test sandboxes for 40 readiness checks"
    finally:
        server.stop()
        os.unlink(audit)
    print(f"ok /readyz reuses its answer: 40 checks started {made} test sandbox(es)")


async def events(client, url, body):
    """POST with Accept: text/event-stream; the (event, data) pairs as they come, and
    the callback's answers to tool calls."""
    got = []
    async with client.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), (r.status_code, await r.aread())
        name = None
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                got.append((name, json.loads(line[len("data: "):])))
                yield got[-1]
    assert got and got[-1][0] in ("result", "error"), got


async def streaming_and_tools(server, alice, bob):
    seen = [e async for e in events(alice, "/v1/eval", {"code": "for (i in 1:3) { cat('line', i, '\\n'); Sys.sleep(0.3) }; message('done'); 42"})]
    kinds = [k for k, _ in seen]
    text = "".join(d["text"] for k, d in seen if k == "output" and d["stream"] == "stdout")
    assert "line 1" in text and "line 3" in text and kinds[-1] == "result" and seen[-1][1]["value"] == 42, seen
    assert any(k == "output" and d["stream"] == "message" for k, d in seen), seen
    # The output came while the code ran: the first event precedes the result by the sleeps.
    assert kinds.index("output") < len(kinds) - 1
    print("ok eval with Accept: text/event-stream streams output events, then the result")

    tools = [{"name": "lookup", "description": "a value by key", "args": {"key": "character"}},
             {"name": "fails", "args": {}}]
    r = await alice.post("/v1/sessions", json={"tools": tools})
    assert r.status_code == 201, r.text
    sid = r.json()["session"]
    table = {"pi": 3.14, "e": 2.72}
    calls = []
    async for name, data in events(alice, f"/v1/sessions/{sid}/execute",
                                   {"code": "a <- lookup('pi'); b <- tryCatch(fails(), error = function(e) conditionMessage(e)); list(a, b)"}):
        if name == "tool_call":
            calls.append(data)
            if data["tool"] == "lookup":
                # Another token cannot answer it, nor can anyone answer a call that does not wait.
                r = await bob.post(f"/v1/sessions/{sid}/tool_results/{data['call']}", json={"value": 0})
                assert r.status_code == 404, r.text
                r = await alice.post(f"/v1/sessions/{sid}/tool_results/call-999", json={"value": 0})
                assert r.status_code == 404 and error_code(r) == "unknown_call", r.text
                r = await alice.post(f"/v1/sessions/{sid}/tool_results/{data['call']}", json={"value": 1, "error": "x"})
                assert r.status_code == 400, r.text
                answer = {"value": table[data["args"]["key"]]}
            else:
                answer = {"error": "the host says no"}
            r = await alice.post(f"/v1/sessions/{sid}/tool_results/{data['call']}", json=answer)
            assert r.status_code == 200 and r.json()["call"] == data["call"], r.text
        elif name == "result":
            result = data
    assert [c["tool"] for c in calls] == ["lookup", "fails"] and calls[0]["args"] == {"key": "pi"}, calls
    assert result["outcome"] == "ok" and result["value"][0] == 3.14 and "the host says no" in result["value"][1], result
    # Without a stream there is no one to answer: the call fails in R, saying why.
    r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "tryCatch(lookup('e'), error = function(e) conditionMessage(e))"})
    assert r.status_code == 200 and "text/event-stream" in r.json()["value"], r.text
    # A streaming execute on a busy session is refused before its stream starts.
    running = asyncio.create_task(alice.post(f"/v1/sessions/{sid}/execute", json={"code": "Sys.sleep(2)"}))
    await asyncio.sleep(0.7)
    r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "1"}, headers={"Accept": "text/event-stream"})
    assert r.status_code == 409 and error_code(r) == "busy", r.text
    await running
    # A client that leaves a stream interrupts its execute: the session is free at once.
    async with alice.stream("POST", f"/v1/sessions/{sid}/execute", json={"code": "cat('started\\n'); Sys.sleep(60)", "timeout": 50},
                            headers={"Accept": "text/event-stream"}) as r:
        async for line in r.aiter_lines():
            if "started" in line:
                break
    for _ in range(50):
        r = await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "'free'"})
        if r.status_code != 409:
            break
        await asyncio.sleep(0.2)
    assert r.status_code == 200 and r.json()["value"] == "free", r.text
    assert (await alice.delete(f"/v1/sessions/{sid}")).status_code == 204
    print("ok session tools over a stream: tool_call events answered with tool_results (value or error), 404 for others, "
          "no stream = a clear R error, 409 before a stream, a dropped stream interrupts")


async def jobs_and_snapshots(alice, bob):
    r = await alice.post("/v1/jobs", json={"code": "Sys.sleep(1); sum(1:10)"})
    assert r.status_code == 202 and r.json()["state"] == "running", r.text
    job = r.json()["job"]
    assert r.headers["Location"] == f"/v1/jobs/{job}"
    assert (await bob.get(f"/v1/jobs/{job}")).status_code == 404
    for _ in range(100):
        view = (await alice.get(f"/v1/jobs/{job}")).json()
        if view["state"] != "running":
            break
        await asyncio.sleep(0.1)
    assert view["state"] == "done" and view["result"]["value"] == 55, view
    r = await alice.post("/v1/jobs", json={"code": "1", "limits": {"memory": "64G"}})
    assert r.status_code == 400, r.text
    # Retention is 3 s on this server: the result is gone after it.
    await asyncio.sleep(3.5)
    r = await alice.get(f"/v1/jobs/{job}")
    assert r.status_code == 404 and error_code(r) == "not_found", r.text
    print("ok jobs: 202 + Location, polled to done with the result, another token 404, bad limits 400, dropped after retention")

    sid = (await alice.post("/v1/sessions", json={})).json()["session"]
    await alice.post(f"/v1/sessions/{sid}/execute", json={"code": "x <- c(a = 1, b = 2); con <- textConnection('abc')"})
    r = await alice.post(f"/v1/sessions/{sid}/snapshot")
    assert r.status_code == 200 and "con" in r.json()["not_saved"], r.text
    snapshot = r.json()["snapshot"]
    assert (await alice.delete(f"/v1/sessions/{sid}")).status_code == 204
    r = await alice.post("/v1/sessions", json={"restore": snapshot})
    assert r.status_code == 201, r.text
    restored = r.json()["session"]
    r = await alice.post(f"/v1/sessions/{restored}/execute", json={"code": "x[['b']]"})
    assert r.json()["value"] == 2, r.text
    assert (await alice.delete(f"/v1/sessions/{restored}")).status_code == 204
    r = await alice.post("/v1/sessions", json={"restore": "bm90IGEgc25hcHNob3Q="})
    assert r.status_code == 400 and error_code(r) == "bad_input", r.text
    print("ok snapshots: saved (what could not be is named), restored into a new session; garbage is bad input")


async def logs_carry_the_request_id(server, alice):
    r = await alice.post("/v1/eval", json={"code": "1"}, headers={"X-Request-Id": "my-trace-42"})
    assert r.headers["x-request-id"] == "my-trace-42", r.headers
    r = await alice.post("/v1/eval", json={"code": "1"}, headers={"X-Request-Id": "not ok/" * 20})
    generated = r.headers["x-request-id"]
    assert generated.startswith("req-"), generated
    await asyncio.sleep(0.3)
    mine = [l for l in server.log if l.get("span", {}).get("request_id") == "my-trace-42"]
    answered = [l for l in mine if l["message"] == "answered"]
    assert answered and answered[0]["status"] == 200 and answered[0]["token"] == "alice", mine
    # One line a request: the answer's line holds its result's outcome.
    assert len(mine) == 1 and answered[0]["outcome"] == "ok" and "wall_ms" in answered[0], mine
    # A job's result comes after its 202: a line of its own, with the job request's id.
    r = await alice.post("/v1/jobs", json={"code": "1"}, headers={"X-Request-Id": "my-job-7"})
    assert r.status_code == 202, r.text
    for _ in range(100):
        if (await alice.get(r.headers["location"])).json()["state"] != "running":
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    job_lines = [l for l in server.log if l.get("span", {}).get("request_id") == "my-job-7"]
    by_message = {l["message"]: l for l in job_lines}
    assert len(job_lines) == 2 and by_message["result"]["outcome"] == "ok", job_lines
    assert "outcome" not in by_message["answered"] and by_message["answered"]["status"] == 202, job_lines
    assert any(l.get("span", {}).get("request_id") == generated for l in server.log)
    print("ok every response has x-request-id (the client's if plain), and the JSON log lines of that request carry it: one line an eval, with its outcome; a job's result a line of its own")


async def per_minute_limit():
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(f"alice:{ALICE}\nbob:{BOB}\n")
    os.chmod(f.name, 0o600)
    server = Server(BINARY, "--token-file", f.name, "--max-requests-per-minute-per-token", "5")
    try:
        async with httpx2.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {ALICE}"}) as alice, \
                httpx2.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {BOB}"}) as bob:
            statuses = [(await alice.get("/v1/jobs/none")).status_code for _ in range(5)]
            assert statuses == [404] * 5, statuses
            r = await alice.post("/v1/eval", json={"code": "1"})
            assert r.status_code == 429 and error_code(r) == "rate_limited" and 1 <= int(r.headers["Retry-After"]) <= 60, (r.text, r.headers)
            assert (await bob.post("/v1/eval", json={"code": "1"})).status_code == 200
    finally:
        server.stop()
        os.unlink(f.name)
    print("ok requests per minute per token: the 6th of 5 gets 429 with Retry-After; another token is not limited")


async def connection_timeouts():
    server = Server(BINARY, "--header-timeout", "2")
    try:
        def closed_within(sock, seconds):
            sock.settimeout(seconds)
            try:
                return sock.recv(65536) == b"" or sock.recv(65536) == b""
            except (socket.timeout, ConnectionResetError):
                return False
        silent = socket.create_connection(("127.0.0.1", server.port))
        assert closed_within(silent, 15), "a connection that sends nothing is closed after the header timeout"
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert closed_within(slow, 15), "headers that never end are cut off"
        idle = socket.create_connection(("127.0.0.1", server.port))
        idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.settimeout(10)
        assert idle.recv(65536).startswith(b"HTTP/1.1 200")
        assert closed_within(idle, 15), "a kept-alive connection left idle is closed"
        # The server still serves.
        async with httpx2.AsyncClient(base_url=server.url) as client:
            assert (await client.get("/healthz")).status_code == 200
    finally:
        server.stop()
    print("ok the header timeout closes silent, slow and idle kept-alive connections; the server keeps serving")


async def graceful_stop():
    # Within the grace period, running work finishes and its answer is sent.
    server = Server(BINARY, "--shutdown-grace", "30")
    async with httpx2.AsyncClient(base_url=server.url, timeout=60) as client:
        running = asyncio.create_task(client.post("/v1/eval", json={"code": "Sys.sleep(1.5); 'finished'"}))
        await asyncio.sleep(0.7)
        server.proc.send_signal(signal.SIGTERM)
        r = await running
    assert r.status_code == 200 and r.json()["value"] == "finished", r.text
    server.stop()
    # Past the grace period, the server exits anyway and no sandbox is left.
    server = Server(BINARY, "--shutdown-grace", "1")
    async with httpx2.AsyncClient(base_url=server.url, timeout=60) as client:
        sid = (await client.post("/v1/sessions", json={})).json()["session"]
        running = [asyncio.create_task(client.post("/v1/eval", json={"code": "Sys.sleep(60)", "timeout": 100})),
                   asyncio.create_task(client.post(f"/v1/sessions/{sid}/execute", json={"code": "Sys.sleep(60)", "timeout": 100}))]
        await asyncio.sleep(1.5)
        assert len(server.descendants()) >= 3, "the zygote and two sandboxes run"
        started = time.time()
        server.stop(wait=20)
        for t in running:
            try:
                r = await t
                raise AssertionError(f"work past the grace period was answered: {r.status_code}")
            except httpx2.HTTPError:
                pass  # the connection closed with the server, unanswered
    print(f"ok SIGTERM: running work finishes within the grace period; past it the server exits "
          f"({time.time() - started:.1f} s with 1 s of grace) and leaves no process")


asyncio.run(main())
