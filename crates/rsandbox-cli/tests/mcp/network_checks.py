"""`rsandbox mcp --http` with per-token network ceilings (issue #27), driven by the
official MCP Python SDK: on a server whose profile allows a.test and b.test, the token
`narrow` (network=a.test in the token file) cannot ask new_session for b.test, and its
own session's code is refused b.test by the allowlist; the token `wide` (no network=)
gets the server's allowlist, so b.test passes it (and is refused for its documentation
address instead: no test host is needed). Needs root (a network sandbox).

Usage: network_checks.py RSANDBOX_BINARY. One line per check; exits non-zero on the
first failed one.
"""
import asyncio
import os
import shutil
import tempfile

from http_checks import Server, client, text_of

NARROW, WIDE = "narrow-mcp-token-0123456789", "wide-mcp-token-0123456789ab"
PROFILE = """extends = "strict"
[network]
allow = ["a.test", "b.test"]
hosts = { "a.test" = "192.0.2.1", "b.test" = "192.0.2.2" }
"""
REACH_B = "x <- readLines(url('https://b.test/'))"


def b_record(result):
    records = (result.structured_content or {}).get("network") or []
    found = [r for r in records if r["host"] == "b.test"]
    assert found, f"no network record for b.test: {result.structured_content}"
    return found[0]


async def main():
    work = tempfile.mkdtemp()
    try:
        profile, tokens = os.path.join(work, "profile.toml"), os.path.join(work, "tokens")
        with open(profile, "w") as f:
            f.write(PROFILE)
        os.chmod(profile, 0o644)
        with open(tokens, "w") as f:
            f.write(f"narrow:{NARROW} network=a.test\nwide:{WIDE}\n")
        os.chmod(tokens, 0o600)
        server = Server("--profile", profile, "--token-file", tokens)
        try:
            await checks(server)
        finally:
            server.stop()
    finally:
        shutil.rmtree(work)


async def checks(server):
    async with client(server.url, NARROW) as narrow, client(server.url, WIDE) as wide:
        instructions = narrow.initialized.instructions
        assert "network only to a.test, b.test" in instructions, instructions
        print("ok the instructions name the hosts the server's profile allows")
        r = await narrow.call_tool("new_session", {"network": {"allow": ["b.test"]}})
        assert r.is_error, text_of(r)
        assert "\"b.test\" is outside this token's network allowlist (a.test)" in text_of(r), text_of(r)
        assert text_of(r).endswith("[bad_input]"), text_of(r)
        r = await narrow.call_tool("new_session", {"network": {"allow": ["a.test"]}})
        assert not r.is_error, text_of(r)
        print("ok new_session may narrow the token's allowlist, never widen it")

        r = await narrow.call_tool("run_r", {"code": REACH_B})
        assert r.is_error, text_of(r)
        record = b_record(r)
        assert record["allowed"] is False, record
        assert "b.test:443 is not in this token's network.allow" in record["reason"], record
        print("ok the token's own session gets the token's allowlist: b.test refused by it")

        r = await wide.call_tool("run_r", {"code": REACH_B})
        record = b_record(r)
        assert "network.allow" not in (record.get("reason") or ""), record
        assert "resolves to 192.0.2.2" in record["reason"], record
        print("ok a token without network= gets the server's allowlist: b.test passes it")


if __name__ == "__main__":
    asyncio.run(main())
