"""The conformance table (scenarios.json) on `rsandbox mcp`, driven over stdio with the
official MCP Python SDK, as an agent's client would.

Usage: mcp_runner.py SCENARIOS_JSON RSANDBOX_BINARY

Maps the table's front-neutral steps to MCP tools (see front_notes.mcp in the table),
checks each step's expectation as the Rust runner does, and prints one line per scenario
(`ok`, `known`, `skip`, `FAIL`) and a summary; exits 1 if any scenario failed
unexpectedly, or a known failure passed. Run by crates/rsandbox-cli/tests/conformance.rs.
"""
import re
import asyncio
import contextlib
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

FRONT = "mcp"
# The server runs as node `conformance` (RSANDBOX_NODE_ID): NEVER has its tag, ELSEWHERE
# another replica's.
NEVER = "s-conformance-00000000000000000000000000000000"
ELSEWHERE = "s-elsewhere-00000000000000000000000000000000"


class Error:
    """The server refused: the core's code is the bracketed word that ends the text."""

    def __init__(self, message):
        found = re.search(r"\[([a-z_]+)\]\s*$", message)
        self.code = found.group(1) if found else None
        self.message = message

    def __repr__(self):
        return f"Error({self.message[:400]!r})"


class Result:
    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Result({json.dumps(self.value)[:600]})"


class Tagged:
    def __init__(self, kind, value=None):
        self.kind, self.value = kind, value

    def __repr__(self):
        return f"{self.kind}({str(self.value)[:200]})"


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


class Mcp:
    def __init__(self, binary):
        self.binary = binary
        self.stack = None
        self.session = None

    async def start(self):
        self.stack = contextlib.AsyncExitStack()
        params = StdioServerParameters(command=self.binary, args=["mcp"], env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "RSANDBOX_NODE_ID": "conformance"})
        read, write = await self.stack.enter_async_context(stdio_client(params))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()

    async def stop(self):
        await self.stack.aclose()

    async def call(self, tool, args):
        return await self.session.call_tool(tool, args)

    async def run_r(self, session, code, timeout):
        args = {"code": code, "session": session}
        if timeout is not None:
            args["timeout_s"] = timeout
        r = await self.call("run_r", args)
        result = r.structured_content
        if isinstance(result, dict) and "outcome" in result:
            # Plots as the agent sees them: image/png contents.
            result = dict(result)
            result["plots"] = [c for c in r.content if c.type == "image" and c.mime_type == "image/png"]
            return Result(result)
        return Error(text_of(r))

    async def create(self, limits, tools, restore):
        assert not tools and restore is None, "the table says MCP cannot express tools or restores"
        # new_session takes the limits every front takes, by the same names (cpu_s, the
        # earlier name of cpu, stays accepted).
        args = dict(limits)
        if "cpu" in args:
            args["cpu_s"] = args.pop("cpu")
        r = await self.call("new_session", args)
        if r.is_error:
            return Error(text_of(r))
        return Tagged("Created", r.structured_content["session"])

    async def eval(self, code, timeout, limits):
        made = await self.create(limits, [], None)
        if isinstance(made, Error):
            return made
        try:
            return await self.run_r(made.value, code, timeout)
        finally:
            await self.call("close_session", {"session": made.value})

    async def interrupt(self, session):
        r = await self.call("interrupt", {"session": session})
        if r.is_error:
            return Error(text_of(r))
        said = text_of(r)
        assert said in ("interrupt sent", "nothing was running"), said
        return Tagged("Interrupted", said == "interrupt sent")

    async def put_file(self, session, path, data):
        r = await self.call("write_file", {"session": session, "path": path, "text": data})
        return Error(text_of(r)) if r.is_error else Tagged("Done")

    async def get_file(self, session, path):
        r = await self.call("read_file", {"session": session, "path": path})
        return Error(text_of(r)) if r.is_error else Tagged("Data", text_of(r))

    async def list_files(self, session):
        r = await self.call("list_files", {"session": session})
        if r.is_error:
            return Error(text_of(r))
        return Tagged("Files", [f["path"] for f in r.structured_content["files"]])

    async def close(self, session):
        r = await self.call("close_session", {"session": session})
        return Error(text_of(r)) if r.is_error else Tagged("Closed")

    async def restart(self):
        await self.stop()
        await self.start()
        return Tagged("Done")


