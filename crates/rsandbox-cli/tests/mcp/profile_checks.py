"""`rsandbox mcp --profile compile`, driven by the official MCP Python SDK: what the
server tells the model about programs matches what the sandbox lets run.

Usage: profile_checks.py RSANDBOX_BINARY. Prints one line per check.
"""
import asyncio
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


async def main(binary):
    params = StdioServerParameters(command=binary, args=["mcp", "--profile", "compile"],
                                   env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            info = await session.initialize()
            assert "only the programs the compile profile lists" in info.instructions, info.instructions
            tools = {t.name: t for t in (await session.list_tools()).tools}
            described = tools["run_r"].description
            assert "cannot run programs" not in described, described
            assert "may run only the programs its compile profile lists" in described, described
            print("ok the instructions and run_r's description name the profile's programs")

            r = await session.call_tool("run_r", {"code": "system('gcc --version', intern = TRUE)[1]"})
            assert not r.is_error and "gcc" in text_of(r), text_of(r)
            r = await session.call_tool("run_r", {"code": "print(system('id >/dev/null 2>&1'))"})
            assert not r.is_error and "126" in text_of(r), text_of(r)
            print("ok a listed program runs, an unlisted one fails to start (126), the session goes on")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
