"""The LLM roles' bookkeeping: their metered model, its calls as events, their usage as `Usage`."""

from datetime import UTC, datetime
from typing import Any

from agents.messages import StepBudget, Usage
from agents.models import ModelCall, build_model
from agents.observe.events import current_step
from agents.role import RoleDeps
from bus import subjects
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import Event


def model_for(deps: RoleDeps, name: str, *, role: str, task_id: str) -> Any:
    """The role's model, each call published as a `model_call` event of the task (content only
    as a trimmed, redacted preview)."""

    async def publish(call: ModelCall) -> None:
        # The step running this model (set around every role handler) names the step and trace.
        step = current_step.get()
        step = step if step is not None and step.task_id == task_id else None
        event = Event(
            name="model_call",
            message=f"{role} called {call.model}: {call.outcome}, "
            f"{call.input_tokens}+{call.output_tokens} tokens, {call.latency_s:.2f} s",
            data=call.model_dump(mode="json", exclude={"output_preview"})
            | {"step_id": step.step_id if step else None, "trace_id": step.trace_id if step else None},
        )
        envelope = Envelope.wrap(event, task_id=task_id, trace_id=step.trace_id if step else None)
        try:
            await deps.bus.publish(subjects.event(task_id, "model_call"), envelope)
        except BusError:
            pass  # an event lost to a bus hiccup must not fail the model call it describes

    return build_model(name, role=role, on_call=publish, base_dir=deps.model_base_dir)


def usage_of(result: Any) -> Usage:
    usage = result.usage
    return Usage(
        requests=usage.requests,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        tool_calls=usage.tool_calls or 0,
    )


def run_timeout_s(budget: StepBudget) -> float:
    """Seconds until the task's deadline (at least a moment, so the run itself reports it)."""
    return max(0.01, (budget.deadline_at - datetime.now(UTC)).total_seconds())
