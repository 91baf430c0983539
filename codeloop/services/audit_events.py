"""Audit records of tool calls, published on the bus as `tool_call` events.

`tool_servers` must not import `bus` (docs/architecture.md, "Dependency direction"), so the audit log only
knows an `AuditSink`; this module, in the composition root, is the sink that publishes.

Which task a call belongs to comes from its trace id (the `codeloop/trace_id` request `_meta`
key a client may set):

- `TASK_ID:TRACE_ID`, where TASK_ID is a subject token (letters, digits, `-`, `_`): the call is
  part of that task. The event goes to `codeloop.events.<TASK_ID>.tool_call` with the envelope's
  `trace_id` = TRACE_ID, so `codeloop watch TASK_ID` shows it. An agent sends
  `f"{envelope.task_id}:{envelope.trace_id}"`.
- anything else (no trace id, or one without that shape): a call from an MCP client outside any
  task. The event goes to the pseudo-task `mcp` (`codeloop.events.mcp.tool_call`) with the whole
  trace id as the envelope's `trace_id`.

The event's `data` is the audit record as logged (arguments already redacted and long strings
summarised by `tool_servers.protocol.audit`), passed through `redaction` once more on its way out, so an
event never carries what a log could not. The envelope id is derived from the record's hash, so a
retried publish is deduplicated by JetStream.

A failed publish must not fail the tool call (the record is already in the audit log on disk,
which stays the source of truth): it is logged at warning with the reason, never dropped silently.
"""

import logging

import anyio

from bus import subjects
from bus.connection import Bus
from bus.envelope import Envelope
from bus.messages import Event
from redaction import redact
from tool_servers.protocol.audit import AuditRecord, AuditSink

# Named as before the services package existed: logging configurations and filters name it.
log = logging.getLogger("codeloop.audit_events")
EVENT_NAME = "tool_call"
MCP_PSEUDO_TASK = "mcp"
"""Task id of the events of calls that are not part of a task."""
PUBLISH_TIMEOUT_S = 2.0
"""The sink runs inside the call (shielded, after the tool's work): a slow bus may delay a reply this long."""


def task_of(trace_id: str) -> tuple[str, str]:
    """(task id, trace id) a call's trace id stands for; see the module docstring."""
    task_id, sep, trace = trace_id.partition(":")
    if sep and trace and subjects.is_token(task_id):
        return task_id, trace
    return MCP_PSEUDO_TASK, trace_id


def tool_call_envelope(record: AuditRecord) -> Envelope:
    """The `tool_call` event of one audit record."""
    task_id, trace_id = task_of(record.trace_id)
    event = Event(
        name=EVENT_NAME,
        message=f"{record.server}.{record.tool} {record.outcome} in {record.duration_ms:.0f} ms",
        data=redact(record.model_dump(mode="json")),
    )
    return Envelope.wrap(event, task_id=task_id, trace_id=trace_id, id=f"tool-call-{record.hash}")


def bus_audit_sink(bus: Bus) -> AuditSink:
    """An `AuditSink` publishing every record as a `tool_call` event on `bus`; never raises."""

    async def publish(record: AuditRecord) -> None:
        envelope = tool_call_envelope(record)
        subject = subjects.event(envelope.task_id, EVENT_NAME)
        reason = f"no ack within {PUBLISH_TIMEOUT_S:.0f} s"
        with anyio.move_on_after(PUBLISH_TIMEOUT_S):
            try:
                await bus.publish(subject, envelope, timeout_s=PUBLISH_TIMEOUT_S)
                return
            except Exception as exc:  # any failure: the call must still answer
                reason = f"{type(exc).__name__}: {exc}"
        log.warning(
            "tool_call event for %s.%s (audit seq %d, trace %s) not published on %s: %s; "
            "the record is in the audit log",
            record.server,
            record.tool,
            record.seq,
            record.trace_id,
            subject,
            reason,
        )

    return publish


__all__ = ["EVENT_NAME", "MCP_PSEUDO_TASK", "bus_audit_sink", "task_of", "tool_call_envelope"]
