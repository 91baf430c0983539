"""The configuration center's storage: one document in the KV bucket `codeloop-config`, its history kept.

The bucket holds one key, `document`; each write is a new revision (the KV revision, which in a
one-key bucket counts 1, 2, 3, ...), and the bucket keeps the last `HISTORY` of them, so `history`,
`diff` and `rollback` read old revisions from NATS itself (backing the bucket up backs the center
up). A value is a `CenterRecord`: the TOML text as pushed plus who pushed it, when, why and which
keys changed. What the text means (its schema, its checks) is the configuration's business
(`codeloop.config.center`); this module stores, reads and watches.

Writes: `write(..., expect_revision=N)` is compare-and-set on revision N (0: no document yet), so
of two operators pushing on the same revision one wins and the other gets `RecordConflict`. Who
may write is NATS's business: a user without publish permission on `$KV.codeloop-config.>` gets
`PermissionDenied` (the server refuses the publish; JetStream never answers it).

Reads: every orchestrator and worker holds a `CenterWatch` (an ordered consumer on the key, the
latest value kept in memory), so taking the current revision for a task costs no round trip and a
push reaches every process as soon as NATS delivers it; nothing polls.
"""

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Literal

import anyio
import nats.js.errors
from nats.js.kv import KeyValue
from pydantic import Field

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.errors import BusError, BusNotFound, BusTimeout, PermissionDenied
from bus.messages import Message

HISTORY = 64
"""Revisions the bucket keeps (JetStream's maximum for a KV bucket)."""
DOCUMENT_KEY = "document"


class CenterRecord(Message):
    """One revision of the center: the document and its audit data."""

    kind: Literal["center_record"] = "center_record"
    document: str = Field(max_length=256 * 1024)
    """The configuration as TOML text, as pushed (a rollback: the text of the revision it restores)."""
    base_dir: str = "/"
    """The pushed file's directory: relative `function:` model paths in the document are relative to it."""
    pushed_by: str
    """Who wrote it: the operator's name as their client gave it (`user@host` by default)."""
    pushed_at: datetime
    """When (UTC)."""
    message: str = ""
    """Why, in the operator's words (`--message`)."""
    action: Literal["push", "rollback"] = "push"
    rollback_of: int | None = None
    """For a rollback: the revision whose document this one restores."""
    keys_changed: list[str] = []
    """Dotted keys whose values differ from the revision before (`budgets.max_steps`, ...)."""


class CenterEntry(Message):
    """A revision as read back: its number and its record."""

    revision: int
    record: CenterRecord


async def ensure_center(bus: Bus) -> KeyValue:
    """The center's bucket, created when missing (idempotent; needs permission to create it)."""
    with nats_errors():
        return await bus.js.create_key_value(  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
            bucket=subjects.CONFIG_BUCKET, history=HISTORY, replicas=bus.config.replicas
        )


async def center_bucket(bus: Bus) -> KeyValue:
    """The center's bucket as it is.

    Raises:
        BusNotFound: nothing created it yet (no `codeloop serve` ran on this bus, no push).
    """
    try:
        return await bus.kv(subjects.CONFIG_BUCKET)
    except BusError as exc:
        raise BusNotFound(f"the bus has no configuration center ({subjects.CONFIG_BUCKET}): {exc}") from exc


def _entry(revision: int, value: bytes) -> CenterEntry:
    return CenterEntry(revision=revision, record=CenterRecord.model_validate_json(value))


async def latest(kv: KeyValue) -> CenterEntry | None:
    """The current revision, or None when nothing was ever pushed."""
    with nats_errors():
        try:
            entry = await kv.get(DOCUMENT_KEY)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
    return _entry(entry.revision or 0, entry.value or b"")


