"""The recorder: a `RunObserver` every LLM role's run gets, which records it and replays it.

Recording (always): every model response and every tool observation of the run, in order, into
`recording/<task_id>/<step_id>-<role>.json` when the run ends, however it ends.

Replaying (when the run's model is `replay:TASK_ID`): the model is never called; request N gets
the N-th recorded response of the same step and role of TASK_ID. Tools run as usual, and each
observation is compared with the recorded one for the same tool call; a difference is a
`Divergence`, stored in this run's own recording. With `recorded_tools` (the exact replay,
`agents/replay/exact.py`), no tool executes: each call gets the recorded observation.
"""

import logging
from datetime import UTC, datetime
from pathlib import Path

import anyio
from pydantic import JsonValue
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.capabilities import (
    Hooks,
    ValidatedToolArgs,
    WrapModelRequestHandler,
    WrapRunHandler,
    WrapToolExecuteHandler,
)
from pydantic_ai.exceptions import ToolRetryError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import ToolDefinition
from pydantic_core import to_jsonable_python

from agents.models.names import REPLAY_PREFIX
from agents.replay.compare import Comparer
from agents.replay.errors import RecordingMissing, ReplayError
from agents.replay.model import Divergence, Entry, Outcome, RecordedTool, RunRecording, excerpt, scrub
from agents.replay.store import load_run, save_run
from agents.runtime.role import RunInfo, RunObserver
from bus.connection import Bus

log = logging.getLogger("codeloop.agents.replay")
SAVE_TIMEOUT_S = 10.0


def recording_observer(bus: Bus, *, scratch_dir: Path | None = None) -> RunObserver:
    """The observer the composition root installs: records every run, replays `replay:` runs."""
    comparer = Comparer(scratch_dir=scratch_dir)

    def observe(info: RunInfo) -> Hooks:
        return RunHooks(info, bus=bus, comparer=comparer).hooks()

    return observe


def jsonable(value: object) -> JsonValue:
    """`value` as scrubbed JSON (what pydantic-ai hands the hooks is any Python value)."""
    return scrub(to_jsonable_python(value, fallback=str))


def recorded_tool(tool: ToolDefinition) -> RecordedTool:
    """The definition of a tool the model was offered, scrubbed as the rest of the recording."""
    return RecordedTool(
        name=scrub(tool.name),
        description=None if tool.description is None else scrub(tool.description),
        parameters=scrub(to_jsonable_python(tool.parameters_json_schema, fallback=str)),
    )


