"""Drive `rsandbox mcp` with the official MCP Python SDK, as an agent's client would.

Usage: client.py stdio RSANDBOX_BINARY, or client.py http URL [TOKEN]. The same checks
run over either transport. Prints one line per check; exits non-zero on the first failed
check (an AssertionError names it).
"""
import asyncio
import base64
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


async def main(transport, target, token=None):
    if transport == "stdio":
        params = StdioServerParameters(command=target, args=["mcp"], env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await checks(session)
    else:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http:
            async with streamable_http_client(target, http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await checks(session)


async def checks(session):
    info = await session.initialize()
    assert info.instructions and "R code" in info.instructions, info

    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"run_r", "new_session", "close_session", "reset_session", "interrupt",
                          "list_files", "read_file", "write_file"}, tools.keys()
    assert tools["run_r"].annotations.read_only_hint is False and tools["run_r"].annotations.open_world_hint is False
    assert tools["read_file"].annotations.read_only_hint is True
    schema = tools["run_r"].input_schema
    assert schema["required"] == ["code"], schema
    assert "no network" in tools["run_r"].description, "limits stated for the model"
    print("ok tools listed with schemas")

    # This connection's own session keeps state between calls.
    r = await session.call_tool("run_r", {"code": "x <- 41; x + 1"})
    assert not r.is_error, r
    assert text_of(r) == "[1] 42\n", text_of(r)
    assert r.structured_content["outcome"] == "ok" and r.structured_content["value"] == 42, r.structured_content
    r = await session.call_tool("run_r", {"code": "message('note'); warning('careful'); x"})
    assert "note" in text_of(r) and "careful" in text_of(r) and "[1] 41" in text_of(r), text_of(r)
    print("ok state kept, console text with messages and warnings")

    # An R error is a tool error, not a protocol error; the session survives.
    r = await session.call_tool("run_r", {"code": "stop('boom')"})
    assert r.is_error, r
    assert "Error" in text_of(r) and "boom" in text_of(r), text_of(r)
    r = await session.call_tool("run_r", {"code": "x"})
    assert not r.is_error and "41" in text_of(r), text_of(r)
    print("ok R error is isError and the session keeps its variables")

    # Plots come back as PNG images.
    r = await session.call_tool("run_r", {"code": "plot(1:10)"})
    images = [c for c in r.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png", r.content
    assert base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n"
    print("ok plot as image/png")

    # Timeouts and violations say what happened and whether state was kept.
    r = await session.call_tool("run_r", {"code": "Sys.sleep(10)", "timeout_s": 0.5})
    assert r.is_error and "time limit" in text_of(r) and "kept its variables" in text_of(r), text_of(r)
    r = await session.call_tool("run_r", {"code": "system('id')"})
    assert r.is_error and "forbidden system call (execve)" in text_of(r) and "reset" in text_of(r), text_of(r)
    print("ok timeout keeps state, violation resets, both said in words")

    # Explicit sessions: new, run, reset, close.
    r = await session.call_tool("new_session", {"memory": "512M"})
    handle = r.structured_content["session"]
    assert text_of(r) == handle
    await session.call_tool("run_r", {"code": "y <- 'mine'", "session": handle})
    r = await session.call_tool("run_r", {"code": "exists('y')"})
    assert "FALSE" in text_of(r), "sessions are apart: " + text_of(r)
    r = await session.call_tool("run_r", {"code": "y", "session": handle})
    assert "mine" in text_of(r), text_of(r)
    await session.call_tool("reset_session", {"session": handle})
    r = await session.call_tool("run_r", {"code": "exists('y')", "session": handle})
    assert "FALSE" in text_of(r), text_of(r)
    r = await session.call_tool("close_session", {"session": handle})
    assert not r.is_error
    r = await session.call_tool("run_r", {"code": "1", "session": handle})
    assert r.is_error and "no session" in text_of(r), text_of(r)
    print("ok new_session, reset_session, close_session")

    # Long output is bounded and says what was cut.
    r = await session.call_tool("run_r", {"code": "cat(strrep('a', 50000))"})
    assert len(text_of(r)) < 21000 and "output cut" in text_of(r), len(text_of(r))
    assert len(r.structured_content["stdout"]) == 50000
    print("ok long output cut with a note")

    # An interrupt from a second, concurrent call keeps the session's state (the
    # violation above reset this session: set x again first).
    await session.call_tool("run_r", {"code": "x <- 41"})
    async def interrupt_later():
        await asyncio.sleep(0.7)
        return await session.call_tool("interrupt", {})
    running, stopped = await asyncio.gather(session.call_tool("run_r", {"code": "repeat {}"}), interrupt_later())
    assert not stopped.is_error, stopped
    assert running.is_error and "interrupted" in text_of(running) and "kept its variables" in text_of(running), text_of(running)
    r = await session.call_tool("run_r", {"code": "x"})
    assert "41" in text_of(r), text_of(r)
    print("ok interrupt keeps state")

    # Files in the session's workspace, under the engine's rules.
    r = await session.call_tool("write_file", {"path": "data/in.csv", "text": "a,b\n1,2\n"})
    assert not r.is_error, text_of(r)
    r = await session.call_tool("run_r", {"code": "write.csv(read.csv('data/in.csv') * 3, 'out.csv', row.names = FALSE)"})
    assert not r.is_error, text_of(r)
    r = await session.call_tool("read_file", {"path": "out.csv"})
    assert text_of(r) == '"a","b"\n3,6\n', text_of(r)
    r = await session.call_tool("list_files", {})
    assert "data/in.csv" in text_of(r) and "out.csv" in text_of(r), text_of(r)
    r = await session.call_tool("read_file", {"path": "../../etc/passwd"})
    assert r.is_error, text_of(r)
    print("ok write_file, read_file, list_files, hostile path refused")

    # Values go in as data (the typed encoding every front takes), and stay bound.
    r = await session.call_tool("run_r", {"code": "sum(x) + nchar(s)", "globals": {
        "x": {"type": "integer", "value": [1, 2]}, "s": {"type": "character", "value": ["abc"]}}})
    assert not r.is_error and r.structured_content["value"] == 6, text_of(r)
    r = await session.call_tool("run_r", {"code": "x"})
    assert r.structured_content["value"] == [1, 2], text_of(r)
    r = await session.call_tool("run_r", {"code": "1", "globals": {"bad": {"type": "environment"}}})
    assert r.is_error and text_of(r).endswith("[bad_input]"), text_of(r)
    print("ok run_r binds globals in the typed encoding; a value that is none is bad_input")

    # Bad input is a clear error, and the server keeps serving.
    r = await session.call_tool("run_r", {"code": "1", "timeout_s": -1})
    assert r.is_error and "invalid timeout (seconds, above 0" in text_of(r) and text_of(r).endswith("[bad_input]"), text_of(r)
    # The names are the other fronts' (timeout, cpu); the earlier ones stay accepted.
    r = await session.call_tool("run_r", {"code": "Sys.sleep(10)", "timeout": 0.5})
    assert "time limit of 0.5 s" in text_of(r), text_of(r)
    r = await session.call_tool("run_r", {"code": ""})
    assert r.is_error, r
    r = await session.call_tool("run_r", {"code": 5})
    assert r.is_error, r
    r = await session.call_tool("run_r", {})
    assert r.is_error, r
    r = await session.call_tool("run_r", {"code": "1 + 1"})
    assert not r.is_error and "2" in text_of(r)
    print("ok bad input refused, still serving")


asyncio.run(main(*sys.argv[1:]))
