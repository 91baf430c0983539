"""Prometheus metrics of a running `codeloop serve`, fed from the task events it sees.

The serve process subscribes to `codeloop.events.>` and counts what happens to every task on the
bus (not only its own roles' work): results by status and failure class, steps, revisions, model
requests with their tokens, cost and latency per role and model, tool calls and their latency per
tool, sandbox time, dead letters. What only the runtime knows comes from it directly: messages
settled per role (`ActorSpec.on_settled`) and each role's queue (its durable consumer's pending,
unacknowledged and redelivered messages, polled). `docs/observability.md` defines every metric.

Several serve processes on one bus each count every event they see: scrape one of them for the
task and model figures, each of them for its own settled messages.

`/metrics` is served by the HTTP app the health endpoint uses too (`codeloop.services.http_app`),
in the format the scraper's `Accept` header asks for (Prometheus text or OpenMetrics).
"""

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.consume import consumer_state
from bus.envelope import Envelope, parse_envelope
from bus.errors import MalformedMessage
from codeloop.services.http_app import Request, Response, Route, serve_http_app

log = logging.getLogger("codeloop")
LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    900.0,
)
QUEUE_POLL_S = 5.0
METRICS_PATH = "/metrics"
MAX_OPEN_STEPS = 10_000
"""Tasks whose running step is remembered (for step latency); the oldest are forgotten."""


@dataclass(frozen=True)
class MetricsServing:
    """Where `serve` exports its Prometheus metrics (port 0: a free one, printed and noted)."""

    host: str = "127.0.0.1"
    port: int = 0
    queue_poll_s: float = QUEUE_POLL_S


def _model_label(name: object) -> str:
    # `function:/abs/path/script.py:NAME` -> `function:script.py:NAME`: paths say nothing useful
    text = str(name or "unknown")
    if text.startswith("function:"):
        path, _, attr = text.removeprefix("function:").rpartition(":")
        text = f"function:{path.rsplit('/', 1)[-1]}:{attr}"
    return text[:120]


@dataclass
class _OpenStep:
    role: str
    started: float


