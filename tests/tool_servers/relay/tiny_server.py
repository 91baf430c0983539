"""A tiny third-party-style MCP server for the relay tests, run as `python tiny_server.py` (stdio).

Its tools: `echo` (says back what it is given), `leak` (prints a planted secret), `fail` (an
error result), `slow` (sleeps), `die` (ends the process mid-call), `env` (shows one variable).
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

PLANTED = "sk_live_" + "9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f"
server = MCPServer("tiny")


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Say `text` back, `times` times."""
    return " ".join([text] * times)


@server.tool()
def leak() -> str:
    """Print the service's configuration (with a key in it)."""
    return f"connected; api_key={PLANTED} region=eu"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the database is locked")


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


@server.tool()
def die() -> str:
    """End the server's process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def env(name: str) -> str:
    """One environment variable's value."""
    return os.environ.get(name, "<unset>")


if __name__ == "__main__":
    server.run("stdio")
