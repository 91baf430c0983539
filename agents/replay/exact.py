"""The exact replay (`codeloop replay --recorded-tools`): every recorded run again, no tool executed.

Each recorded LLM run of the task is run again in this process, in the order the runs ended: an
agent with the role's output type (`Plan` for the planner, text for the coder), offered the
recorded tool definitions, whose model requests get the recorded responses and whose tool calls
get the recorded observations. Nothing reaches a tool server, a scratch workspace or the sandbox.
What it checks is the agent's side of the conversation: that today's output types, tool names and
retry rules accept the recorded conversation and produce the recorded outputs. A run that ends
differently — an error, another output, responses left over — is a divergence.

The task's patch and verdict are not re-derived (no tool writes, no verifier runs): the result is
the original task's, beside the divergences.
"""

from dataclasses import replace
from typing import NoReturn

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ValidatedToolArgs
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from agents.messages import Plan, TaskResult
from agents.models.adapter import silence_library_banner
from agents.replay.compare import Comparer
from agents.replay.errors import RecordingMissing
from agents.replay.model import Divergence, RecordedTool, RunRecording, excerpt
from agents.replay.observer import RunHooks, jsonable
from agents.replay.session import original_state
from agents.replay.store import load_runs
from agents.runtime.role import RunInfo
from bus.connection import Bus

OUTPUT_TYPES: dict[str, type[BaseModel]] = {"planner": Plan}
"""The output type of each LLM role's run; a role not listed answers in text (the coder)."""
TOOL_RETRIES = 3
_ANY_ARGS = SchemaValidator(schema=core_schema.any_schema())


class _RecordedTools(AbstractToolset[object]):
    """The tools a run was offered, as definitions only: their calls never reach `call_tool`
    (the replay hooks answer them from the recording)."""

    def __init__(self, tools: list[RecordedTool]) -> None:
        self._defs = [
            ToolDefinition(
                name=t["name"], description=t.get("description"), parameters_json_schema=t["parameters"]
            )
            for t in tools
        ]

    @property
    def id(self) -> str | None:
        return "recorded"

    async def get_tools(self, ctx: RunContext[object]) -> dict[str, ToolsetTool[object]]:
        return {
            d.name: ToolsetTool(
                toolset=self, tool_def=replace(d), max_retries=TOOL_RETRIES, args_validator=_ANY_ARGS
            )
            for d in self._defs
        }

    async def call_tool(
        self, name: str, tool_args: ValidatedToolArgs, ctx: RunContext[object], tool: ToolsetTool[object]
    ) -> NoReturn:
        raise RuntimeError(f"the exact replay executes no tool ({name} reached it)")


def _never_called(messages: object, info: object) -> ModelResponse:
    raise RuntimeError("the exact replay's model is never called: the recording answers")


async def replay_run(source: RunRecording, *, comparer: Comparer) -> list[Divergence]:
    """Run `source` again against itself; its divergences."""
    info = RunInfo(task_id=source.task_id, role=source.role, step_id=source.step_id)
    hooks = RunHooks(info, bus=None, comparer=comparer, source=source, recorded_tools=True)
    silence_library_banner()
    agent = Agent(
        FunctionModel(_never_called, model_name=f"replay:{source.task_id}"),
        output_type=OUTPUT_TYPES.get(source.role, str),
        toolsets=[_RecordedTools(source.tools)],
        capabilities=[hooks.hooks()],
        retries=2,
    )
    found: list[Divergence] = []

    def diverged(what: str, recorded: object = "", replayed: object = "") -> None:
        found.append(
            Divergence(
                step_id=source.step_id,
                role=source.role,
                what=what,
                recorded=excerpt(recorded),
                replayed=excerpt(replayed),
            )
        )

    try:
        result = await agent.run(source.prompt or "")
    except Exception as exc:
        if source.outcome == "ok":
            diverged("the run failed on replay", "ok", f"{type(exc).__name__}: {exc}")
        return (hooks.recording.divergences if hooks.recording else []) + found
    assert hooks.recording is not None
    found = hooks.recording.divergences + found
    if source.outcome != "ok":
        diverged("the run ended on replay; when recorded it did not", source.outcome, "ok")
    elif jsonable(result.output) != source.output:
        diverged("the run's output differs", source.output, jsonable(result.output))
    left = len(source.responses()) - hooks.requests
    if left > 0:
        diverged(f"the run ended with {left} recorded model responses unused")
    return found


async def exact_replay(bus: Bus, task_id: str) -> tuple[TaskResult, list[Divergence]]:
    """The original task's result and the divergences of every recorded run replayed exactly.

    Raises:
        RecordingMissing: no such task, no recording, or the task has not ended.
    """
    state = await original_state(bus, task_id)
    if state.result is None:
        raise RecordingMissing(f"task {task_id} has not ended ({state.status}); replay it when it has")
    comparer = Comparer()
    divergences: list[Divergence] = []
    for source in await load_runs(bus, task_id):
        divergences += await replay_run(source, comparer=comparer)
    return state.result, divergences
