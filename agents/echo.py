"""The `echo` role: answers an `EchoRequest` with its text; carries tasks end to end until the real agents exist."""

from bus import subjects
from bus.actor import ActorSpec, Delivery
from bus.errors import MalformedMessage
from bus.messages import EchoRequest, EchoResult

ROLE = "echo"


async def handle_echo(delivery: Delivery) -> None:
    request = delivery.envelope.open()
    if not isinstance(request, EchoRequest):
        raise MalformedMessage(f"the echo role takes echo_request, got {delivery.envelope.kind}")
    result = delivery.envelope.reply(EchoResult(text=request.text), id=delivery.derived_id("result"))
    await delivery.publish(subjects.task_result(ROLE), result)


def echo_spec(**policy: object) -> ActorSpec:
    """The echo worker; `policy` overrides `ActorSpec` delivery fields (ack_wait_s, concurrency, ...)."""
    return ActorSpec(address=subjects.RoleAddress.worker(ROLE), handler=handle_echo, **policy)  # type: ignore[arg-type]
