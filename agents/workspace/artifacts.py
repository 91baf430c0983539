"""The `codeloop-artifacts` object store, as snapshots and recordings use it.

The bucket's access (batched reads, pipelined writes) is the bus's (`bus.objects.Objects`); this
names the bucket and turns the bus's errors into the workspace's: callers only ever see
`SnapshotUnavailable`.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from agents.workspace.errors import SnapshotUnavailable
from bus.connection import Bus
from bus.errors import BusError
from bus.objects import Objects, StoredObject
from bus.subjects import ARTIFACTS_BUCKET


@contextmanager
def _unavailable() -> Iterator[None]:
    try:
        yield
    except BusError as exc:
        raise SnapshotUnavailable(str(exc)) from exc


class Artifacts:
    """Named objects of the artifacts bucket."""

    def __init__(self, objects: Objects) -> None:
        self._objects = objects

    @classmethod
    async def open(cls, bus: Bus) -> "Artifacts":
        """Raises:
        SnapshotUnavailable: the bucket does not exist (no `codeloop serve` or `ensure_streams` ran).
        """
        try:
            return cls(await Objects.open(bus, ARTIFACTS_BUCKET))
        except BusError as exc:
            raise SnapshotUnavailable(
                f"{exc} (is the bus set up? `codeloop serve` creates the {ARTIFACTS_BUCKET!r} bucket)"
            ) from exc

    async def infos(self, names: list[str]) -> dict[str, StoredObject]:
        """Each of `names` that exists (deleted objects count as missing)."""
        with _unavailable():
            return await self._objects.infos(names)

    async def put(self, name: str, data: bytes) -> None:
        """Store `data` as `name` (an existing object of that name is replaced)."""
        await self.put_many([(name, data)])

    async def put_many(self, items: list[tuple[str, bytes]]) -> None:
        """Store each `(name, data)`, pipelined.

        Raises:
            SnapshotUnavailable: a publish was refused or not acked in time.
        """
        with _unavailable():
            await self._objects.put_many(items)

    async def get_many(self, names: list[str]) -> dict[str, bytes]:
        """The contents of each of `names`.

        Raises:
            SnapshotUnavailable: one of them is missing, or the bus failed.
        """
        with _unavailable():
            return await self._objects.get_many(names)

    async def get(self, name: str) -> bytes:
        """Raises:
        SnapshotUnavailable: no such object, or the bus failed.
        """
        return (await self.get_many([name]))[name]
