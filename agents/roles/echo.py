"""The `echo` role: answers an `EchoRequest` with its text.

The smallest role there is: the bus's tests, benchmarks and soak runs use it to carry messages
end to end without models, tools or sandboxes, and it shows a custom role's whole shape — its
payloads registered with the bus, a handler that returns its reply, an `ActorSpec`.
"""

from typing import Literal

from bus import subjects
from bus.actor import ActorSpec, Delivery, DeliveryPolicy, Reply
from bus.errors import MalformedMessage
from bus.messages import Message, register_payloads

ROLE = "echo"


class EchoRequest(Message):
    """Work for the `echo` role."""

    kind: Literal["echo_request"] = "echo_request"
    """Always `echo_request`; equals the envelope's `kind`."""
    text: str
    """What to send back."""


class EchoResult(Message):
    """The `echo` role's answer: the request's text, unchanged."""

    kind: Literal["echo_result"] = "echo_result"
    """Always `echo_result`; equals the envelope's `kind`."""
    text: str
    """The request's `text`."""


register_payloads(EchoRequest, EchoResult)


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
