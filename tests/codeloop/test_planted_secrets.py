"""Secrets planted everywhere a user might have them never reach a log, an audit record, an event
or the index: tool arguments, file contents, `.env` files and the environment of `codeloop serve`."""

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from agents.client import watch_task
from bus.connection import open_bus
from bus.envelope import Envelope
from codeloop.config.serve_note import client_bus_config
from tests.codeloop.serve_support import CODELOOP, codeloop_env, git
from tests.redaction import secrets_corpus as planted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
MARKER = "reticulate_splines_marker"
"""A name in the planted file that is no secret: found in the index, it proves the grep can see."""
ENVIRONMENT = {
    "OPENAI_API_KEY": planted.OPENAI,
    "ANTHROPIC_API_KEY": planted.ANTHROPIC,
    "GITHUB_TOKEN": planted.GITHUB_PAT,
    "AWS_ACCESS_KEY_ID": planted.AWS_ACCESS_KEY_ID,
    "AWS_SECRET_ACCESS_KEY": planted.AWS_SECRET,
    "SLACK_BOT_TOKEN": planted.SLACK,
    "DATABASE_URL": f"postgres://app:{planted.PASSWORD}@db.internal/app",
}


def _planted_repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / "README.md").write_text("# demo\n")
    lines = "\n".join(f"# {text}" for text in planted.IN_TEXT.values())
    (root / "src" / "settings.py").write_text(
        f'{lines}\nOPENAI_API_KEY = "{planted.OPENAI}"\n\n\ndef {MARKER}():\n    return "{planted.GITHUB_CLASSIC}"\n'
    )
    (root / ".env").write_text("\n".join(f"{k}={v}" for k, v in ENVIRONMENT.items()) + "\n")
    git(root, "add", "README.md", "src")
    git(root, "commit", "-q", "-m", "settings")
    return root


def _calls() -> dict[str, list[tuple[str, dict[str, object]]]]:
    every = "\n".join(planted.IN_TEXT.values())
    patch = f"--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n # demo\n+{planted.IN_TEXT['aws_secret']}\n"
    return {
        "fs": [
            ("write_file", {"path": "notes.txt", "content": every}),
            ("apply_patch", {"patch": patch}),
            ("read_file", {"path": ".env"}),
            ("read_file", {"path": f"{planted.GITHUB_PAT}.txt"}),
            ("read_file", {"path": "src/settings.py"}),
            ("list_files", {"pattern": f"**/{planted.SLACK}"}),
        ],
        "git": [("git_status", {}), ("git_diff", {}), ("git_log", {"path": planted.IN_TEXT["bearer"]})],
        "search": [
            ("search_code", {"query": f"where is {planted.ANTHROPIC} {planted.IN_TEXT['password']} used"}),
            ("search_code", {"query": f"{MARKER} settings"}),
        ],
        "exec": [
            (
                "run_command",
                {
                    "argv": [
                        "python",
                        "-c",
                        f"print('{planted.IN_TEXT['openai']}')",
                        "--password",
                        planted.PASSWORD,
                    ]
                },
            ),
        ],
    }


async def _drive_http(note: dict[str, Any]) -> int:
    mcp = note["mcp"]
    lines = (await anyio.Path(mcp["token_file"]).read_text()).splitlines()
    token = next(line.split()[0] for line in lines if not line.startswith("#"))
    count = 0
    for server, calls in _calls().items():
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(180.0)) as http:
            async with Client(streamable_http_client(mcp["urls"][server], http_client=http)) as client:
                for name, args in calls:
                    await client.call_tool(name, args)
                    count += 1
    return count


async def _tool_call_events(home: Path, count: int) -> list[Envelope]:
    found: list[Envelope] = []
    async with open_bus(client_bus_config(state_dir=home)) as bus:
        with anyio.CancelScope() as scope:

            def on_event(envelope: Envelope) -> None:
                if envelope.payload.get("name") == "tool_call":
                    found.append(envelope)
                    if len(found) == count:
                        scope.cancel()

            await watch_task(bus, "mcp", on_event, until_final=False)
    return found


def _files_holding(directory: Path, needles: list[str]) -> dict[str, list[str]]:
    hits: dict[str, list[str]] = {}
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found = [n for n in needles if n.encode() in data]
            if found:
                hits[str(path.relative_to(directory))] = found
    return hits


async def test_planted_secrets_reach_no_log_audit_record_event_or_index(
    tmp_path: Path, private_cache_dir: Path
) -> None:
    """Drive all four hosted servers and a stdio server with secrets in arguments, contents, a .env
    and the environment; then grep the whole home (audit logs, serve.json, the NATS log and
    JetStream store holding the events, the index), the embedding cache, serve's output and the
    events as delivered: no planted secret appears."""
    home, cache = tmp_path / "home", private_cache_dir
    repo = _planted_repo(tmp_path / "repo")
    env = codeloop_env(home) | ENVIRONMENT | {"CODELOOP_CACHE_DIR": str(cache)}
    err_path = tmp_path / "serve.err"
    argv = [*CODELOOP, "serve", "--json", "--mcp-root", str(repo), "--mcp-scopes", "read,write,execute"]
    with anyio.fail_after(300), err_path.open("wb") as err:
        process = await anyio.open_process(argv, env=env, stderr=err)
        try:
            assert process.stdout is not None
            printed = b""
            while b"\n" not in printed:
                printed += await process.stdout.receive()
            note = json.loads(printed.split(b"\n", 1)[0])
            count = await _drive_http(note)
            events = await _tool_call_events(home, count)
            stdio = StdioServerParameters(
                command=CODELOOP[0], args=[*CODELOOP[1:], "mcp", "fs", "--root", str(repo)], env=env
            )
            async with Client(stdio) as client:
                for name, args in _calls()["fs"][2:]:
                    await client.call_tool(name, args)
        finally:
            process.send_signal(signal.SIGINT)
            with anyio.CancelScope(shield=True):
                await process.wait()
                await process.aclose()
    assert len(events) == count
    secrets = planted.ALL
    assert _files_holding(home, secrets) == {}
    assert _files_holding(cache, secrets) == {}
    assert [s for s in secrets if s in printed.decode() + err_path.read_text()] == []
    assert [s for s in secrets if s in json.dumps([e.model_dump(mode="json") for e in events])] == []
    # The grep could see: the audit logs, the events and the index hold what is no secret.
    assert len(list(home.rglob("audit.jsonl"))) == 1 and (home / "mcp-audit.jsonl").is_file()
    assert {e.payload["data"]["tool"] for e in events} >= {"write_file", "search_code", "run_command"}
    assert MARKER in json.dumps(_files_holding(home, [MARKER]))