class RunHooks:
    """The hooks of one run; `source` and `recorded_tools` are set by the exact replay."""

    def __init__(
        self,
        info: RunInfo,
        *,
        bus: Bus | None,
        comparer: Comparer,
        source: RunRecording | None = None,
        recorded_tools: bool = False,
    ) -> None:
        self.info = info
        self.bus = bus
        self.comparer = comparer
        self.source = source
        self.recorded_tools = recorded_tools
        self.recording: RunRecording | None = None
        self.requests = 0

    def hooks(self) -> Hooks:
        return Hooks(run=self.run, model_request=self.model_request, tool_execute=self.tool_execute)

    def _add_response(self, response: ModelResponse) -> None:
        assert self.recording is not None
        self.recording.entries.append(
            Entry(
                seq=len(self.recording.entries),
                request=self.requests,
                kind="model_response",
                response=scrub(ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]),
            )
        )

    def _add_observation(
        self, call: ToolCallPart, args: JsonValue, outcome: Outcome | None, result: JsonValue
    ) -> Entry:
        assert self.recording is not None
        entry = Entry(
            seq=len(self.recording.entries),
            request=self.requests,
            kind="tool_result",
            tool=call.tool_name,
            tool_call_id=call.tool_call_id,
            args=args,
            outcome=outcome,
            result=result,
        )
        self.recording.entries.append(entry)
        return entry

    def diverged(self, what: str, *, call: ToolCallPart | None = None, request: int | None = None) -> None:
        assert self.recording is not None
        self.recording.divergences.append(
            Divergence(
                step_id=self.info.step_id,
                role=self.info.role,
                what=what,
                request=request,
                tool=call.tool_name if call else None,
                tool_call_id=call.tool_call_id if call else None,
            )
        )

    async def run(self, ctx: RunContext[object], *, handler: WrapRunHandler) -> AgentRunResult[object]:
        model = str(getattr(ctx.model, "name", None) or getattr(ctx.model, "model_name", ""))
        replay_of = self.source.task_id if self.source else None
        if model.startswith(REPLAY_PREFIX) and self.source is None:
            replay_of = model[len(REPLAY_PREFIX) :]
        self.recording = RunRecording(
            task_id=self.info.task_id,
            step_id=self.info.step_id,
            role=self.info.role,
            model=model,
            replay_of=replay_of,
            started_at=datetime.now(UTC),
        )
        try:
            if replay_of and self.source is None:
                assert self.bus is not None
                self.source = await load_run(self.bus, replay_of, self.info.step_id, self.info.role)
                if self.source is None:
                    what = (
                        f"task {replay_of} has no recorded {self.info.role} run for step {self.info.step_id}"
                    )
                    self.diverged(what)
                    raise RecordingMissing(what)
            result = await handler()
            self.recording.output = jsonable(result.output)
            self.recording.outcome = "ok"
            return result
        except BaseException as exc:
            self.recording.outcome = excerpt(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.recording.ended_at = datetime.now(UTC)
            await self._save()

    async def _save(self) -> None:
        if self.bus is None or self.recording is None:
            return
        # Shielded: a run ended by its deadline (a cancellation) is recorded too.
        with anyio.CancelScope(shield=True), anyio.move_on_after(SAVE_TIMEOUT_S):
            try:
                await save_run(self.bus, self.recording)
            except Exception as exc:  # a lost recording must not fail the step it describes
                log.warning("recording of %s %s not saved: %s", self.info.task_id, self.info.step_id, exc)

    async def model_request(
        self,
        ctx: RunContext[object],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        assert self.recording is not None
        self.requests += 1
        if self.requests == 1:
            self.recording.prompt = scrub(_prompt(request_context.messages))
            self.recording.tools = [
                recorded_tool(t) for t in request_context.model_request_parameters.function_tools
            ]
        if self.source is not None:
            recorded = self.source.responses()
            if self.requests > len(recorded):
                what = f"the replay made model request {self.requests}; the recording has {len(recorded)}"
                self.diverged(what, request=self.requests)
                raise ReplayError(what)
            response = ModelMessagesTypeAdapter.validate_python([recorded[self.requests - 1].response])[0]
            assert isinstance(response, ModelResponse)
        else:
            response = await handler(request_context)
        self._add_response(response)
        return response

    async def tool_execute(
        self,
        ctx: RunContext[object],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> object:
        """What the tool returned (or the recorded observation): pydantic-ai's to hand on, any value."""
        recorded = self.source.observations().get(call.tool_call_id) if self.source else None
        recorded_args = jsonable(args)
        if self.source is not None and recorded is None:
            self.diverged(
                "the replay made a tool call the recording does not have", call=call, request=self.requests
            )
            if self.recorded_tools:
                raise ReplayError(f"no recorded observation of {call.tool_name} ({call.tool_call_id})")
        if self.recorded_tools and recorded is not None:
            self._add_observation(call, recorded_args, recorded.outcome, recorded.result)
            if recorded.outcome == "retried":
                raise ModelRetry(str(recorded.result))
            if recorded.outcome == "error":
                raise ReplayError(f"the recorded {call.tool_name} call failed: {excerpt(recorded.result)}")
            return recorded.result
        outcome: Outcome = "error"
        value: JsonValue = None
        try:
            result = await handler(args)
            outcome, value = "ok", jsonable(result)
            return result
        except ToolRetryError as exc:
            outcome, value = "retried", scrub(str(getattr(exc.tool_retry, "content", exc)))
            raise
        except ModelRetry as exc:
            outcome, value = "retried", scrub(str(exc))
            raise
        except BaseException as exc:
            value = excerpt(scrub(f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            entry = self._add_observation(call, recorded_args, outcome, value)
            if recorded is not None:
                divergence = self.comparer.diverges(
                    recorded, entry, step_id=self.info.step_id, role=self.info.role
                )
                if divergence is not None and self.recording is not None:
                    self.recording.divergences.append(divergence)


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""
