"""Records in KV with compare-and-set: read, change, write if the revision is still ours, else retry.

Every task transition goes through `TaskRecords.update`, so two writers racing on one task never
lose an update: the loser's write fails on the stale revision (`RecordConflict`), it re-reads the
record the winner wrote and applies its change again on top of it.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats.js.errors
from nats.js.kv import KeyValue

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.errors import RecordConflict
from bus.messages import TaskState

DEFAULT_ATTEMPTS = 50

Change = Callable[[bytes | None], bytes | None | Awaitable[bytes | None]]


@dataclass(frozen=True)
class Versioned:
    value: bytes | None
    """None when the key does not exist (or was deleted)."""
    revision: int
    """0 for a missing key."""


async def read(kv: KeyValue, key: str) -> Versioned:
    with nats_errors():
        try:
            entry = await kv.get(key)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return Versioned(None, 0)
    return Versioned(entry.value, entry.revision or 0)


async def compare_and_set(
    kv: KeyValue, key: str, change: Change, *, attempts: int = DEFAULT_ATTEMPTS
) -> Versioned:
    """Apply `change(current) -> new` to `key` atomically; `new is None` means leave it as it is.

    `change` may run several times (once per lost race), so it must be a pure function of its input.

    Raises:
        RecordConflict: still losing after `attempts` tries.
    """
    for _ in range(attempts):
        current = await read(kv, key)
        new = change(current.value)
        if isinstance(new, Awaitable):
            new = await new
        if new is None:
            return current
        try:
            with nats_errors():
                if current.revision == 0:
                    revision = await kv.create(key, new)
                else:
                    revision = await kv.update(key, new, last=current.revision)
        except RecordConflict:  # also `create` of a key another writer created meanwhile
            continue
        return Versioned(new, revision)
    raise RecordConflict(f"{key}: still conflicting after {attempts} attempts")


class TaskRecords:
    """The `codeloop-tasks` bucket: one `TaskState` per task id."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, bus: Bus) -> "TaskRecords":
        return cls(await bus.kv(subjects.TASKS_BUCKET))

    @staticmethod
    def key(task_id: str) -> str:
        return f"task.{subjects.token(task_id)}"

    async def get(self, task_id: str) -> TaskState | None:
        current = await read(self.kv, self.key(task_id))
        return TaskState.model_validate_json(current.value) if current.value else None

    async def update(
        self, task_id: str, change: Callable[[TaskState | None], TaskState | None]
    ) -> TaskState | None:
        """Compare-and-set the record of `task_id`; `change` gets None when there is no record yet.

        Raises:
            RecordConflict: too many lost races in a row.
        """

        def _change(raw: bytes | None) -> bytes | None:
            state = TaskState.model_validate_json(raw) if raw else None
            new = change(state)
            return None if new is None or new == state else new.model_dump_json().encode()

        result = await compare_and_set(self.kv, self.key(task_id), _change)
        return TaskState.model_validate_json(result.value) if result.value else None

    async def ids_starting_with(self, prefix: str) -> list[str]:
        """The task ids that start with `prefix` (a shortened id a person typed), sorted."""
        with nats_errors():
            try:
                keys = await self.kv.keys()
            except nats.js.errors.NoKeysError:
                return []
        return sorted(key.removeprefix("task.") for key in keys if key.startswith(f"task.{prefix}"))

    async def all(self) -> list[TaskState]:
        with nats_errors():
            try:
                keys = await self.kv.keys()
            except nats.js.errors.NoKeysError:
                return []
        states = [await self.get(key.removeprefix("task.")) for key in keys if key.startswith("task.")]
        return sorted((s for s in states if s), key=lambda s: s.created_at)
