"""Records in KV with compare-and-set: read, change, write if the revision is still ours, else retry.

Every task transition goes through `TaskRecords.update`, so two writers racing on one task never
lose an update: the loser's write fails on the stale revision (`RecordConflict`), it re-reads the
record the winner wrote and applies its change again on top of it.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import nats.js.errors
from nats.js.kv import KeyValue

from bus import subjects
from bus.connection import nats_errors
from bus.errors import RecordConflict
from bus.messages import Message

DEFAULT_ATTEMPTS = 50
M = TypeVar("M", bound=Message)

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


Bucket = KeyValue
"""A KV bucket, for code outside `bus/` that holds one without importing nats."""


async def keys_under(kv: KeyValue, head: str) -> list[str]:
    """The keys of `kv` that start with `head`, from the stream's subjects (see `Records._keys`);
    a deleted key stays listed until purged."""
    kv_prefix = kv._pre  # pyright: ignore[reportPrivateUsage] - `$KV.<bucket>.`; nats-py keeps the stream's name private
    with nats_errors():
        info = await kv._js.stream_info(kv._stream, subjects_filter=f"{kv_prefix}{head}>")  # pyright: ignore[reportPrivateUsage] - nats-py exposes no listing of a bucket's subjects
    return [subject.removeprefix(kv_prefix) for subject in info.state.subjects or {}]


class Records(Generic[M]):
    """One bucket of typed records (a `Message` model per key), changed only by compare-and-set."""

    def __init__(self, kv: KeyValue, model: type[M], *, prefix: str) -> None:
        self.kv = kv
        self.model = model
        self.prefix = prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{subjects.token(name)}"

    async def get(self, name: str) -> M | None:
        current = await read(self.kv, self.key(name))
        return self.model.model_validate_json(current.value) if current.value else None

    async def update(self, name: str, change: Callable[[M | None], M | None]) -> M | None:
        """Compare-and-set the record `name`; `change` gets None when there is no record yet and
        returns None (or the record unchanged) to leave it as it is.

        Raises:
            RecordConflict: too many lost races in a row.
        """

        def _change(raw: bytes | None) -> bytes | None:
            state = self.model.model_validate_json(raw) if raw else None
            new = change(state)
            return None if new is None or new == state else new.model_dump_json().encode()

        result = await compare_and_set(self.kv, self.key(name), _change)
        return self.model.model_validate_json(result.value) if result.value else None

    async def _keys(self) -> list[str]:
        """Every key of the bucket, from the stream's subjects. Not `kv.keys()`: its watcher can
        signal "no more keys" before the first one arrives when the server is busy, and a listing
        then comes back empty. A deleted key stays listed (its tombstone); `get` finds it gone."""
        kv_prefix = self.kv._pre  # pyright: ignore[reportPrivateUsage] - `$KV.<bucket>.`; nats-py keeps the stream's name private
        with nats_errors():
            info = await self.kv._js.stream_info(self.kv._stream, subjects_filter=f"{kv_prefix}>")  # pyright: ignore[reportPrivateUsage] - nats-py exposes no listing of a bucket's subjects
        return [subject.removeprefix(kv_prefix) for subject in info.state.subjects or {}]

    async def ids_starting_with(self, prefix: str) -> list[str]:
        """The names that start with `prefix` (a shortened id a person typed), sorted."""
        keys = await self._keys()
        head = f"{self.prefix}.{prefix}"
        return sorted(key.removeprefix(self.prefix + ".") for key in keys if key.startswith(head))

    async def all(self) -> list[M]:
        keys = await self._keys()
        prefix = self.prefix + "."
        records = [await self.get(key.removeprefix(prefix)) for key in keys if key.startswith(prefix)]
        return [r for r in records if r is not None]
