"""`rsandbox mcp --http` with two tokens, driven by the official MCP Python SDK: a
session belongs to the token that made it (another token's client cannot run code in
it, read or write its files, list them, interrupt, reset or close it, and is told
exactly what it would be told of a handle that never existed); an MCP session cannot be
borrowed with another token; new_session's memory is bounded by the server's cap; and
the HTTP listener's caps (body limit, header timeout) hold.

Usage: owner_checks.py RSANDBOX_BINARY. One line per check; exits non-zero on the first
failed one.
"""
import asyncio
import json
import os
import re
import socket
import sys
import tempfile

import httpx2

from http_checks import Server, client, text_of

BINARY = sys.argv[1]
ALICE, BOB = "alice-mcp-token-0123456789", "bob-mcp-token-0123456789ab"


def server_rss_kb(server):
    with open(f"/proc/{server.proc.pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


def unknown_text(handle):
    return f"no session {json.dumps(handle)} (it was closed, or never existed): new_session gives a handle [unknown_session]"


async def main():
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(f"alice:{ALICE}\nbob:{BOB}\n")
    os.chmod(f.name, 0o600)
    server = Server("--token-file", f.name, "--max-memory", "1G", "--header-timeout", "2")
    try:
        await ownership(server)
        await borrowed_mcp_session(server)
        await memory_cap(server)
        await listener_caps(server)
    finally:
        server.stop()
        os.unlink(f.name)


async def ownership(server):
    async with client(server.url, ALICE) as alice, client(server.url, BOB) as bob:
        r = await alice.call_tool("new_session", {})
        assert not r.is_error, text_of(r)
        handle = r.structured_content["session"]
        assert re.fullmatch(r"s-[a-z0-9-]{1,32}-[0-9a-f]{32}", handle), handle
        await alice.call_tool("run_r", {"code": "secret <- 'alice'", "session": handle})
        await alice.call_tool("write_file", {"session": handle, "path": "a.txt", "text": "alice's"})
        # A handle of the same form that never existed: what bob hears of alice's must
        # be the same words.
        never = handle[:-32] + "0" * 32
        attempts = [("run_r", {"code": "secret", "session": handle}),
                    ("read_file", {"session": handle, "path": "a.txt"}),
                    ("write_file", {"session": handle, "path": "a.txt", "text": "bob's"}),
                    ("list_files", {"session": handle}),
                    ("interrupt", {"session": handle}),
                    ("reset_session", {"session": handle}),
                    ("close_session", {"session": handle})]
        for tool, args in attempts:
            r = await bob.call_tool(tool, args)
            assert r.is_error and text_of(r) == unknown_text(handle), (tool, text_of(r))
            r2 = await bob.call_tool(tool, dict(args, session=never))
            assert r2.is_error and text_of(r2) == unknown_text(never), (tool, text_of(r2))
        # Alice's session is untouched: state, file, still open.
        r = await alice.call_tool("run_r", {"code": "secret", "session": handle})
        assert not r.is_error and r.structured_content["value"] == "alice", text_of(r)
        r = await alice.call_tool("read_file", {"session": handle, "path": "a.txt"})
        assert text_of(r) == "alice's", text_of(r)
        # Bob's own sessions work; a second client of alice's token reaches her handle.
        r = await bob.call_tool("run_r", {"code": "exists('secret')"})
        assert "FALSE" in text_of(r), text_of(r)
        async with client(server.url, ALICE) as alice2:
            r = await alice2.call_tool("run_r", {"code": "secret", "session": handle})
            assert not r.is_error and r.structured_content["value"] == "alice", text_of(r)
        assert not (await alice.call_tool("close_session", {"session": handle})).is_error
    print("ok another token's session is reported exactly as an unknown one for every tool; the owner's is untouched")


async def rpc(http, url, token, body, session_id=None):
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    r = await http.post(url, json=body, headers=headers)
    messages = []
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                messages.append(json.loads(line[5:]))
    elif r.content:
        messages.append(r.json())
    return r, messages


async def borrowed_mcp_session(server):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx2.AsyncClient(timeout=60) as http:
        r, _ = await rpc(http, server.url, ALICE, init)
        assert r.status_code == 200, r.text
        sid = r.headers["mcp-session-id"]
        r, _ = await rpc(http, server.url, ALICE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        assert r.status_code in (200, 202), r.text
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_r", "arguments": {"code": "x <- 1; x"}}}
        r, msgs = await rpc(http, server.url, ALICE, call, sid)
        answer = next(m for m in msgs if m.get("id") == 2)
        assert not answer["result"].get("isError"), answer
        # Bob presents alice's MCP session id: refused, and alice's implicit session is not his.
        call["id"] = 3
        call["params"]["arguments"] = {"code": "x"}
        r, msgs = await rpc(http, server.url, BOB, call, sid)
        answer = next(m for m in msgs if m.get("id") == 3)
        assert answer["result"]["isError"] and "another token" in answer["result"]["content"][0]["text"], answer
        call["id"] = 4
        r, msgs = await rpc(http, server.url, ALICE, call, sid)
        answer = next(m for m in msgs if m.get("id") == 4)
        assert not answer["result"].get("isError") and answer["result"]["structuredContent"]["value"] == 1, answer
    print("ok an MCP session started with one token cannot be used with another")


async def memory_cap(server):
    async with client(server.url, ALICE) as alice:
        r = await alice.call_tool("new_session", {"memory": "6G"})
        assert r.is_error and "above this server's cap of 1024 MiB" in text_of(r), text_of(r)
        r = await alice.call_tool("new_session", {"memory": "512M"})
        assert not r.is_error, text_of(r)
        assert not (await alice.call_tool("close_session", {"session": r.structured_content["session"]})).is_error
    print("ok new_session's memory above the server's cap is refused, within it granted")


async def listener_caps(server):
    port = int(server.url.split(":")[2].split("/")[0])
    head = (f"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n")

    def answer_of(sock):
        sock.settimeout(30)
        got = b""
        while b"\r\n\r\n" not in got:
            part = sock.recv(65536)
            if not part:
                break
            got += part
        return got

    def declared_too_large():
        # A 400 MiB body announced: refused before any of it is read.
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall((head + f"Content-Length: {400 << 20}\r\n\r\n").encode())
            return answer_of(sock)

    def chunked_too_large():
        # No length: 16 MiB and one byte more arrive, then the server says no (the
        # sender stops there, so nothing is left unread to reset the connection).
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
            chunk = b"1" * (1 << 20)
            for _ in range(16):
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sock.sendall(b"1\r\n1\r\n")
            return answer_of(sock)
    before = server_rss_kb(server)
    for what, send in [("declared", declared_too_large), ("chunked", chunked_too_large)]:
        answer = await asyncio.to_thread(send)
        assert answer.startswith(b"HTTP/1.1 413"), (what, answer[:300])
    grown = server_rss_kb(server) - before
    assert grown < 64 << 10, f"the server grew by {grown} KiB for refused bodies"

    def closed_within(sock, seconds):
        sock.settimeout(seconds)
        try:
            return sock.recv(65536) == b"" or sock.recv(65536) == b""
        except (socket.timeout, ConnectionResetError):
            return False
    silent = socket.create_connection(("127.0.0.1", port))
    assert await asyncio.to_thread(closed_within, silent, 15), "a connection that sends nothing is closed"
    idle = socket.create_connection(("127.0.0.1", port))
    idle.sendall(b"GET /nowhere HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ALICE.encode() + b"\r\n\r\n")
    idle.settimeout(10)
    answer = idle.recv(65536)
    assert answer.startswith(b"HTTP/1.1 404") and b'"not_found"' in answer, answer
    assert await asyncio.to_thread(closed_within, idle, 15), "a kept-alive connection left idle is closed"
    async with client(server.url, ALICE) as alice:
        r = await alice.call_tool("run_r", {"code": "1 + 1"})
        assert text_of(r) == "[1] 2\n", text_of(r)
    print("ok bodies over 16 MiB get 413 (declared: unread; chunked: once 16 MiB are in), silent and idle connections are closed "
          "after the header timeout, and the server keeps serving")


asyncio.run(main())
