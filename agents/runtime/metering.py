"""The LLM roles' bookkeeping: their metered model, its calls as events, their usage as `Usage`."""

from datetime import UTC, datetime

from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage

from agents.budgets import budget_used_up
from agents.messages import ModelChain, StepBudget, TaskSubmitted, Usage
from agents.models.adapter import ModelCall, build_model
from agents.observe.events import current_step
from agents.runtime.role import RoleDeps
from bus import subjects
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import Event


def model_for(
    deps: RoleDeps, name: str | ModelChain, *, role: str, task_id: str, budget: StepBudget | None = None
) -> Model:
    """The role's model, each call published as a `model_call` event of the task (content only
    as a trimmed, redacted preview); with `budget`, it refuses a request once the step has spent
    what the task's cost budget had left (`CostBudgetExceeded`, class `budget.cost`)."""

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

    return build_model(
        name,
        role=role,
        on_call=publish,
        base_dir=deps.model_base_dir,
        local=deps.local_models,
        cost_limit_usd=budget.cost_usd if budget is not None else None,
    )


def usage_of(run_usage: RunUsage, model: Model) -> Usage:
    """A run's usage (pydantic-ai's `RunUsage`) with what its model spent: the cost is the sum of
    the metered calls' prices, the same figures the `model_call` events carry."""
    return Usage(
        requests=run_usage.requests,
        input_tokens=run_usage.input_tokens or 0,
        output_tokens=run_usage.output_tokens or 0,
        tool_calls=run_usage.tool_calls or 0,
        cost_usd=model.spend.spent_usd,  # type: ignore[attr-defined]  # build_model's models carry it
    )


def budget_stop_message(failure_class: str, task: TaskSubmitted, budget: StepBudget, used: RunUsage) -> str:
    """What ended a role's run at a step or token budget, in codeloop's words (`agents.budgets`):
    the task's budget, what all its steps used, and how to raise it. `budget` is what the step had
    left, `used` (pydantic-ai's `RunUsage`) what the run spent."""
    budgets = task.budgets
    if failure_class == "budget.tokens":
        spent = budgets.max_tokens - budget.tokens + (used.input_tokens or 0) + (used.output_tokens or 0)
    else:
        spent = budgets.max_steps - budget.requests + used.requests
    return budget_used_up(failure_class, budgets, used=spent)


def run_timeout_s(budget: StepBudget) -> float:
    """Seconds until the task's deadline (at least a moment, so the run itself reports it)."""
    return max(0.01, (budget.deadline_at - datetime.now(UTC)).total_seconds())
