"""The hash-chained, append-only audit log of tool calls.

One JSON object per line. Each record carries `prev_hash` (the previous line's `hash`, or
64 zeros for the first) and `hash` = sha256 over its own canonical JSON without `hash`. So an
edited record no longer matches its hash, and a removed or reordered record breaks the chain
(its successor's `prev_hash` and the `seq` numbering). Appends take an exclusive `flock` and
re-read the tail under it, so several server processes may share one log. Truncating records
at the end is only detectable against a `seq`/hash the reader remembers.

With a bus configured, each record is also handed to an async `sink` (the composition root
publishes it as an event); a failing sink fails the call rather than being dropped silently.
"""

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from redaction import redact as redact_value

GENESIS = "0" * 64
DIGESTED_ARGUMENTS = frozenset({"content", "patch"})
"""Arguments that carry file contents or patches: logged as size and digest, never as text."""


class AuditRecord(BaseModel):
    """One tool call, as written to the log."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seq: int
    """Position in the log, starting at 1; a gap means a removed record."""
    time: str
    """UTC ISO-8601 time the call started."""
    principal: str
    """Who called: the token's principal over HTTP, `local` over stdio."""
    server: str
    tool: str
    arguments: dict[str, JsonValue]
    """The call's arguments with secrets redacted and long strings summarised."""
    outcome: str
    """`ok`, `input_required`, or the error type (`permission_denied`, ...)."""
    duration_ms: float
    trace_id: str
    prev_hash: str
    hash: str


AuditSink = Callable[[AuditRecord], Awaitable[None]]
"""Optional extra destination for records (e.g. publishing to the bus)."""


class VerifyReport(BaseModel):
    """The result of checking a log's chain."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    ok: bool
    records: int
    """Records read before the first problem (all of them when `ok`)."""
    problems: list[str]
    """Each problem names its line number and what does not match."""


def redact(arguments: Mapping[str, object]) -> JsonValue:
    """Tool arguments as they may be logged: secrets masked, contents, patches and long strings
    summarised (`redaction.redact`)."""
    return redact_value(arguments, digest_keys=DIGESTED_ARGUMENTS)


def _record_hash(fields: Mapping[str, JsonValue]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


class AuditLog:
    """Appends records to one JSONL file, chaining each to the last line on disk."""

    def __init__(self, path: Path, *, sink: AuditSink | None = None, fsync: bool = True) -> None:
        self.path = Path(path)
        self.sink = sink
        self.fsync = fsync
        """Sync each record to disk before the call returns (survives a machine crash; ~0.5 ms)."""
        self._lock = threading.Lock()

    async def append(
        self,
        *,
        principal: str,
        server: str,
        tool: str,
        arguments: Mapping[str, object],
        outcome: str,
        duration_ms: float,
        trace_id: str,
        started: datetime,
    ) -> AuditRecord:
        """Write one record (redacting `arguments`) and pass it to the sink."""
        fields: dict[str, JsonValue] = {
            "time": started.astimezone(UTC).isoformat(timespec="milliseconds"),
            "principal": principal,
            "server": server,
            "tool": tool,
            "arguments": redact(arguments),
            "outcome": outcome,
            "duration_ms": round(duration_ms, 3),
            "trace_id": trace_id,
        }
        record = await anyio.to_thread.run_sync(self._append_sync, fields)
        if self.sink is not None:
            await self.sink(record)
        return record

    def _append_sync(self, fields: dict[str, JsonValue]) -> AuditRecord:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock, _open_private(self.path) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                seq, prev_hash = _last_link(handle)
                body = {**fields, "seq": seq + 1, "prev_hash": prev_hash}
                record = AuditRecord(**body, hash=_record_hash(body))
                handle.seek(0, os.SEEK_END)
                handle.write(record.model_dump_json().encode() + b"\n")
                handle.flush()
                if self.fsync:
                    os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return record


def _open_private(path: Path) -> IO[bytes]:
    """The log opened for appending and reading; created 0600 (its records name what was done)."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a+b")


def _last_link(handle: IO[bytes]) -> tuple[int, str]:
    """(seq, hash) of the last record in the open file, or (0, GENESIS) when it is empty."""
    end = handle.seek(0, os.SEEK_END)
    if end == 0:
        return 0, GENESIS
    chunk = 4096
    data = b""
    pos = end
    while pos > 0:
        step = min(chunk, pos)
        pos -= step
        handle.seek(pos)
        data = handle.read(step) + data
        lines = data.rstrip(b"\n").split(b"\n")
        if len(lines) > 1 or pos == 0:
            last = json.loads(lines[-1])
            return int(last["seq"]), str(last["hash"])
        chunk *= 2
    return 0, GENESIS


def verify_log(path: Path) -> VerifyReport:
    """Check every line's hash, its link to the previous line, and the `seq` numbering."""
    problems: list[str] = []
    prev_hash, expected_seq, count = GENESIS, 1, 0
    with open(path, "rb") as handle:  # bytes: a corrupted line is a finding, not a crash
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(f"line {lineno}: not UTF-8 text (byte {exc.start}); the log is damaged")
                break
            if not line.strip():
                problems.append(f"line {lineno}: empty line")
                break
            try:
                record = AuditRecord.model_validate_json(line)
            except ValidationError as exc:
                problems.append(f"line {lineno}: not an audit record ({exc.error_count()} schema errors)")
                break
            body = record.model_dump(exclude={"hash"})
            if _record_hash(body) != record.hash:
                problems.append(f"line {lineno}: content does not match its hash (record edited)")
            if record.prev_hash != prev_hash:
                problems.append(
                    f"line {lineno}: prev_hash does not match the previous record (record removed or reordered)"
                )
            if record.seq != expected_seq:
                problems.append(f"line {lineno}: seq {record.seq}, expected {expected_seq}")
            if problems:
                break
            prev_hash, expected_seq, count = record.hash, record.seq + 1, count + 1
    return VerifyReport(ok=not problems, records=count, problems=problems)
