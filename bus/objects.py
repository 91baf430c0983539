"""A JetStream object store bucket, as codeloop uses it: many small named blobs, in and out fast.

`Objects` is the bus's accessor for a bucket (`codeloop-artifacts`: snapshots, recordings,
SWE-bench instance files). Errors are `bus.errors` (`BusNotFound` for a missing bucket or object);
a caller translates them into its own (`agents.workspace.artifacts`: `SnapshotUnavailable`).

Objects are laid out exactly as the NATS object store defines them (chunks on `$O.<bucket>.C.<nuid>`,
the `ObjectInfo` JSON on `$O.<bucket>.M.<base64 name>`, rolled up), so nats-py's `ObjectStore.get`
or the `nats` CLI read what we write. What differs is the access pattern. nats-py spends one
request per object on `get_info` and an ordered consumer per `get` (a thousand blobs exhausted the
stream's consumer limit); a snapshot touches thousands of objects. So:

- existence and metadata of up to `BATCH` objects come from one batched direct get
  (`multi_last` over their meta subjects, nats-server 2.11+),
- single-chunk objects (nearly every source file) are read the same way, many per request,
- a put publishes the chunks and the meta message, without nats-py's extra `get_info` round trip;
  `put_many` pipelines many puts (every chunk published before any ack is awaited, then the meta
  messages the same way), so a thousand small blobs cost two waves of acks, not 2,000 round trips.
  A meta message is only sent once its chunks are acked: an object that exists is complete.

A server without batched direct gets, or a bucket made without direct gets, answers with an
error status; we then fall back to one stream API request per object (slower, same result).
"""

import base64
import hashlib
import json
import secrets
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from nats.aio.msg import Msg
from nats.js.api import Header, ObjectInfo, ObjectMetaOptions

from bus.connection import Bus, nats_errors
from bus.errors import BusError, BusNotFound, BusTimeout

CHUNK_SIZE = 128 * 1024
"""nats-py's default chunk size; well under NATS's 1 MiB default max payload."""
BATCH = 500
"""Subjects per batched direct get: 500 meta subjects make a ~60 kB request."""
BATCH_BYTES = 4 * 1024 * 1024
"""Chunk bytes asked for in one batched direct get, so one reply stream stays a few MiB."""
REPLY_TIMEOUT_S = 10.0
ACK_TIMEOUT_S = 30.0
"""For one wave of pipelined publishes to be acked."""
WAVE_MESSAGES = 1000
"""Publishes in flight at once; nats-py allows 4,000 pending."""
WAVE_BYTES = 8 * 1024 * 1024
FALLBACK_CONCURRENCY = 16


@dataclass(frozen=True)
class StoredObject:
    """What the bucket says of one object."""

    name: str
    size: int
    """Bytes."""


@contextmanager
def _bus_errors(bucket: str, what: str) -> Generator[None]:
    try:
        with nats_errors():
            yield
    except BusError as exc:
        raise type(exc)(f"object store {bucket!r}: cannot {what}: {exc}") from exc


