"""Audit records of tool calls as bus events: which task they belong to, and what a failed publish does."""

import logging
from pathlib import Path

import anyio
import pytest
from mcp import Client

from bus.config import BusConfig
from bus.connection import open_bus
from bus.envelope import parse_envelope
from bus.server import open_nats_server
from bus.streams import ensure_streams
from codeloop.services.audit_events import MCP_PSEUDO_TASK, bus_audit_sink, task_of
from tool_servers.fs.server import build_fs_server
from tool_servers.protocol.audit import AuditLog, AuditRecord, verify_log
from tool_servers.protocol.spec import ServerOptions

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("trace_id", "expected"),
    [
        ("task42:trace-abc", ("task42", "trace-abc")),
        ("0f3a9c", (MCP_PSEUDO_TASK, "0f3a9c")),
        ("task.42:abc", (MCP_PSEUDO_TASK, "task.42:abc")),  # not a subject token: no task
        ("task42:", (MCP_PSEUDO_TASK, "task42:")),
    ],
)
def test_a_trace_id_names_its_task_only_in_the_task_colon_trace_form(
    trace_id: str, expected: tuple[str, str]
) -> None:
    """`TASK_ID:TRACE_ID` puts a call into that task; any other trace id goes to the `mcp` pseudo-task."""
    assert task_of(trace_id) == expected


async def test_a_call_still_answers_when_its_event_cannot_be_published_and_the_failure_is_logged(
    tmp_path: Path, repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bus without the events stream refuses the publish: the call succeeds, the audit log has the record,
    and a warning names the call and the reason."""
    audit = tmp_path / "audit.jsonl"
    with anyio.fail_after(30):
        async with open_nats_server(tmp_path / "nats") as server:
            async with open_bus(BusConfig(servers=(server.url,), state_dir=tmp_path / "state")) as bus:
                options = ServerOptions(audit=AuditLog(audit, sink=bus_audit_sink(bus), fsync=False))
                with caplog.at_level(logging.WARNING, logger="codeloop.audit_events"):
                    async with Client(build_fs_server(repo, options)) as client:
                        result = await client.call_tool("read_file", {"path": "README.md"})
    assert not result.is_error
    assert verify_log(audit).records == 1
    [warning] = [r for r in caplog.records if r.name == "codeloop.audit_events"]
    assert warning.levelno == logging.WARNING
    assert "fs.read_file" in warning.getMessage() and "NoResponders" in warning.getMessage()


async def test_a_published_event_carries_the_logged_record_and_is_deduplicated_on_its_hash(
    tmp_path: Path, repo: Path
) -> None:
    """The event's data is the record as logged; publishing the same record again (a retry) stores it once."""
    audit = tmp_path / "audit.jsonl"
    with anyio.fail_after(30):
        async with open_nats_server(tmp_path / "nats") as server:
            async with open_bus(BusConfig(servers=(server.url,), state_dir=tmp_path / "state")) as bus:
                await ensure_streams(bus)
                sink = bus_audit_sink(bus)
                options = ServerOptions(audit=AuditLog(audit, sink=sink, fsync=False))
                async with Client(build_fs_server(repo, options)) as client:
                    await client.call_tool(
                        "list_files", {"pattern": "*.md"}, meta={"codeloop/trace_id": "t1:tr"}
                    )
                record = AuditRecord.model_validate_json(audit.read_text().splitlines()[0])
                await sink(record)  # a retry after a lost ack
                sub = await bus.js.subscribe("codeloop.events.t1.tool_call", ordered_consumer=True)
                message = await sub.next_msg(timeout=5)
                info = await bus.js.stream_info("CODELOOP_EVENTS")
                await sub.unsubscribe()
    envelope = parse_envelope(message.data)
    assert envelope.task_id == "t1" and envelope.trace_id == "tr"
    assert envelope.payload["name"] == "tool_call"
    assert envelope.payload["data"] == record.model_dump(mode="json")
    assert info.state.messages == 1
