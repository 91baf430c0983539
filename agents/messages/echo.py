"""The `echo` stage's messages: the bus's smoke test sends a text and gets it back unchanged.

The `echo` kind (`agents.orchestrator.stages.echo`) builds the request and the `echo` role
(`agents.roles.echo`) answers it; both take the messages from here, below them both.
"""

from typing import Literal

from bus.messages import Message


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
