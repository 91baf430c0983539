"""The OpenTelemetry SDK, configured in one place for `serve`, `run` and `mcp`.

Nothing is configured unless asked for (`TelemetryConfig` from `codeloop.config.environment`):
- `OTEL_EXPORTER_OTLP_ENDPOINT` set: spans go to `<endpoint>/v1/traces` over OTLP/HTTP
  (protobuf), batched; the exporter's other standard variables (`OTEL_EXPORTER_OTLP_HEADERS`, ...)
  apply as usual.
- `CODELOOP_TRACE_FILE` set: every span is appended, as it ends, as one JSON line to that file
  (`JsonLinesSpanExporter`): the trace of a local run, several processes into one file.
Otherwise the global tracer provider stays the API's no-op one, every span in the code is
non-recording, and the model runs get no instrumentation at all.

Prompt and tool content stay out of spans by default; `CODELOOP_TRACE_CONTENT=1` puts it in.
"""

import fcntl
import json
import os
import socket
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from agents.runtime.role import RunObserver
from agents.runtime.tracing import instrumentation_observer
from codeloop.config.environment import TelemetryConfig

_active: TelemetryConfig | None = None


class JsonLinesSpanExporter(SpanExporter):
    """Appends each span as one JSON line (OpenTelemetry's own JSON form of a `ReadableSpan`).

    Several processes may write one file: each line is written with a single `write` under an
    exclusive lock, so lines never interleave.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        text = "".join(json.dumps(json.loads(span.to_json(indent=None))) + "\n" for span in spans)
        try:
            with self.path.open("a", encoding="utf-8") as out:
                fcntl.flock(out, fcntl.LOCK_EX)
                out.write(text)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def setup_telemetry(config: TelemetryConfig, *, process: str) -> bool:
    """Install the tracer provider `config` asks for, once per process; True if tracing is on.

    `process` names this process's part (`serve`, `run`, `mcp fs`) in the resource, beside
    `service.name=codeloop` and a `service.instance.id` of host and pid.
    """
    global _active
    if _active is not None:
        return True
    if not config.enabled:
        return False
    resource = Resource.create(
        {
            "service.name": "codeloop",
            "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
            "codeloop.process": process,
        }
    )
    provider = TracerProvider(resource=resource)
    if config.otlp_endpoint:
        # Only when asked for: the OTLP exporter brings protobuf and an HTTP client with it.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = config.otlp_endpoint.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    if config.trace_file:
        # Synchronous: a local file is cheap, and a killed process loses no finished span.
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(config.trace_file)))
    trace.set_tracer_provider(provider)  # flushed and shut down at exit (the SDK's atexit hook)
    _active = config
    return True


def tracing_observers() -> tuple[RunObserver, ...]:
    """The `RunObserver`s model runs get: pydantic-ai's instrumentation when tracing is on."""
    if _active is None:
        return ()
    return (instrumentation_observer(include_content=_active.include_content),)


__all__ = ["JsonLinesSpanExporter", "setup_telemetry", "tracing_observers"]
