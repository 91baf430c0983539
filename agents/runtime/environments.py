"""Which project environments a step's test runs used, as the exec server's results said.

`run_tests` results carry the environment the tests ran in (`environment`: key, recipe kind and
source, Python, whether this run built it and how long that took). `mcp_client` notes those of
every call it makes; `collecting()` (around a role's handler, `agents.observe.events.bind_step`)
gathers them for the step, and `stamp` puts them on the step's verification report when the role
did not, so the task record and the result say which environment judged the work. A role that
sets `VerificationReport.environment` itself is left as it is.
"""

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from pydantic import JsonValue, ValidationError

from agents.messages.steps import VerifyResult
from agents.messages.verification import EnvironmentUse
from bus.actor import Reply

TEST_TOOL = "run_tests"
_used: contextvars.ContextVar[list[EnvironmentUse] | None] = contextvars.ContextVar(
    "codeloop_environments_used", default=None
)


def note_tool_result(tool: str, structured: dict[str, JsonValue] | None) -> None:
    """Notes the environment of a `run_tests` result (its structured content) for the step
    collecting now; anything else, or no step collecting, is ignored."""
    found = _used.get()
    if tool != TEST_TOOL or found is None or not isinstance(structured, dict):
        return
    raw = structured.get("environment")
    if isinstance(raw, dict):
        try:
            found.append(EnvironmentUse.model_validate(raw))
        except ValidationError:
            return  # a server of another version: the report goes without it


@contextmanager
def collecting() -> Iterator[list[EnvironmentUse]]:
    """Gathers the environments noted while the block runs (its tasks included)."""
    found: list[EnvironmentUse] = []
    token = _used.set(found)
    try:
        yield found
    finally:
        _used.reset(token)


def summarize(uses: list[EnvironmentUse]) -> EnvironmentUse | None:
    """One account of a step's environments: the one a run had to build, else the first."""
    return next((use for use in uses if use.built), uses[0] if uses else None)


def stamp(result: Reply | list[Reply] | None, uses: list[EnvironmentUse]) -> Reply | list[Reply] | None:
    """`result` (a handler's replies) with `summarize(uses)` on each verification report lacking one."""
    use = summarize(uses)
    if use is None or result is None:
        return result
    replies = result if isinstance(result, list) else [result]
    stamped = []
    for reply in replies:
        payload = getattr(reply, "payload", None)
        if isinstance(payload, VerifyResult) and payload.report.environment is None:
            report = payload.report.model_copy(update={"environment": use})
            reply = replace(reply, payload=payload.model_copy(update={"report": report}))
        stamped.append(reply)
    return stamped if isinstance(result, list) else stamped[0]
