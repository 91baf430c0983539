"""`codeloop serve` hosting the tool servers over HTTP, their calls published as bus events."""

import json
import signal
import stat
from pathlib import Path

import anyio
import httpx2
import pytest

from agents.client import watch_task
from bus.connection import open_bus
from bus.envelope import Envelope
from codeloop.config.serve_note import client_bus_config
from tests.codeloop.serve_support import http_client, running_serve

pytestmark = pytest.mark.anyio
TRACE_KEY = "codeloop/trace_id"


def _token_from(token_file: Path) -> str:
    """The one token in serve's token file, after checking its mode (0600) and grant (serve, read)."""
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    lines = [line.split() for line in token_file.read_text().splitlines() if not line.startswith("#")]
    assert [fields[1:] for fields in lines] == [["serve", "read"]]
    return lines[0][0]


async def _tool_call_event(home: Path, state_dir: Path, task_id: str, trace_id: str) -> Envelope:
    """The `tool_call` event of task `task_id` whose record has `trace_id` (replayed from the stream),
    read with the credentials of the embedded server, found as `codeloop watch` finds them."""
    found: list[Envelope] = []
    config = client_bus_config(state_dir=home).model_copy(update={"state_dir": state_dir})
    async with open_bus(config) as bus:
        with anyio.CancelScope() as scope:

            def on_event(envelope: Envelope) -> None:
                if envelope.payload.get("name") == "tool_call" and (
                    envelope.payload["data"]["trace_id"] == trace_id
                ):
                    found.append(envelope)
                    scope.cancel()

            await watch_task(bus, task_id, on_event, until_final=False)
    return found[0]


@pytest.mark.slow
async def test_serve_hosts_the_tool_servers_with_a_generated_token_and_publishes_each_call_as_an_event(
    tmp_path: Path, repo: Path
) -> None:
    """serve prints and notes five /mcp URLs and a 0600 token file; the token admits, no token gets 401;
    each call arrives as a `tool_call` event; SIGINT stops it all and removes the token."""
    home = tmp_path / "home"
    with anyio.fail_after(60):
        async with running_serve(home, "--mcp-root", str(repo)) as (serve, note):
            mcp = note["mcp"]
            assert json.loads((home / "serve.json").read_text()) == note
            assert set(mcp["urls"]) == {"fs", "git", "search", "exec", "tasks"}
            assert all(
                url.startswith("http://127.0.0.1:") and url.endswith("/mcp") for url in mcp["urls"].values()
            )
            assert mcp["root"] == str(repo) and mcp["scopes"] == ["read"]
            token_file = Path(mcp["token_file"])
            assert token_file.parent == home
            token = _token_from(token_file)

            async with http_client(mcp["urls"]["fs"], token) as client:
                listed = {tool.name for tool in (await client.list_tools()).tools}
                read = await client.call_tool("read_file", {"path": "README.md"})
                in_task = await client.call_tool(
                    "read_file", {"path": "src/app.py"}, meta={TRACE_KEY: "task42:trace-abc"}
                )
            assert "read_file" in listed and "write_file" not in listed  # read scope only
            assert not read.is_error and "served by codeloop" in json.dumps(read.structured_content)
            assert not in_task.is_error

            async with httpx2.AsyncClient() as http:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
                assert (await http.post(mcp["urls"]["git"], json=body)).status_code == 401
                wrong = {"Authorization": "Bearer not-the-token"}
                assert (await http.post(mcp["urls"]["fs"], json=body, headers=wrong)).status_code == 401

            outside = await _tool_call_event(home, tmp_path / "client", "mcp", read.meta[TRACE_KEY])  # pyright: ignore[reportOptionalSubscript] - every tool result carries the trace id in its meta
            record = outside.payload["data"]
            assert (record["server"], record["tool"], record["principal"], record["outcome"]) == (
                "fs",
                "read_file",
                "serve",
                "ok",
            )
            assert record["arguments"] == {"path": "README.md"}
            task_event = await _tool_call_event(home, tmp_path / "client", "task42", "task42:trace-abc")
            assert task_event.task_id == "task42" and task_event.trace_id == "trace-abc"
            assert (await anyio.Path(mcp["audit_log"]).read_text()).count("\n") == 2

            serve.send_signal(signal.SIGINT)
            assert await serve.wait() == 0
    assert not await anyio.Path(token_file).exists()
    assert not (home / "serve.json").exists()


@pytest.mark.slow  # serve processes, each loading every role
async def test_serve_rejects_a_missing_root_and_unknown_scopes_with_a_clear_message(tmp_path: Path) -> None:
    """CLI conventions: bad --mcp-root or --mcp-scopes exits 2 with a message, no traceback, nothing started."""
    from tests.codeloop.serve_support import CODELOOP, codeloop_env

    home = tmp_path / "home"
    missing = await anyio.run_process(
        [*CODELOOP, "serve", "--mcp-root", str(tmp_path / "nope")], env=codeloop_env(home), check=False
    )
    scopes = await anyio.run_process(
        [*CODELOOP, "serve", "--mcp-root", str(tmp_path), "--mcp-scopes", "read,admin"],
        env=codeloop_env(home),
        check=False,
    )
    assert (
        missing.returncode == 2 and b"--mcp-root" in missing.stderr and b"not a directory" in missing.stderr
    )
    assert scopes.returncode == 2 and b"unknown scope 'admin'" in scopes.stderr
    assert b"Traceback" not in missing.stderr + scopes.stderr
    assert not (home / "serve.json").exists()