@dataclass
class Metrics:
    """Every metric `codeloop serve` exports, in its own registry."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.events = Counter("codeloop_events", "Task events seen, by kind.", ["kind"], registry=r)
        self.tasks = Counter(
            "codeloop_tasks",
            "Tasks ended, by status and failure class ('' when none).",
            ["status", "failure_class"],
            registry=r,
        )
        self.steps = Counter(
            "codeloop_steps", "Steps dispatched, by role and stage.", ["role", "stage"], registry=r
        )
        self.revisions = Counter(
            "codeloop_revisions", "Verifications that sent a patch back for revision.", registry=r
        )
        self.plans = Counter(
            "codeloop_plans", "Plans made; revised = replaced an earlier plan.", ["revised"], registry=r
        )
        self.step_seconds = Histogram(
            "codeloop_step_seconds",
            "Wall time of a step, from its dispatch to the next transition, by role.",
            ["role"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.model_requests = Counter(
            "codeloop_model_requests",
            "Model requests, by role, model and outcome.",
            ["role", "model", "outcome"],
            registry=r,
        )
        self.model_tokens = Counter(
            "codeloop_model_tokens",
            "Model tokens, by role, model and direction (input, output).",
            ["role", "model", "direction"],
            registry=r,
        )
        self.model_cost = Counter(
            "codeloop_model_cost_usd",
            "Model spend in US dollars where the price is known.",
            ["role", "model"],
            registry=r,
        )
        self.model_seconds = Histogram(
            "codeloop_model_request_seconds",
            "Latency of a model request (retries included), by role and model.",
            ["role", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tool_calls = Counter(
            "codeloop_tool_calls",
            "Tool calls, by role, server, tool and outcome (ok, refused, error).",
            ["role", "server", "tool", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "codeloop_tool_call_seconds",
            "Duration of a tool call, by server and tool.",
            ["server", "tool"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.sandbox_seconds = Counter(
            "codeloop_sandbox_seconds",
            "Time spent in calls of the exec (sandbox) server, by tool.",
            ["tool"],
            registry=r,
        )
        self.dead_letters = Counter(
            "codeloop_dead_letters", "Messages given up, by reason.", ["reason"], registry=r
        )
        self.settled = Counter(
            "codeloop_messages_settled",
            "Messages this process's workers settled, by role and outcome (acked, skipped, naked, dead_lettered).",
            ["role", "outcome"],
            registry=r,
        )
        self.queue_pending = Gauge(
            "codeloop_queue_depth", "Messages waiting for a role's workers.", ["role"], registry=r
        )
        self.queue_unacked = Gauge(
            "codeloop_queue_unacked",
            "Messages a role's workers hold, not yet acknowledged.",
            ["role"],
            registry=r,
        )
        self.queue_redelivered = Gauge(
            "codeloop_queue_redelivered",
            "Messages of a role delivered more than once and still unacknowledged.",
            ["role"],
            registry=r,
        )
        self._open: dict[str, _OpenStep] = {}
        self._lock = threading.Lock()

    # ── from the runtime ────────────────────────────────────────────────────────────────────────
    def on_settled(self, role: str) -> Callable[[str, str], None]:
        def settled(_message_id: str, outcome: str) -> None:
            self.settled.labels(role, outcome).inc()

        return settled

    # ── from the events ─────────────────────────────────────────────────────────────────────────
    def observe(self, envelope: Envelope, *, now: float | None = None) -> None:
        """Count one envelope of the events stream."""
        now = time.monotonic() if now is None else now
        payload = envelope.payload
        if envelope.kind == "dead_letter":
            self.events.labels("dead_letter").inc()
            self.dead_letters.labels(str(payload.get("reason", "unknown"))).inc()
            return
        if envelope.kind == "task_result":
            self.events.labels("result").inc()
            self.tasks.labels(str(payload.get("status")), str(payload.get("failure_class") or "")).inc()
            self._close_step(envelope.task_id, now)
            return
        if envelope.kind != "event":
            return
        name = str(payload.get("name", ""))
        data = payload.get("data") or {}
        self.events.labels(name[:60]).inc()
        handler = _BY_NAME.get(name)
        if handler is not None:
            handler(self, envelope.task_id, data, now)

    def _transition(self, task_id: str, data: dict, now: float) -> None:
        self._close_step(task_id, now)
        status = data.get("status")
        if status == "revising":
            self.revisions.inc()
        if data.get("step_id") and data.get("role"):
            role = str(data["role"])
            self.steps.labels(role, str(data.get("stage") or "")).inc()
            with self._lock:
                if len(self._open) >= MAX_OPEN_STEPS:
                    self._open.pop(next(iter(self._open)))
                self._open[task_id] = _OpenStep(role, now)

    def _close_step(self, task_id: str, now: float) -> None:
        with self._lock:
            step = self._open.pop(task_id, None)
        if step is not None:
            self.step_seconds.labels(step.role).observe(max(0.0, now - step.started))

    def _plan(self, task_id: str, data: dict, now: float) -> None:
        plan = data.get("plan") or {}
        self.plans.labels("true" if plan.get("revision_reason") else "false").inc()

    def _model_call(self, task_id: str, data: dict, now: float) -> None:
        role, model = str(data.get("role") or "unknown"), _model_label(data.get("model"))
        self.model_requests.labels(role, model, str(data.get("outcome") or "unknown")).inc()
        self.model_tokens.labels(role, model, "input").inc(max(0, int(data.get("input_tokens") or 0)))
        self.model_tokens.labels(role, model, "output").inc(max(0, int(data.get("output_tokens") or 0)))
        if data.get("cost_usd") is not None:
            self.model_cost.labels(role, model).inc(max(0.0, float(data["cost_usd"])))
        self.model_seconds.labels(role, model).observe(max(0.0, float(data.get("latency_s") or 0.0)))

    def _tool_call(self, task_id: str, data: dict, now: float) -> None:
        server, tool = str(data.get("server") or "unknown"), str(data.get("tool") or "unknown")
        role = str(data.get("role") or data.get("principal") or "unknown")
        seconds = max(0.0, float(data.get("duration_ms") or 0.0) / 1000)
        self.tool_calls.labels(role, server, tool, str(data.get("outcome") or "unknown")).inc()
        self.tool_seconds.labels(server, tool).observe(seconds)
        if server == "exec":
            self.sandbox_seconds.labels(tool).inc(seconds)


_BY_NAME = {
    "transition": Metrics._transition,
    "plan": Metrics._plan,
    "model_call": Metrics._model_call,
    "tool_call": Metrics._tool_call,
}


async def follow_events(
    bus: Bus, metrics: Metrics, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Count every envelope published on `codeloop.events.>` from now on, until cancelled."""
    with nats_errors():
        sub = await bus.nc.subscribe(subjects.EVENTS_ALL)
    try:
        task_status.started()
        while True:
            try:
                with nats_errors():
                    msg = await sub.next_msg(timeout=None)
            except TimeoutError:
                continue
            try:
                metrics.observe(parse_envelope(msg.data))
            except MalformedMessage:
                continue
    finally:
        with anyio.CancelScope(shield=True):
            if not bus.nc.is_closed:
                try:
                    await sub.unsubscribe()
                except Exception:  # closing on the way out: nothing to do about it
                    pass


async def poll_queues(
    bus: Bus, metrics: Metrics, addresses: Sequence[subjects.RoleAddress], *, interval_s: float = QUEUE_POLL_S
) -> None:
    """Update the queue gauges of `addresses` every `interval_s` until cancelled."""
    while True:
        for address in addresses:
            try:
                state = await consumer_state(bus, address.stream, address.durable)
            except Exception as exc:  # a gauge left stale, never a crash
                log.debug("queue of %s not read: %s", address.role, exc)
                continue
            metrics.queue_pending.labels(address.role).set(state.pending)
            metrics.queue_unacked.labels(address.role).set(state.unacked)
            metrics.queue_redelivered.labels(address.role).set(state.redelivered)
        await anyio.sleep(interval_s)


def metrics_routes(metrics: Metrics) -> dict[str, Route]:
    """`/metrics`: every metric of `metrics`, encoded as the request's `Accept` header asks."""

    def scrape(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(200, encoder(metrics.registry), content_type)

    return {METRICS_PATH: scrape}


async def serve_metrics(
    metrics: Metrics,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `/metrics` on `host:port` (0: a free port) until cancelled; `task_status.started(URL)`.

    Raises:
        OSError: the port could not be bound.
    """

    async def serve(*, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        await serve_http_app(metrics_routes(metrics), host=host, port=port, task_status=task_status)

    async with anyio.create_task_group() as tg:
        base = await tg.start(serve)
        task_status.started(base + METRICS_PATH)


__all__ = ["Metrics", "MetricsServing", "follow_events", "metrics_routes", "poll_queues", "serve_metrics"]
