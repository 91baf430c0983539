"""A `select` plug-in role for the attempts tests: it always chooses the first attempt, so a test
can tell its choice from the built-in selector's."""

from agents.messages import SelectRequest, SelectResult
from agents.runtime.api import RoleContext, define_role


async def first(request: SelectRequest, ctx: RoleContext) -> SelectResult:
    first_made = min(c.attempt for c in request.candidates)
    return SelectResult(step_id=request.step_id, chosen=first_made, reason="the first attempt, always")


FIRST_PICKER = define_role("first-picker", "select", first, version="0.1.0")
