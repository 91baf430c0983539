"""Trace context across NATS: W3C `traceparent`/`tracestate` in message headers, one trace per task.

nats-py carries no trace context, so the bus does it: `Bus.publish` adds the current context's
headers (`trace_headers`), and the actor runtime opens a CONSUMER span around each handler run
whose parent is the context the message carried (`handling_span`). A worker's spans are thereby
children of the orchestrator's handling that dispatched the step, and the orchestrator's handling
of a result a child of the worker's run.

A task's trace id is its envelope's `trace_id` (32 hex digits, the OpenTelemetry format). A
message whose headers carry no context of that trace — a submission from a client that does not
trace, or one that traces under its own trace id — is parented on the *task context*: a remote
span context made from the trace id with a span id derived from it. Every process computes the
same one, so all handlings of a task share one trace even when the orchestrator that claimed it
crashed and another finished it. No span with that derived id is ever exported: it stands for the
task as a whole (see `agents/runtime/tracing.py` on why there is no single task-long span).

Only opentelemetry-api is used here: with no tracer provider configured (the default) spans are
non-recording and all of this costs a few microseconds per message.
"""

import hashlib
from collections.abc import Generator, Mapping
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer = trace.get_tracer("codeloop.bus")


def trace_headers() -> dict[str, str]:
    """`traceparent` (and `tracestate`) of the current span; empty when there is none."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def trace_id_int(trace_id: str) -> int | None:
    """The envelope's trace id as OpenTelemetry's 128-bit integer; None if it is not 32 hex digits."""
    if len(trace_id) != 32:
        return None
    try:
        value = int(trace_id, 16)
    except ValueError:
        return None
    return value or None


def task_context(trace_id: str) -> Context | None:
    """The parent every untraced message of the task gets: its trace id, a span id derived from it."""
    value = trace_id_int(trace_id)
    if value is None:
        return None
    span_id = int.from_bytes(hashlib.sha256(f"task/{trace_id}".encode()).digest()[:8], "big") or 1
    parent = trace.SpanContext(
        trace_id=value,
        span_id=span_id,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def incoming_context(headers: Mapping[str, str] | None, trace_id: str) -> Context | None:
    """The context a message carried if it belongs to the task's trace, else the task context."""
    if headers:
        extracted = _PROPAGATOR.extract(dict(headers))
        carried = trace.get_current_span(extracted).get_span_context()
        if carried.is_valid and carried.trace_id == trace_id_int(trace_id):
            return extracted
    return task_context(trace_id)


@contextmanager
def handling_span(
    *,
    subject: str,
    headers: Mapping[str, str] | None,
    trace_id: str,
    attributes: Mapping[str, AttributeValue],
) -> Generator[trace.Span, None, None]:
    """The CONSUMER span of one handler run (messaging conventions: `process <destination>`)."""
    with _tracer.start_as_current_span(
        f"process {subject}",
        context=incoming_context(headers, trace_id),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "nats",
            "messaging.operation.type": "process",
            "messaging.destination.name": subject,
            **attributes,
        },
        # An exception's message may quote content (a tool's output, a path): only its type goes
        # into the span.
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(trace.StatusCode.ERROR)
            raise