def code_of(step):
    code = step["code"]
    if isinstance(code, dict):
        return code["repeat"] * code["times"]
    return code


def json_equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


RESULT_KEYS = ["outcome", "value", "value_within", "stdout_contains", "stdout_excludes", "error_contains",
               "syntax_error", "reset", "reset_reason", "plots", "refused_network"]


def check(expect, reply):
    """None if the reply meets the expectation, else why not."""
    expect = {k: v for k, v in (expect or {}).items() if v is not None}
    if "error_code" in expect:
        # MCP's refusal text ends with the code every front uses, in brackets.
        if isinstance(reply, Error) and reply.code == expect["error_code"]:
            return None
        return f"expected error {expect['error_code']}, got {reply!r}"
    if isinstance(reply, Error):
        return f"expected success, got {reply!r}"
    if any(k in expect for k in RESULT_KEYS):
        if not isinstance(reply, Result):
            return f"expected a result, got {reply!r}"
        r = reply.value
        if "outcome" in expect and r.get("outcome") != expect["outcome"]:
            return f"outcome {r.get('outcome')} instead of {expect['outcome']}: {reply!r}"
        if "value" in expect and not json_equal(r.get("value"), expect["value"]):
            return f"value {r.get('value')!r} instead of {expect['value']!r}: {reply!r}"
        if "value_within" in expect:
            w = expect["value_within"]
            room = max(w.get("abs", 0), w.get("rel", 0) * w["target"])
            got = r.get("value")
            if not isinstance(got, (int, float)) or abs(got - w["target"]) > room:
                return f"value {got!r} is not within {room} of {w['target']}: {reply!r}"
        stdout = r.get("stdout") or ""
        if "stdout_contains" in expect and expect["stdout_contains"] not in stdout:
            return f"stdout lacks {expect['stdout_contains']!r}: {reply!r}"
        if "stdout_excludes" in expect and expect["stdout_excludes"] in stdout:
            return f"stdout has {expect['stdout_excludes']!r}: {reply!r}"
        if "error_contains" in expect:
            message = (r.get("error") or {}).get("message") or ""
            if expect["error_contains"] not in message:
                return f"the error does not say {expect['error_contains']!r}: {reply!r}"
        if "syntax_error" in expect and isinstance(r.get("syntax_error"), dict) != expect["syntax_error"]:
            return f"syntax_error should be {'set' if expect['syntax_error'] else 'absent'}: {reply!r}"
        if "reset" in expect and bool(r.get("reset")) != expect["reset"]:
            return f"reset should be {expect['reset']}: {reply!r}"
        if "reset_reason" in expect and r.get("reset_reason") != expect["reset_reason"]:
            return f"reset_reason {r.get('reset_reason')} instead of {expect['reset_reason']}: {reply!r}"
        if "plots" in expect and len(r.get("plots") or []) != expect["plots"]:
            return f"{len(r.get('plots') or [])} plots instead of {expect['plots']}"
        if "refused_network" in expect and bool(r.get("refused_network")) != expect["refused_network"]:
            return f"refused_network should be {expect['refused_network']}: {reply!r}"
    if "interrupted" in expect:
        if not (isinstance(reply, Tagged) and reply.kind == "Interrupted" and reply.value == expect["interrupted"]):
            return f"expected interrupted {expect['interrupted']}, got {reply!r}"
    if "data" in expect:
        if not (isinstance(reply, Tagged) and reply.kind == "Data" and reply.value == expect["data"]):
            return f"expected the data {expect['data']!r}, got {reply!r}"
    if "files_include" in expect:
        if not (isinstance(reply, Tagged) and reply.kind == "Files"):
            return f"expected a listing, got {reply!r}"
        missing = [f for f in expect["files_include"] if f not in reply.value]
        if missing:
            return f"{missing} not listed: {reply.value}"
    if "closed" in expect and not (isinstance(reply, Tagged) and reply.kind == "Closed"):
        return f"expected closed, got {reply!r}"
    return None


