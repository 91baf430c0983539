"""Latency of codeloop tool calls over stdio and streamable HTTP, beside a bare MCP server.

Run: `.venv/bin/python benchmarks/mcp_bench.py [--calls N]`. For every case and transport it
starts the real server process (`codeloop mcp ...`, or a bare `MCPServer` with one no-op tool
run from this file) and opens one real MCP client session; all sessions stay open side by side.
After warm-up calls in each, it times N rounds, one call per session per round, so a change in
machine load hits every case alike, and prints the median and p90 in milliseconds. The overhead
ratio is the median of a codeloop tool divided by the bare no-op's median over the same
transport: it is what the protocol (gate, validation, audit record with fsync, bearer check)
plus the tool's own work cost.

`search_code` runs a descriptive (hybrid: vector + keyword) query over 20 modules of anyio's
installed source copied beside `module.py`. Its warm-up calls absorb the model load and the
first indexing (embeddings cached in the temporary directory); each timed call includes the
server's change check (a stat walk of the root) and the query embedding: every call sends a
query text no call sent before (a phrase, the transport and a call number), and the server never
caches query vectors, so each one runs the model. Add a case by appending to `CASES`.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import JsonValue

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


CODELOOP = str(Path(sys.executable).with_name("codeloop"))
TOKEN = "bench-token-3c9e1f7a5b"


@dataclass(frozen=True)
class Case:
    label: str
    server: str
    """A `codeloop mcp` server name, or `bare` for the no-op baseline."""
    tool: str
    args: dict[str, JsonValue]
    distinct: str | None = None
    """An argument made unique per call (its value gets ` #<tag>` appended)."""

    def call_args(self, tag: str) -> dict[str, JsonValue]:
        if self.distinct is None:
            return self.args
        return {**self.args, self.distinct: f"{self.args[self.distinct]} #{tag}"}


CASES = [
    Case("bare noop", "bare", "noop", {}),
    Case("fs read_file", "fs", "read_file", {"path": "module.py"}),
    Case(
        "search_code",
        "search",
        "search_code",
        {"query": "read exactly the given number of bytes"},
        distinct="query",
    ),
]
SEARCH_CORPUS = [
    "_core/_asyncio_selector_thread.py",
    "_core/_concurrency_utils.py",
    "_core/_contextmanagers.py",
    "_core/_eventloop.py",
    "_core/_resources.py",
    "_core/_signals.py",
    "_core/_streams.py",
    "_core/_subprocesses.py",
    "_core/_testing.py",
    "_core/_typedattr.py",
    "_lazyimport.py",
    "abc/_resources.py",
    "abc/_subprocesses.py",
    "abc/_testing.py",
    "streams/buffered.py",
    "streams/file.py",
    "to_interpreter.py",
    "to_process.py",
    "to_thread.py",
    "abc/__init__.py",
]


def _bare_server() -> "MCPServer[object]":
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bare", log_level="WARNING")  # as quiet as the codeloop servers

    @server.tool()
    def noop() -> str:
        """Do nothing."""
        return "ok"

    return server


async def _run_bare(transport: str) -> None:
    server = _bare_server()
    if transport == "stdio":
        await server.run_stdio_async()
        return
    from tool_servers.protocol.http import serve_http

    async with anyio.create_task_group() as tg:
        url = await tg.start(lambda task_status: serve_http(server, port=0, task_status=task_status))
        print(url, flush=True)


def _command(case: Case, transport: str, root: Path, token_file: Path) -> list[str]:
    if case.server == "bare":
        return [sys.executable, __file__, "--bare", transport]
    cmd = [
        CODELOOP,
        "mcp",
        case.server,
        "--root",
        str(root),
        "--scopes",
        "read",
        "--audit-log",
        str(root.parent / "audit.jsonl"),
    ]
    if transport == "http":
        cmd += ["--transport", "http", "--port", "0", "--token-file", str(token_file)]
    return cmd


@asynccontextmanager
async def _session(case: Case, transport: str, root: Path, token_file: Path) -> AsyncIterator[Client]:
    cmd = _command(case, transport, root, token_file)
    # The search server's embedding cache stays in the temporary directory, not in ~/.cache.
    cache = {"CODELOOP_CACHE_DIR": str(root.parent / "cache")}
    if transport == "stdio":
        async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:], env=cache)) as client:
            yield client
        return
    process = await anyio.open_process(cmd, env={**os.environ, **cache})
    try:
        buffer = b""
        with anyio.fail_after(60):
            while b"\n" not in buffer:
                buffer += await process.stdout.receive()  # type: ignore[union-attr] - stdout is piped, so never None here
        url = buffer.decode().split("\n", 1)[0].strip()
        # The SDK's own client timeouts (httpx's 5 s default would cut the search server's first
        # call, which loads the model and builds the index).
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield client
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()


WARM_UP_CALLS = 10


async def _measure(root: Path, token_file: Path, calls: int) -> dict[tuple[str, str], list[float]]:
    """Milliseconds per call of every (case, transport), measured in interleaved rounds."""
    pairs = [(case, transport) for transport in ("stdio", "http") for case in CASES]
    timings: dict[tuple[str, str], list[float]] = {(c.label, t): [] for c, t in pairs}
    async with AsyncExitStack() as stack:
        clients = []
        for case, transport in pairs:
            client = await stack.enter_async_context(_session(case, transport, root, token_file))
            for number in range(WARM_UP_CALLS):
                result = await client.call_tool(case.tool, case.call_args(f"{transport}-warm-{number}"))
                assert not result.is_error, result.content
            clients.append(client)
        for number in range(calls):
            for (case, transport), client in zip(pairs, clients, strict=True):
                args = case.call_args(f"{transport}-{number}")
                start = time.perf_counter()
                result = await client.call_tool(case.tool, args)
                timings[(case.label, transport)].append((time.perf_counter() - start) * 1000)
                assert not result.is_error, result.content
    return timings


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="codeloop-bench-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        (root / "module.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(200)))
        for rel in SEARCH_CORPUS:
            (root / "anyio" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(anyio.__file__).parent / rel, root / "anyio" / rel)
        token_file = Path(tmp) / "tokens.txt"
        token_file.write_text(f"{TOKEN} bench read\n")
        token_file.chmod(0o600)
        measured = await _measure(root, token_file, calls)
        medians: dict[tuple[str, str], float] = {}
        print(f"{'case':<16} {'transport':<9} {'median_ms':>10} {'p90_ms':>8} {'calls':>6}")
        for (label, transport), timings in measured.items():
            median = statistics.median(timings)
            p90 = statistics.quantiles(timings, n=10)[-1]
            medians[(label, transport)] = median
            print(f"{label:<16} {transport:<9} {median:>10.2f} {p90:>8.2f} {len(timings):>6}")
        for case in CASES[1:]:
            ratios = ", ".join(
                f"{t} {medians[(case.label, t)] / medians[('bare noop', t)]:.2f}x" for t in ("stdio", "http")
            )
            print(f"overhead ratio {case.label} / bare noop: {ratios}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per case and transport")
    parser.add_argument("--bare", choices=["stdio", "http"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.bare:
        anyio.run(_run_bare, options.bare)
    else:
        anyio.run(main, options.calls)
