"""The object store as the bus gives it (`bus.objects`) on a real nats-server: what is put is read
back whole (over one chunk too), a deleted object is gone, and nats-py's own object store reads
what we wrote (the layout is JetStream's, so the `nats` CLI and other clients can too)."""

import pytest

from bus.connection import Bus
from bus.errors import BusNotFound
from bus.objects import CHUNK_SIZE, Objects
from bus.subjects import ARTIFACTS_BUCKET

pytestmark = pytest.mark.anyio


async def test_an_object_put_is_read_back_and_once_deleted_is_gone(bus: Bus) -> None:
    """Our contract: a SWE-bench worker's files are stored, collected once, then removed."""
    objects = await Objects.open(bus, ARTIFACTS_BUCKET)
    large = bytes(range(256)) * (CHUNK_SIZE // 256 * 2 + 3)  # three chunks
    await objects.put_many([("small", b"hello"), ("large", large)])

    assert await objects.get_many(["small", "large"]) == {"small": b"hello", "large": large}
    assert (await (await bus.js.object_store(ARTIFACTS_BUCKET)).get("large")).data == large

    await objects.delete("large")
    await objects.delete("never-there")  # nothing to do, no error
    assert set(await objects.infos(["small", "large"])) == {"small"}
    with pytest.raises(BusNotFound):
        await objects.get("large")