class Ids:
    def __init__(self):
        self.sessions = {}
        self.snapshot = None

    def session(self, step):
        name = step.get("session", "main")
        return {"@never": NEVER, "@elsewhere": ELSEWHERE}.get(name) or self.sessions[name]


async def run_step(front, step, ids):
    op = step["op"]
    timeout = step.get("timeout")
    limits = step.get("limits", {})
    if op == "eval":
        return await front.eval(code_of(step), timeout, limits)
    if op == "session.create":
        reply = await front.create(limits, step.get("tools", []), None)
        if isinstance(reply, Tagged):
            ids.sessions[step.get("as", "main")] = reply.value
        return reply
    if op == "session.execute":
        return await front.run_r(ids.session(step), code_of(step), timeout)
    if op == "session.interrupt":
        return await front.interrupt(ids.session(step))
    if op == "session.put_file":
        return await front.put_file(ids.session(step), step["path"], step["data"])
    if op == "session.get_file":
        return await front.get_file(ids.session(step), step["path"])
    if op == "session.list_files":
        return await front.list_files(ids.session(step))
    if op == "session.close":
        return await front.close(ids.session(step))
    if op == "server.restart":
        return await front.restart()
    raise AssertionError(f"the table says MCP cannot express {op}")


async def run_scenario(front, scenario):
    """None on success, else why it failed."""
    steps = scenario["steps"]
    ids = Ids()
    background = None  # (label, index, started, task)

    async def join(bg):
        _, index, _, task = bg
        why = check(steps[index].get("expect"), await task)
        return None if why is None else f"step {index} ({steps[index]['op']}): {why}"

    try:
        for index, step in enumerate(steps):
            label = step.get("concurrent_with")
            if label is not None:
                assert background and background[0] == label, f"step {index}: {label} is not running"
                wait = background[2] + step.get("delay_ms", 0) / 1000 - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            elif background is not None:
                bg, background = background, None
                why = await join(bg)
                if why:
                    return why
            if step.get("background"):
                assert step["op"] == "session.execute"
                task = asyncio.create_task(front.run_r(ids.session(step), code_of(step), step.get("timeout")))
                background = (step["label"], index, time.monotonic(), task)
                await asyncio.sleep(0)
                continue
            why = check(step.get("expect"), await run_step(front, step, ids))
            if why:
                return f"step {index} ({step['op']}): {why}"
        if background is not None:
            return await join(background)
        return None
    finally:
        if background is not None and not background[3].done():
            background[3].cancel()


async def main(table_path, binary):
    table = json.load(open(table_path))
    front = Mcp(binary)
    await front.start()
    started = time.monotonic()
    passed = known = skipped = 0
    failures = []
    try:
        for scenario in table["scenarios"]:
            sid = scenario["id"]
            says = scenario["fronts"][FRONT]
            if says != "yes":
                print(f"skip  {sid}: {says}")
                skipped += 1
                continue
            known_why = scenario.get("known", {}).get(FRONT)
            t = time.monotonic()
            why = await run_scenario(front, scenario)
            secs = time.monotonic() - t
            if why is None and known_why is None:
                print(f"ok    {sid} ({secs:.2f} s)")
                passed += 1
            elif why is not None and known_why is not None:
                print(f"known {sid} ({secs:.2f} s): {known_why} — got: {why}")
                known += 1
            elif why is None:
                print(f"FIXED {sid}: passes although the table lists it as known ({known_why}); update the table")
                failures.append(sid)
            else:
                print(f"FAIL  {sid} ({secs:.2f} s): {why}")
                failures.append(sid)
            sys.stdout.flush()
    finally:
        await front.stop()
    print(f"mcp: {passed} passed, {known} known failures, {skipped} not expressible, {len(failures)} failed, "
          f"in {time.monotonic() - started:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:])))
