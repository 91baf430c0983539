"""The hash-chained audit log and `codeloop audit verify`."""

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.tool_servers.ts_helpers import CODELOOP
from tool_servers.fs.server import build_fs_server
from tool_servers.protocol.audit import AuditLog, AuditRecord, verify_log
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions

pytestmark = pytest.mark.anyio


async def _audited_calls(repo: Path, log: AuditLog) -> None:
    with anyio.fail_after(10):
        async with Client(
            build_fs_server(repo, ServerOptions(audit=log, scopes=frozenset({Scope.READ})))
        ) as client:
            await client.call_tool("read_file", {"path": "README.md"})
            await client.call_tool("read_file", {"path": "missing"})
            await client.call_tool(
                "write_file", {"path": "x", "content": "api_key=sk-abcdefghijklmnopqrstuvwxyz"}
            )
            await client.call_tool("list_files", {"pattern": "*.md"})


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


async def test_every_call_is_recorded_with_outcome_principal_and_trace(repo: Path, tmp_path: Path) -> None:
    """A record per call (time, principal, server, tool, arguments, outcome, duration, trace id)."""
    log = AuditLog(tmp_path / "audit.jsonl")
    await _audited_calls(repo, log)
    records = [AuditRecord.model_validate_json(line) for line in _lines(log.path)]
    assert [(r.tool, r.outcome) for r in records] == [
        ("read_file", "ok"),
        ("read_file", "not_found"),
        ("write_file", "permission_denied"),
        ("list_files", "ok"),
    ]
    assert {r.principal for r in records} == {"local"} and {r.server for r in records} == {"fs"}
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert len({r.trace_id for r in records}) == 4
    assert verify_log(log.path).ok


async def test_secrets_in_arguments_are_redacted_and_long_strings_summarised(
    tmp_path: Path, repo: Path
) -> None:
    """Arguments are logged with secrets redacted."""
    log = AuditLog(tmp_path / "audit.jsonl")
    await _audited_calls(repo, log)
    text = log.path.read_text()
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in text
    await log.append(
        principal="p",
        server="s",
        tool="t",
        arguments={"api_token": "hunter2", "body": "x" * 2000},
        outcome="ok",
        duration_ms=1.0,
        trace_id="t",
        started=__import__("datetime").datetime.now(),
    )
    last = json.loads(_lines(log.path)[-1])
    assert last["arguments"]["api_token"] == "[redacted]"
    assert last["arguments"]["body"].startswith("[2000 chars sha256:")


async def test_records_are_handed_to_the_optional_sink(tmp_path: Path, repo: Path) -> None:
    """Each record also goes to an async sink."""
    seen: list[AuditRecord] = []

    async def sink(record: AuditRecord) -> None:
        seen.append(record)

    await _audited_calls(repo, AuditLog(tmp_path / "audit.jsonl", sink=sink))
    assert [r.seq for r in seen] == [1, 2, 3, 4]


@pytest.mark.parametrize("tamper", ["edit", "remove", "reorder", "edit-and-rehash"])
async def test_verify_detects_an_edited_removed_or_reordered_record(
    tmp_path: Path, repo: Path, tamper: str
) -> None:
    """The chain verifies, and a tampered line is detected."""
    log = AuditLog(tmp_path / "audit.jsonl")
    await _audited_calls(repo, log)
    lines = _lines(log.path)
    if tamper == "edit":
        lines[1] = lines[1].replace('"not_found"', '"ok"')
    elif tamper == "remove":
        del lines[1]
    elif tamper == "reorder":
        lines[1], lines[2] = lines[2], lines[1]
    else:  # recomputing the edited record's own hash still breaks the next record's link
        from tool_servers.protocol.audit import _record_hash

        record = json.loads(lines[1])
        record["outcome"] = "ok"
        record["hash"] = _record_hash({k: v for k, v in record.items() if k != "hash"})
        lines[1] = json.dumps(record) + "\n"
    log.path.write_text("".join(lines))
    report = verify_log(log.path)
    assert not report.ok
    assert report.records == (1 if tamper != "edit-and-rehash" else 2)
    assert report.problems[0].startswith(f"line {report.records + 1}:")


async def test_two_writers_share_one_chain(tmp_path: Path, repo: Path) -> None:
    """Our choice: appends lock the file and re-read its tail, so concurrent servers keep one valid chain."""
    path = tmp_path / "audit.jsonl"
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(_audited_calls, repo, AuditLog(path))
    report = verify_log(path)
    assert report.ok and report.records == 8


async def test_audit_verify_cli_exits_zero_for_an_intact_log_and_one_for_a_tampered_one(
    tmp_path: Path, repo: Path
) -> None:
    """`codeloop audit verify FILE` detects an edited record (exit 1, line named)."""
    log = AuditLog(tmp_path / "audit.jsonl")
    await _audited_calls(repo, log)
    good = await anyio.run_process([CODELOOP, "audit", "verify", str(log.path), "--json"], check=False)
    log.path.write_text(log.path.read_text().replace('"local"', '"mallory"', 1))
    bad = await anyio.run_process([CODELOOP, "audit", "verify", str(log.path)], check=False)
    assert good.returncode == 0 and json.loads(good.stdout) == {"ok": True, "records": 4, "problems": []}
    assert bad.returncode == 1 and b"line 1: content does not match its hash" in bad.stderr
    assert b"Traceback" not in bad.stderr
