"""The agents' spans: the orchestrator's workflow, each role's run, each model and tool call.

Span names and attributes follow the OpenTelemetry GenAI conventions as far as they go:
- `invoke_workflow codeloop` — one span per orchestrator *handling* (a submission, a result, a
  cancel), `gen_ai.operation.name=invoke_workflow`. Not one span from claim to end: the
  orchestrator is a pure transition over a record in a KV bucket, run by whichever orchestrator
  process gets the message; the one that claimed a task may crash and another take over, and a
  task waits minutes between handlings with nothing in memory. A span lives in one process's
  memory from start to end, so a task-long span would be lost with the first crash or invented
  after the fact. What ties the handlings together is the trace id, which is the task's
  (`Envelope.trace_id`), and their parent chain: each handling is a child of the worker run whose
  result it handles, each worker run a child of the handling that dispatched it (`bus.tracing`).
- `invoke_agent <role>` — a role's run. For the LLM roles this is pydantic-ai's own run span
  (their `Agent` is named after the role), installed through the `RunObserver` seam
  (`instrumentation_observer`) with `chat <model>` spans for each model request
  (`gen_ai.request.model`, `gen_ai.provider.name`, `gen_ai.usage.*`) and `execute_tool <tool>`
  spans (`gen_ai.tool.name`). The roles without a model (retriever, verifier) get one from
  `role_handler`, so every role's work shows under the same name.
- The tool servers' own `tools/call <tool>` spans: the mcp SDK puts the context in `_meta` and
  its server middleware opens a span under it, in this process or in a stdio server's.

Prompt and tool content stay out of spans unless asked for (`include_content`): pydantic-ai's
instrumentation then records no messages, arguments or results, and our own spans carry ids,
names and counts only.
"""

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from opentelemetry import context, trace

from agents.runtime.role import RunInfo, RunObserver
from bus.actor import ActorSpec, Delivery, Handler, Reply

if TYPE_CHECKING:
    from pydantic_ai.capabilities import Instrumentation

_tracer = trace.get_tracer("codeloop.agents")
WORKFLOW = "codeloop"


def instrumentation_observer(
    *, include_content: bool = False, tracer_provider: trace.TracerProvider | None = None
) -> RunObserver:
    """A `RunObserver` giving every model run pydantic-ai's instrumentation (by default through
    the global tracer provider)."""
    # Here, not at the top: pydantic-ai takes seconds to import, and only a process whose
    # telemetry is set up builds this observer.
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    settings = InstrumentationSettings(
        tracer_provider=tracer_provider,
        include_content=include_content,
        include_binary_content=include_content,
        include_model_request_parameters=include_content,
    )

    def observe(info: RunInfo) -> "Instrumentation":
        return Instrumentation(settings=settings)

    return observe


@contextmanager
def untraced() -> Iterator[None]:
    """Work that is no task's (a verifier's spare being prepared): it runs under a parent that is
    not sampled, so its spans (the mcp SDK's included, through `_meta`) are not recorded and a
    trace holds only the spans of its task."""
    ids = random.getrandbits(128) or 1, random.getrandbits(64) or 1
    parent = trace.NonRecordingSpan(trace.SpanContext(*ids, is_remote=False, trace_flags=trace.TraceFlags(0)))
    token = context.attach(trace.set_span_in_context(parent))
    try:
        yield
    finally:
        context.detach(token)


def _replies_of(result: "Reply | list[Reply] | None") -> list[Reply]:
    if result is None:
        return []
    return [result] if isinstance(result, Reply) else list(result)


def workflow_handler(handler: Handler) -> Handler:
    """The orchestrator's handler inside an `invoke_workflow` span per handling."""

    async def handle(delivery: Delivery) -> Reply | list[Reply] | None:
        envelope = delivery.envelope
        with _tracer.start_as_current_span(
            f"invoke_workflow {WORKFLOW}",
            attributes={
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": WORKFLOW,
                "codeloop.task.id": envelope.task_id,
                "codeloop.message.kind": envelope.kind,
            },
        ) as span:
            result = await handler(delivery)
            replies = _replies_of(result)
            dispatched = sorted({r.subject.rsplit(".", 1)[-1] for r in replies if ".work." in r.subject})
            span.set_attribute("codeloop.replies", len(replies))
            if dispatched:
                span.set_attribute("codeloop.dispatched", dispatched)
            return result

    return handle


def role_handler(role: str, handler: Handler) -> Handler:
    """A role without a model: its handler inside an `invoke_agent <role>` span."""

    async def handle(delivery: Delivery) -> Reply | list[Reply] | None:
        envelope = delivery.envelope
        with _tracer.start_as_current_span(
            f"invoke_agent {role}",
            kind=trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": role,
                "codeloop.task.id": envelope.task_id,
                "codeloop.step.id": str(envelope.payload.get("step_id", "")),
            },
        ):
            return await handler(delivery)

    return handle


MODEL_ROLES = frozenset({"planner", "coder"})
"""Roles whose run span pydantic-ai makes (`instrumentation_observer`)."""


def traced(spec: ActorSpec) -> ActorSpec:
    """`spec` with its spans: `invoke_workflow` for the orchestrator, `invoke_agent` for a role
    without a model; the LLM roles' run spans come from their model runs."""
    role = spec.address.role
    if role == "orchestrator":
        return replace(spec, handler=workflow_handler(spec.handler))
    if role in MODEL_ROLES:
        return spec
    return replace(spec, handler=role_handler(role, spec.handler))


__all__ = ["MODEL_ROLES", "instrumentation_observer", "role_handler", "traced", "workflow_handler"]
