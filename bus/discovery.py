"""Which workers are alive: every worker registers as a NATS micro service.

A worker of role R (built-in, plug-in, or a program in another language) runs a micro service
named R (`$SRV.PING`, `$SRV.INFO`, `$SRV.STATS` answer for it) whose metadata says what it is:

    codeloop_role            R
    codeloop_stage_kind      the stage kind it serves (plan, retrieve, code, review, verify, ...)
    codeloop_schema_version  the message schema version it speaks (`codeloop schema`)
    codeloop_host, codeloop_pid   where the worker runs (optional for foreign workers)

and one endpoint, `status`, on `codeloop.workers.<R>.<service id>`, whose stats `data` carry
`{"requests": N, "errors": N, "in_flight": N}`: the work messages it took, those that failed
(a `step_failed` reply or a handler error), and those in hand. `discover` asks every service on
the bus for its stats at once and keeps the codeloop workers' answers.

A worker refuses to start when the orchestrator on its bus speaks another schema version
(`check_schema`), and the orchestrator counts a worker of another version as no worker (the
task says so while it waits); envelopes of another version are dead-lettered by the runtime.
"""

import json
import logging
import os
import socket
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import nats.errors
from nats.micro import add_service  # pyright: ignore[reportUnknownVariableType] - nats-py types the stats handler as a bare Callable
from pydantic import JsonValue

from bus.actor import ActorSpec, Delivery, Reply
from bus.connection import Bus, nats_errors
from bus.errors import BusError
from bus.messages import SCHEMA_VERSION, Message

log = logging.getLogger("codeloop.bus")
META_ROLE = "codeloop_role"
META_KIND = "codeloop_stage_kind"
META_SCHEMA = "codeloop_schema_version"
META_HOST = "codeloop_host"
META_PID = "codeloop_pid"
ORCHESTRATOR_KIND = "orchestrator"
DISCOVER_WAIT_S = 0.5
"""How long `discover` collects answers: every live service answers within milliseconds."""


class SchemaMismatch(BusError):
    """The bus's orchestrator speaks another message schema version than this worker."""


@dataclass
class WorkCounts:
    """What one worker did, as its discovery stats report it."""

    requests: int = 0
    errors: int = 0
    in_flight: int = 0

    def as_data(self) -> dict[str, int]:
        return {"requests": self.requests, "errors": self.errors, "in_flight": self.in_flight}


@dataclass(frozen=True)
class WorkerInfo:
    """One live worker, as it answered `$SRV.STATS`."""

    id: str
    role: str
    kind: str
    version: str
    schema_version: int | None
    requests: int = 0
    errors: int = 0
    in_flight: int = 0
    started: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def compatible(self) -> bool:
        return self.schema_version == SCHEMA_VERSION

    def as_json(self) -> dict[str, JsonValue]:
        return {
            "id": self.id,
            "role": self.role,
            "stage_kind": self.kind,
            "version": self.version,
            "schema_version": self.schema_version,
            "compatible": self.compatible,
            "requests": self.requests,
            "errors": self.errors,
            "in_flight": self.in_flight,
            "started": self.started,
            "host": self.metadata.get(META_HOST),
            "pid": _int(self.metadata.get(META_PID)),
        }


def counted(spec: ActorSpec, counts: WorkCounts, *, failed: Callable[[Message], bool]) -> ActorSpec:
    """`spec` whose handler keeps `counts`; `failed(reply_payload)` tells a failure reply."""
    inner = spec.handler

    async def handler(delivery: Delivery) -> Reply | list[Reply] | None:
        counts.requests += 1
        counts.in_flight += 1
        try:
            replies = await inner(delivery)
        except BaseException:
            counts.errors += 1
            raise
        finally:
            counts.in_flight -= 1
        listed = replies if isinstance(replies, list) else [replies] if replies is not None else []
        if any(failed(reply.payload) for reply in listed):
            counts.errors += 1
        return replies

    return replace(spec, handler=handler)


