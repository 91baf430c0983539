"""The `echo` role: answers an `EchoRequest` with its text.

The smallest role there is: the bus's tests, benchmarks and soak runs use it to carry messages
end to end without models, tools or sandboxes, and it shows a custom role's whole shape — its
payloads (`agents.messages.echo`, registered with the bus), a handler that returns its reply, an
`ActorSpec`.
"""

from agents.messages.echo import EchoRequest, EchoResult
from bus import subjects
from bus.actor import ActorSpec, Delivery, DeliveryPolicy, Reply
from bus.errors import MalformedMessage

ROLE = "echo"


async def handle_echo(delivery: Delivery) -> Reply:
    request = delivery.envelope.open()
    if not isinstance(request, EchoRequest):
        raise MalformedMessage(f"the echo role takes echo_request, got {delivery.envelope.kind}")
    return Reply(subjects.task_result(ROLE), EchoResult(text=request.text), label="result")


def echo_spec(policy: DeliveryPolicy | None = None) -> ActorSpec:
    """The echo worker under `policy` (default `DeliveryPolicy()`)."""
    return ActorSpec(
        address=subjects.RoleAddress.worker(ROLE), handler=handle_echo, policy=policy or DeliveryPolicy()
    )
