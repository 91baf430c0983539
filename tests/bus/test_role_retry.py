"""A role's step that fails because the bus failed under it (a timeout while a node fails over)
is redelivered, not failed for good; one failing for another classed reason ends at once."""

import pytest

from agents.roles.echo import EchoRequest, EchoResult
from agents.runtime.role import role_spec
from agents.workspace.errors import SnapshotUnavailable
from bus import subjects
from bus.actor import Delivery, DeliveryPolicy
from bus.connection import Bus
from bus.envelope import Envelope
from bus.errors import BusError
from tests.bus._bus_support import running

pytestmark = pytest.mark.anyio
ROLE = "probe"


@pytest.mark.parametrize(
    ("bus_caused", "deliveries", "kind"), [(True, [1, 2], "echo_result"), (False, [1], "step_failed")]
)
async def test_a_step_failed_by_the_bus_is_redelivered(
    bus: Bus, bus_caused: bool, deliveries: list[int], kind: str
) -> None:
    seen: list[int] = []

    async def handle(delivery: Delivery, request) -> EchoResult:
        seen.append(delivery.num_delivered)
        if delivery.num_delivered == 1:
            if bus_caused:
                raise SnapshotUnavailable("object store: cannot open the bucket") from BusError(
                    "nats: timeout"
                )
            raise SnapshotUnavailable("2 object(s) missing from the bucket")
        return EchoResult(text="ok")

    spec = role_spec(ROLE, handle, policy=DeliveryPolicy(max_deliver=3, backoff_s=(0.05,)))
    task_id = f"t-{bus_caused}".lower()
    # A plain subscription sees what the worker publishes to the (work-queue) results stream.
    sub = await bus.nc.subscribe(subjects.task_result(ROLE))
    try:
        async with running(bus, spec):
            await bus.publish(subjects.work(ROLE), Envelope.wrap(EchoRequest(text="x"), task_id=task_id))
            result = Envelope.model_validate_json((await sub.next_msg(timeout=15)).data)
    finally:
        await sub.unsubscribe()
    assert seen == deliveries
    assert result.kind == kind
