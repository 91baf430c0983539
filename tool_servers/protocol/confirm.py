"""Human confirmation of high-risk calls through MCP elicitation.

A tool whose spec can need confirmation gets a hidden parameter filled by `confirmation_resolver`
(the SDK's `Resolve` mechanism), which works on both protocol generations: on 2026-07-28 sessions
the question rides an `InputRequiredResult` round-trip, on 2025-11-25 sessions it is a mid-call
`elicitation/create` request. `ctx.elicit()` would only work on the latter.

The resolver decides, per call, between three outcomes:
- not needed (the call is not high-risk): the tool runs;
- ask: the client declared the elicitation capability, so the user is asked;
- cannot ask: the client did not declare it, so the call fails with `needs_confirmation`,
  describing what would have happened, and nothing is done.
"""

from dataclasses import dataclass
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, Resolve
from pydantic import BaseModel, ConfigDict, Field


class Confirm(BaseModel):
    """The form shown to the user."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    approve: bool = Field(description="Allow this action?")


@dataclass(frozen=True)
class NotNeeded:
    """The call is not high-risk; no one is asked."""


@dataclass(frozen=True)
class CannotAsk:
    """The call is high-risk but the client cannot elicit."""

    action: str


async def confirmation_resolver(ctx: Context) -> Elicit[Confirm] | NotNeeded | CannotAsk:
    """Ask the user about the current call when its spec says it is high-risk."""
    # Imported here: protocol imports this module for the annotation below.
    from tool_servers.protocol.gate import current_call

    call = current_call()
    action = call.spec.confirmation_needed(call.args)
    if action is None:
        return NotNeeded()
    if not can_elicit(ctx):
        return CannotAsk(action)
    return Elicit(f"{call.context.server}.{call.spec.name} wants to: {action}. Allow?", Confirm)


def can_elicit(ctx: Context) -> bool:
    """Whether the client declared form elicitation (so its user can be asked)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    # A bare `elicitation: {}` means form support (spec 2025-06-18); url-only does not.
    return not (elicitation is None or (elicitation.form is None and elicitation.url is not None))


async def question_resolver(ctx: Context) -> Elicit[Confirm] | NotNeeded | CannotAsk:
    """Ask the user the current call's own question (`ToolSpec.ask`), when it has one."""
    from tool_servers.protocol.gate import current_call

    call = current_call()
    question = await call.spec.ask(call.args, call.context) if call.spec.ask is not None else None
    if question is None:
        return NotNeeded()
    if not can_elicit(ctx):
        return CannotAsk(question)
    return Elicit(question, Confirm)


ConfirmationParam = Annotated[ElicitationResult[Confirm], Resolve(confirmation_resolver)]
"""The annotation of the hidden parameter that carries the user's answer into a tool call."""

ReplyParam = Annotated[ElicitationResult[Confirm], Resolve(question_resolver)]
"""The annotation of the hidden parameter that carries the user's reply to `ToolSpec.ask`."""