@asynccontextmanager
async def advertise(
    bus: Bus, *, role: str, kind: str, version: str, counts: WorkCounts, description: str = ""
) -> AsyncGenerator[str, None]:
    """Register this worker as a micro service for its life; yields the service id."""
    from nats.micro.request import Request

    async def status(request: Request) -> None:
        await request.respond(json.dumps({"role": role, **counts.as_data()}).encode())

    with nats_errors():
        service = await add_service(
            bus.nc,
            name=role,
            version=version,
            description=description or f"codeloop {kind} role {role}",
            metadata={
                META_ROLE: role,
                META_KIND: kind,
                META_SCHEMA: str(SCHEMA_VERSION),
                META_HOST: socket.gethostname(),
                META_PID: str(os.getpid()),
            },
            stats_handler=lambda _endpoint: counts.as_data(),  # pyright: ignore[reportUnknownLambdaType] - nats-py types the stats handler as a bare Callable
        )
        try:
            await service.add_endpoint(
                name="status", subject=f"codeloop.workers.{role}.{service.id}", handler=status
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await service.stop()
            raise
    try:
        yield service.id
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            if not bus.nc.is_closed:
                try:
                    await service.stop()
                except nats.errors.Error as exc:
                    log.debug("stopping the discovery service of %s: %s", role, exc)


async def discover(bus: Bus, *, wait_s: float = DISCOVER_WAIT_S) -> list[WorkerInfo]:
    """Every live codeloop worker (and orchestrator) on the bus, from one `$SRV.STATS` broadcast."""
    nc = bus.nc
    inbox = nc.new_inbox()
    answers: list[bytes] = []
    with nats_errors():
        sub = await nc.subscribe(inbox)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callback as a bare Callable
        try:
            await nc.publish("$SRV.STATS", b"", reply=inbox)
            await nc.flush()
            with anyio.move_on_after(wait_s):
                while True:
                    try:
                        msg = await sub.next_msg(timeout=wait_s)
                    except nats.errors.TimeoutError:
                        break
                    answers.append(msg.data)
        finally:
            with anyio.CancelScope(shield=True):
                if not nc.is_closed:
                    await sub.unsubscribe()
    workers = [w for w in (_worker(data) for data in answers) if w is not None]
    return sorted(workers, key=lambda w: (w.role, w.started or "", w.id))


def _worker(data: bytes) -> WorkerInfo | None:
    try:
        stats = json.loads(data)
        meta: dict[str, Any] = stats.get("metadata") or {}
        role = meta.get(META_ROLE)
        if not role:
            return None  # some other micro service on the same bus
        try:
            schema = int(meta.get(META_SCHEMA, ""))
        except ValueError:
            schema = None
        totals = WorkCounts()
        endpoints: list[dict[str, Any]] = stats.get("endpoints") or []
        for endpoint in endpoints:
            extra: dict[str, Any] = endpoint.get("data") or {}
            totals.requests += int(extra.get("requests", endpoint.get("num_requests", 0)) or 0)
            totals.errors += int(extra.get("errors", endpoint.get("num_errors", 0)) or 0)
            totals.in_flight += int(extra.get("in_flight", 0) or 0)
        return WorkerInfo(
            id=str(stats.get("id", "")),
            role=role,
            kind=meta.get(META_KIND, "?"),
            version=str(stats.get("version", "")),
            schema_version=schema,
            requests=totals.requests,
            errors=totals.errors,
            in_flight=totals.in_flight,
            started=stats.get("started"),
            metadata=dict(meta),
        )
    except (ValueError, TypeError, AttributeError):
        return None  # an answer we cannot read is not a worker we can count on


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def live_roles(workers: list[WorkerInfo]) -> set[str]:
    """Roles with at least one live worker that speaks our schema version."""
    return {w.role for w in workers if w.compatible and w.kind != ORCHESTRATOR_KIND}


async def check_schema(bus: Bus, role: str) -> None:
    """Refuse to work for an orchestrator that speaks another schema version.

    Raises:
        SchemaMismatch: saying which versions, and what to do.
    """
    others = [w for w in await discover(bus) if w.kind == ORCHESTRATOR_KIND and not w.compatible]
    if others:
        raise SchemaMismatch(
            f"the orchestrator on this bus speaks message schema version {others[0].schema_version}; "
            f"this {role} worker speaks {SCHEMA_VERSION}: run the same codeloop version on both sides "
            "(`codeloop schema` prints the version each speaks)"
        )


def waiting_reason(role: str, workers: list[WorkerInfo]) -> str | None:
    """Why a stage of `role` cannot be taken now (`waiting for a worker of role X ...`), or None."""
    of_role = [w for w in workers if w.role == role]
    if any(w.compatible for w in of_role):
        return None
    reason = f"waiting for a worker of role {role}"
    if of_role:
        versions = sorted({str(w.schema_version) for w in of_role})
        reason += (
            f" (refused {len(of_role)} worker(s) speaking schema version {', '.join(versions)}; "
            f"this orchestrator speaks {SCHEMA_VERSION})"
        )
    return reason