async def at_revision(kv: KeyValue, revision: int) -> CenterEntry:
    """Revision `revision`.

    Raises:
        BusNotFound: no such revision (never written, or older than the `HISTORY` the bucket keeps).
    """
    with nats_errors():
        try:
            entry = await kv.get(DOCUMENT_KEY, revision=revision)
        except (
            nats.js.errors.KeyNotFoundError,
            nats.js.errors.KeyDeletedError,
            nats.js.errors.NotFoundError,
        ):
            raise BusNotFound(
                f"the center has no revision {revision} (never written, or older than the {HISTORY} kept)"
            ) from None
    return _entry(revision, entry.value or b"")


async def history(kv: KeyValue) -> list[CenterEntry]:
    """Every revision the bucket keeps, oldest first (empty when nothing was pushed)."""
    with nats_errors():
        try:
            entries = await kv.history(DOCUMENT_KEY)
        except nats.js.errors.NoKeysError:
            return []
    return [_entry(e.revision or 0, e.value or b"") for e in entries if e.value and e.operation is None]


async def write(bus: Bus, kv: KeyValue, record: CenterRecord, *, expect_revision: int | None = None) -> int:
    """Store `record` as the next revision; its number. `expect_revision`: only if the current
    revision is still that one (0: only if nothing was pushed yet).

    Raises:
        RecordConflict: the current revision is not `expect_revision` (another push won).
        PermissionDenied: this client's NATS user may not write the center.
    """
    value = record.model_dump_json().encode()
    refused_before = len(bus.events.refusals)
    try:
        with nats_errors():
            if expect_revision is None:
                return await kv.put(DOCUMENT_KEY, value)
            if expect_revision == 0:
                return await kv.create(DOCUMENT_KEY, value)
            return await kv.update(DOCUMENT_KEY, value, last=expect_revision)
    except BusTimeout as exc:
        # A refused publish is never answered: the server says why on the side (`error_cb`).
        refusals = bus.events.refusals[refused_before:]
        if refusals or bus.events.refusals:
            reason = (refusals or bus.events.refusals)[-1]
            raise PermissionDenied(
                f"the NATS server refused this client's write to the configuration center ({reason}); "
                f"pushing needs operator credentials with publish permission on $KV.{subjects.CONFIG_BUCKET}.>"
            ) from exc
        raise


class CenterWatch:
    """The center's current revision in this process, kept up to date by `watch_center`."""

    def __init__(self) -> None:
        self.current: CenterEntry | None = None
        """The latest revision seen; None while nothing was pushed."""
        self.ignored: tuple[int, str] | None = None
        """A revision whose value did not read (revision, why); the one before it stays current."""
        self._changed = anyio.Event()

    def update(self, entry: CenterEntry | None) -> None:
        """Make `entry` current and wake `wait_for` (the watch's own task calls it)."""
        self.current = entry
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def revision(self) -> int | None:
        return self.current.revision if self.current else None

    async def wait_for(self, revision: int) -> CenterEntry:
        """Return once revision `revision` (or a later one) is current here."""
        while self.current is None or self.current.revision < revision:
            await self._changed.wait()
        return self.current


@asynccontextmanager
async def watch_center(bus: Bus) -> AsyncGenerator[CenterWatch, None]:
    """A `CenterWatch` holding the current revision from entry on (the bucket created if missing),
    updated as pushes arrive until exit."""
    kv = await ensure_center(bus)
    watch = CenterWatch()
    with nats_errors():
        watcher = await kv.watch(DOCUMENT_KEY)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its keys parameter untyped
    ready = anyio.Event()

    async def follow() -> None:
        async for entry in watcher:
            if entry is None:  # nats-py's marker: everything stored so far was delivered
                ready.set()
                continue
            if entry.operation is not None or not entry.value:
                watch.update(None)
            else:
                try:
                    watch.update(_entry(entry.revision or 0, entry.value))
                except ValueError as exc:  # not ours: keep the last good one, and say why
                    watch.ignored = (entry.revision or 0, str(exc).splitlines()[0])
            if (entry.delta or 0) == 0:
                ready.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.fail_after(10):
                await ready.wait()
            yield watch
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True), suppress(Exception):
            if not bus.nc.is_closed:
                await watcher.stop()
