"""The user's own MCP servers in a task: two real third-party servers installed from the npm
registry (the reference `memory` and `everything` servers), configured in the user file, called
by a scripted coder in write mode through codeloop's gate.

The npm packages are installed by the test (pinned versions, into a directory of the test
session); without a reachable npm registry, or without node, the test is skipped, saying so.
"""

import json
import shutil
from pathlib import Path

import anyio
import pytest

from agents.messages import ModelNames, TaskSubmitted
from agents.runtime.confirmations import answer
from bus.envelope import parse_envelope
from codeloop.cli.trace import read_task_events
from codeloop.config.mcp_servers import user_mcp_servers
from codeloop.testing import make_repo
from layout import USER_MCP_AUDIT
from tests.e2e.scripted_agentsmcp import PLANTED
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SCRIPTED = Path(__file__).with_name("scripted_agentsmcp.py")
PACKAGES = (
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-everything@2026.8.31",
)
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")


@pytest.fixture(scope="session")
def npm_servers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `node_modules/.bin` directory holding the two servers' commands."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    where = tmp_path_factory.mktemp("npm-mcp-servers")
    (where / "package.json").write_text('{"private": true}\n')
    npm = ["npm", "install", "--no-audit", "--no-fund", "--cache", str(where / ".npm-cache"), *PACKAGES]
    done = anyio.run(lambda: anyio.run_process(npm, cwd=where, check=False))
    if done.returncode != 0:
        output = (done.stdout + done.stderr).decode(errors="replace")
        if any(marker in output for marker in _OFFLINE):
            pytest.skip(f"npm cannot reach its registry to install {', '.join(PACKAGES)}")
        pytest.fail(f"npm install failed:\n{output[-2000:]}")
    return where / "node_modules" / ".bin"


def _user_file(config_home: Path, bin_dir: Path) -> None:
    (config_home / "codeloop").mkdir(parents=True)
    (config_home / "codeloop" / "config.toml").write_text(
        f"""
[mcp_servers.memory]
command = "{bin_dir / "mcp-server-memory"}"
env = {{ MEMORY_FILE_PATH = "${{CODELOOP_TEST_MEMORY_FILE}}" }}
scope = "write"
confirm = ["create_entities"]

[mcp_servers.everything]
command = "{bin_dir / "mcp-server-everything"}"
scope = "write"
confirm = "never"
"""
    )


async def test_a_scripted_coder_uses_two_installed_servers_through_the_gate(
    pipeline, tmp_path: Path, npm_servers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's acceptance: a tool of each server is called in write mode; the calls are in the
    trace and the audit log; only the configured tool asks a person; a planted key in a tool's
    output is redacted; killing a server mid-task gives a tool error and the task goes on."""
    memory_file = tmp_path / "memory.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("CODELOOP_TEST_MEMORY_FILE", str(memory_file))
    _user_file(tmp_path / "config", npm_servers)
    servers = user_mcp_servers()
    repo = make_repo(tmp_path / "repo", CALC)
    record = tmp_path / "seen.jsonl"
    task = TaskSubmitted(
        text=f"add(2, 3) returns -1 instead of 5\nrecord: {record}",
        repo=str(repo),
        mode="write",
        models=ModelNames(default=f"function:{SCRIPTED}:use_user_servers"),
        mcp_servers=servers,
        confirm_timeout_s=60,
    )
    questions: list[str] = []

    async def approve_all() -> None:
        sub = await pipeline.bus.js.subscribe("codeloop.events.*.confirmation_requested")
        async for msg in sub.messages:
            envelope = parse_envelope(msg.data)
            questions.append(envelope.payload["data"]["question"])
            await answer(pipeline.bus, envelope.task_id, approve=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(approve_all)
        result = await pipeline(task, timeout_s=300)
        tg.cancel_scope.cancel()

    assert result.status == "done", result.report
    assert "a + b" in (result.patch or "")
    # Only the tool the configuration names asked, and the real server did what it was asked.
    assert len(questions) == 1 and "create_entities" in questions[0] and "memory" in questions[0]
    assert "calc" in memory_file.read_text()

    envelopes = await read_task_events(pipeline.bus, result.task_id)
    calls = [e.payload["data"] for e in envelopes if e.kind == "event" and e.payload["name"] == "tool_call"]
    user_calls = [
        (c["server"], c["tool"], c["outcome"]) for c in calls if c["server"] in ("memory", "everything")
    ]
    assert user_calls[:3] == [
        ("memory", "memory__create_entities", "ok"),
        ("everything", "everything__echo", "ok"),
        ("memory", "memory__read_graph", "error"),
    ]
    died = next(c for c in calls if c["tool"] == "memory__read_graph")
    assert died["error_type"] == "unavailable"

    audit = tmp_path / "state" / USER_MCP_AUDIT
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    outcomes = [(r["tool"], r["outcome"]) for r in records if r["outcome"] != "input_required"]
    assert outcomes == [
        ("memory__create_entities", "ok"),
        ("everything__echo", "ok"),
        ("memory__read_graph", "unavailable"),
    ]

    # The planted key: the coder's own arguments carry it, so only the tool's answer is the test —
    # redacted before the model, the events, the trace and the recordings saw it.
    seen = [line for entry in map(json.loads, record.read_text().splitlines()) for line in entry["seen"]]
    echoed = next(line for line in seen if line.startswith("everything__echo"))
    assert PLANTED not in echoed and "[redacted]" in echoed
    assert any(line.startswith("memory__read_graph") and "unavailable" in line for line in seen)
    assert PLANTED not in json.dumps([e.model_dump(mode="json") for e in envelopes])
    assert PLANTED not in audit.read_text()
