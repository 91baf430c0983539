"""What a recording holds: one JSON document per LLM run (one role's step of a task).

A document lists, in the order they happened, every model response and every tool observation
of the run, each with the number of the model request it belongs to. It also keeps what an exact
replay needs without the tool servers: the prompt, the tool definitions offered, and the output.
Everything in it has passed `scrub` first: recordings are data a person may read.
"""

import json
from datetime import datetime
from typing import Literal, overload

from pydantic import BaseModel, JsonValue
from typing_extensions import TypedDict  # pydantic validates only this one before Python 3.12

from agents.models._redact import _redact, trim

EXCERPT_CHARS = 300
"""Longest excerpt of an observation a divergence quotes."""
Outcome = Literal["ok", "retried", "error"]
"""How a tool call ended: it returned, it refused (the model was asked again), it raised."""


@overload
def scrub(value: str) -> str: ...
@overload
def scrub(value: dict[str, JsonValue]) -> dict[str, JsonValue]: ...
@overload
def scrub(value: JsonValue) -> JsonValue: ...
def scrub(value: JsonValue) -> JsonValue:
    """`value` (JSON-like) with every string passed through the redaction seam.

    The one place recordings are redacted (with the project's redaction rule): a replay reproduces
    what was recorded, so a secret a model or a tool once returned is masked there too."""
    if isinstance(value, str):
        return _redact(value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """`value` as redacted text of at most about `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return trim(_redact(text), limit)


class RecordedTool(TypedDict):
    """A tool definition the model was offered, as recorded."""

    name: str
    description: str | None
    parameters: dict[str, JsonValue]
    """The tool's parameters JSON schema."""


class Entry(BaseModel):
    """One thing that happened in a run: a model response or a tool observation."""

    seq: int
    """Position in the run (0-based), over both kinds."""
    request: int
    """The model request (1-based) this response is the answer to, or whose tool call this observes."""
    kind: Literal["model_response", "tool_result"]
    response: JsonValue = None
    """The `ModelResponse` as pydantic-ai's JSON (model_response)."""
    tool: str | None = None
    tool_call_id: str | None = None
    args: JsonValue = None
    outcome: Outcome | None = None
    """ok: the tool returned; retried: it refused and the model was asked again; error: it raised."""
    result: JsonValue = None
    """What the tool returned (JSON), or the refusal or error message."""


class Divergence(BaseModel):
    """An observation of the replay that differs from the recording (or a step the recording lacks)."""

    step_id: str
    role: str
    request: int | None = None
    """The model request whose tool call diverged."""
    tool: str | None = None
    tool_call_id: str | None = None
    what: str
    """What differed, in words."""
    recorded: str = ""
    """The recorded observation, trimmed."""
    replayed: str = ""
    """The replay's observation, trimmed."""


class RunRecording(BaseModel):
    """The recording of one LLM run: `recording/<task_id>/<step_id>-<role>.json`."""

    task_id: str
    step_id: str
    role: str
    model: str
    """The model name the run used (`replay:TASK_ID` for a replay)."""
    replay_of: str | None = None
    """The task whose recording this run replayed."""
    started_at: datetime
    ended_at: datetime | None = None
    outcome: str = "running"
    """ok, or the exception that ended the run (a limit, a loop, a model failure)."""
    prompt: str | None = None
    tools: list[RecordedTool] = []
    """The tool definitions the model was offered (name, description, parameters schema)."""
    output: JsonValue = None
    """The run's output: the plan (planner) or the final text (coder)."""
    entries: list[Entry] = []
    divergences: list[Divergence] = []

    def responses(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "model_response"]

    def observations(self) -> dict[str, Entry]:
        return {e.tool_call_id: e for e in self.entries if e.kind == "tool_result" and e.tool_call_id}


class IndexEntry(BaseModel):
    step_id: str
    role: str
    name: str
    """Object name of the run's recording."""


class RecordingIndex(BaseModel):
    """`recording/<task_id>/index.json`: the task's recorded runs, in the order they ended."""

    task_id: str
    runs: list[IndexEntry] = []
