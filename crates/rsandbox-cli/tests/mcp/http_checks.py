"""`rsandbox mcp --http`, driven by the official MCP Python SDK over streamable HTTP:
what only the HTTP transport has (tokens, the loopback rule, sessions per MCP session,
caps, the idle timeout, many clients at once). The transport-independent checks are in
client.py, which the Rust test also runs against an HTTP server.

Usage: http_checks.py RSANDBOX_BINARY. One line per check; exits non-zero on the first
failed one.
"""
import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

BINARY = sys.argv[1]
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
TOKEN = "s3cret-token-for-the-mcp-test-0123"


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


class Server:
    """`rsandbox mcp --http 127.0.0.1:0 ARGS…`; the bound URL is read from stderr."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([BINARY, "mcp", "--http", "127.0.0.1:0", "--prefork", "1", *args],
                                     env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        found = re.search(r"listening on (http://\S+)", line)
        assert found, f"no address on stderr: {line!r}"
        self.url = found.group(1)

    def stop(self):
        """SIGTERM: a graceful shutdown, exit status 0."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        assert code == 0, f"the server exited {code} on SIGTERM: {self.proc.stderr.read()}"


@contextlib.asynccontextmanager
async def client(url, token=None):
    """One MCP session over streamable HTTP (ended with a DELETE when the block ends)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                # Kept for checks of the server's instructions.
                session.initialized = await session.initialize()
                yield session


async def main():
    # Without a token file only loopback is served: refused before R starts.
    refused = subprocess.run([BINARY, "mcp", "--http", "0.0.0.0:0"], env=ENV, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--token-file" in refused.stderr, refused
    print("ok a non-loopback address without --token-file is refused (exit 2)")

    # With tokens: 401 without one, the MCP session works with one.
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(f"agent:{TOKEN}\n")
    os.chmod(f.name, 0o600)
    server = Server("--token-file", f.name)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as raw:
            for bad in [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}"]:
                h = dict(headers, **({"Authorization": bad} if bad else {}))
                r = await raw.post(server.url, json=init, headers=h)
                assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", (bad, r.status_code, r.text)
        async with client(server.url, TOKEN) as s:
            r = await s.call_tool("run_r", {"code": "1 + 1"})
            assert text_of(r) == "[1] 2\n", text_of(r)
    finally:
        server.stop()
        os.unlink(f.name)
    print("ok bearer token required (401 without it, constant-time checked), works with it")

    # Sessions: one implicit R session per MCP session; handles work across them; caps.
    server = Server("--max-sessions", "4", "--max-sessions-per-connection", "2")
    try:
        async with client(server.url) as a, client(server.url) as b:
            await a.call_tool("run_r", {"code": "x <- 'from a'"})
            r = await b.call_tool("run_r", {"code": "exists('x')"})
            assert "FALSE" in text_of(r), "each MCP session has its own R session: " + text_of(r)
            handle = (await a.call_tool("new_session", {})).structured_content["session"]
            await a.call_tool("run_r", {"code": "y <- 7", "session": handle})
            r = await b.call_tool("run_r", {"code": "y * 6", "session": handle})
            assert "42" in text_of(r), "a handle works from any connection: " + text_of(r)
            r = await a.call_tool("new_session", {})
            assert r.is_error and "this connection holds 2 sessions" in text_of(r), text_of(r)
            assert not (await b.call_tool("new_session", {})).is_error
            async with client(server.url) as c:
                r = await c.call_tool("new_session", {})
                assert r.is_error and "4 sessions are open on this server" in text_of(r), text_of(r)
        # a and b ended (DELETE): their implicit R sessions are closed; the handles they
        # made live on until closed or idle.
        async with client(server.url) as c:
            r = await c.call_tool("run_r", {"code": "exists('x')"})
            assert not r.is_error and "FALSE" in text_of(r), text_of(r)
            r = await c.call_tool("run_r", {"code": "y", "session": handle})
            assert "7" in text_of(r), text_of(r)
            assert not (await c.call_tool("close_session", {"session": handle})).is_error
    finally:
        server.stop()
    print("ok an R session per MCP session, handles across sessions, caps per server and per connection")

    # Idle sessions are closed, and a later call is told why.
    server = Server("--idle-timeout", "1.5")
    try:
        async with client(server.url) as s:
            handle = (await s.call_tool("new_session", {})).structured_content["session"]
            await s.call_tool("run_r", {"code": "z <- 1", "session": handle})
            await asyncio.sleep(4)
            r = await s.call_tool("run_r", {"code": "z", "session": handle})
            assert r.is_error and "closed after" in text_of(r) and "idle timeout" in text_of(r), text_of(r)
    finally:
        server.stop()
    print("ok an idle session is closed and the handle says so")

    # Four clients, 200 calls each, at once: every answer right, the sessions apart.
    server = Server()
    try:
        latencies = []

        async def agent(k):
            async with client(server.url) as s:
                for i in range(1, 201):
                    t = time.perf_counter()
                    r = await s.call_tool("run_r", {"code": f"n <- if (exists('n')) n + 1L else 1L; c(n, {k})"})
                    latencies.append(time.perf_counter() - t)
                    assert not r.is_error and r.structured_content["value"] == [i, k], (k, i, text_of(r))
        await asyncio.gather(*(agent(k) for k in range(4)))
        assert len(latencies) == 800
        q = statistics.quantiles(latencies, n=10)
        print(f"ok 4 clients x 200 run_r calls, all right and apart (latency under load: median "
              f"{statistics.median(latencies) * 1000:.1f} ms, p90 {q[8] * 1000:.1f} ms)")
        async with client(server.url) as s:
            alone = []
            for _ in range(100):
                t = time.perf_counter()
                await s.call_tool("run_r", {"code": "1 + 1"})
                alone.append(time.perf_counter() - t)
            q = statistics.quantiles(alone, n=10)
            print(f"info run_r(1+1) over HTTP, one client, 100 calls: median {statistics.median(alone) * 1000:.2f} ms, "
                  f"p90 {q[8] * 1000:.2f} ms")
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