class Objects:
    """Named objects of one bucket (see the module docstring for the access pattern)."""

    def __init__(self, bus: Bus, bucket: str) -> None:
        self._bus = bus
        self.bucket = bucket
        self._stream = f"OBJ_{bucket}"
        self._direct_get = f"$JS.API.DIRECT.GET.{self._stream}"
        self._batched = True

    @classmethod
    async def open(cls, bus: Bus, bucket: str) -> "Objects":
        """Raises:
        BusNotFound: the bucket does not exist (`bus.streams.ensure_streams` makes codeloop's).
        BusError: the bus failed.
        """
        with _bus_errors(bucket, "open the bucket"):
            await bus.js.object_store(bucket)
        return cls(bus, bucket)

    @classmethod
    async def ensure(cls, bus: Bus, bucket: str) -> "Objects":
        """The bucket, made first when it does not exist (`bus.streams.ensure_streams` makes
        codeloop's own on a serve's bus; this is for a bus no serve set up)."""
        with _bus_errors(bucket, "create the bucket"):
            await bus.js.create_object_store(bucket=bucket, replicas=bus.config.replicas)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
        return cls(bus, bucket)

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self.bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"

    def _chunk_subject(self, nuid: str) -> str:
        return f"$O.{self.bucket}.C.{nuid}"

    async def infos(self, names: list[str]) -> dict[str, StoredObject]:
        """What the bucket holds of `names`: each that exists (deleted objects count as missing)."""
        return {name: StoredObject(name, info.size or 0) for name, info in (await self._infos(names)).items()}

    async def _infos(self, names: list[str]) -> dict[str, ObjectInfo]:
        subjects = {self._meta_subject(name): name for name in names}
        messages = await self._last_messages(list(subjects))
        infos: dict[str, ObjectInfo] = {}
        for subject, msg in messages.items():
            info = ObjectInfo.from_response(json.loads(msg.data))
            if not info.deleted:
                infos[subjects[subject]] = info
        return infos

    async def put(self, name: str, data: bytes) -> None:
        """Store `data` as `name`; an existing object of that name is replaced (its old chunks stay
        until purged: we only put content-addressed names that are not there yet)."""
        await self.put_many([(name, data)])

    async def put_many(self, items: list[tuple[str, bytes]]) -> None:
        """Store each `(name, data)`, pipelined (see the module docstring).

        Raises:
            BusTimeout: a wave of publishes was not acked within `ACK_TIMEOUT_S`.
            BusError: a publish was refused.
        """
        metas: list[tuple[str, bytes]] = []
        chunks: list[tuple[str, bytes]] = []
        for name, data in items:
            nuid = secrets.token_hex(11)
            parts = [data[i : i + CHUNK_SIZE] for i in range(0, len(data), CHUNK_SIZE)]
            chunks += [(self._chunk_subject(nuid), part) for part in parts]
            info = ObjectInfo(
                name=name,
                bucket=self.bucket,
                nuid=nuid,
                size=len(data),
                chunks=len(parts),
                mtime=datetime.now(UTC).isoformat(),
                digest="SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode(),
                options=ObjectMetaOptions(max_chunk_size=CHUNK_SIZE),
            )
            metas.append((self._meta_subject(name), json.dumps(info.as_dict()).encode()))
        await self._publish_waves(chunks, headers=None)
        await self._publish_waves(metas, headers={Header.ROLLUP: "sub"})

    async def _publish_waves(
        self, messages: list[tuple[str, bytes]], *, headers: dict[str, str] | None
    ) -> None:
        wave: list[tuple[str, bytes]] = []
        size = 0
        for subject, data in messages:
            if wave and (len(wave) >= WAVE_MESSAGES or size + len(data) > WAVE_BYTES):
                await self._publish_wave(wave, headers)
                wave, size = [], 0
            wave.append((subject, data))
            size += len(data)
        if wave:
            await self._publish_wave(wave, headers)

    async def _publish_wave(self, wave: list[tuple[str, bytes]], headers: dict[str, str] | None) -> None:
        with _bus_errors(self.bucket, "store objects"):
            acks = [
                await self._bus.js.publish_async(subject, data, headers=headers)  # pyright: ignore[reportUnknownMemberType] - nats-py types its headers as a bare Dict
                for subject, data in wave
            ]
            try:
                with anyio.fail_after(ACK_TIMEOUT_S):
                    for ack in acks:
                        await ack
            except TimeoutError:
                raise BusTimeout(
                    f"object store {self.bucket!r}: {len(wave)} publishes not acked in {ACK_TIMEOUT_S:.0f} s"
                ) from None

    async def get_many(self, names: list[str]) -> dict[str, bytes]:
        """The contents of each of `names`.

        Raises:
            BusNotFound: one of them is missing.
            BusError: the bus failed.
        """
        infos = await self._infos(names)
        missing = [name for name in names if name not in infos]
        if missing:
            raise BusNotFound(
                f"{len(missing)} object(s) missing from the {self.bucket!r} bucket, e.g. {missing[0]}"
            )
        out = {name: b"" for name, info in infos.items() if not info.size}
        single = {
            self._chunk_subject(info.nuid or ""): name for name, info in infos.items() if info.chunks == 1
        }
        for group in _by_size(list(single), {s: infos[single[s]].size or 0 for s in single}):
            for subject, msg in (await self._last_messages(group)).items():
                out[single[subject]] = msg.data
        rest = [name for name in infos if name not in out]
        limiter = anyio.CapacityLimiter(FALLBACK_CONCURRENCY)

        async def read_chunks(name: str) -> None:
            async with limiter:
                out[name] = await self._read_chunks(infos[name])

        async with anyio.create_task_group() as tg:
            for name in rest:
                tg.start_soon(read_chunks, name)
        return out

    async def get(self, name: str) -> bytes:
        """Raises:
        BusNotFound: no such object.
        BusError: the bus failed.
        """
        return (await self.get_many([name]))[name]

    async def delete(self, name: str) -> None:
        """Remove `name` (its chunks purged, a deleted marker left as its metadata, as nats-py
        and the `nats` CLI do); nothing happens when there is no such object.

        Raises:
            BusError: the bus failed.
        """
        info = (await self._infos([name])).get(name)
        if info is None:
            return
        info.deleted, info.size, info.chunks, info.digest, info.mtime = True, 0, 0, "", ""
        with _bus_errors(self.bucket, f"delete {name}"):
            try:
                await self._bus.js.publish(
                    self._meta_subject(name),
                    json.dumps(info.as_dict()).encode(),
                    headers={Header.ROLLUP: "sub"},
                )
            finally:
                await self._bus.js.purge_stream(self._stream, subject=self._chunk_subject(info.nuid or ""))

    async def _read_chunks(self, info: ObjectInfo) -> bytes:
        """All chunks of one object, one direct get each (for objects a batch did not return)."""
        subject = self._chunk_subject(info.nuid or "")
        parts: list[bytes] = []
        seq = 1
        with _bus_errors(self.bucket, f"read {info.name}"):
            for _ in range(info.chunks or 0):
                msg = await self._bus.js.get_msg(
                    self._stream, seq=seq, subject=subject, next=True, direct=self._batched
                )
                parts.append(msg.data or b"")
                seq = (msg.seq or seq) + 1
        return b"".join(parts)

    async def _last_messages(self, subjects: list[str]) -> dict[str, Msg]:
        """The last message on each subject that has one, `BATCH` subjects per request."""
        found: dict[str, Msg] = {}
        for start in range(0, len(subjects), BATCH):
            group = subjects[start : start + BATCH]
            batch = await self._direct_batch(group) if self._batched else None
            if batch is None:
                self._batched = False
                batch = await self._one_by_one(group)
            found.update(batch)
        return found

    async def _direct_batch(self, subjects: list[str]) -> dict[str, Msg] | None:
        """One batched direct get; None when the server does not do them."""
        request = json.dumps({"multi_last": subjects, "batch": len(subjects)}).encode()
        found: dict[str, Msg] = {}
        with _bus_errors(self.bucket, "read object metadata"):
            sub = await self._bus.nc.subscribe(self._bus.nc.new_inbox())  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its future parameter untyped
            try:
                await self._bus.nc.publish(self._direct_get, request, reply=sub.subject)
                while True:
                    try:
                        with nats_errors():
                            msg = await sub.next_msg(timeout=REPLY_TIMEOUT_S)
                    except BusTimeout:
                        return None
                    headers = msg.headers or {}
                    status = headers.get(Header.STATUS)
                    if status in ("204", "404"):  # end of batch / nothing found
                        return found
                    if status:
                        return None
                    found[headers["Nats-Subject"]] = msg
            finally:
                await sub.unsubscribe()

    async def _one_by_one(self, subjects: list[str]) -> dict[str, Msg]:
        found: dict[str, Msg] = {}
        limiter = anyio.CapacityLimiter(FALLBACK_CONCURRENCY)

        async def one(subject: str) -> None:
            async with limiter:
                with _bus_errors(self.bucket, "read object metadata"):
                    try:
                        with nats_errors():
                            raw = await self._bus.js.get_last_msg(self._stream, subject)
                    except BusNotFound:
                        return
                found[subject] = Msg(self._bus.nc, subject=subject, data=raw.data or b"")

        async with anyio.create_task_group() as tg:
            for subject in subjects:
                tg.start_soon(one, subject)
        return found


def _by_size(subjects: list[str], sizes: dict[str, int]) -> Iterator[list[str]]:
    group: list[str] = []
    total = 0
    for subject in subjects:
        if group and (total + sizes[subject] > BATCH_BYTES or len(group) >= BATCH):
            yield group
            group, total = [], 0
        group.append(subject)
        total += sizes[subject]
    if group:
        yield group
