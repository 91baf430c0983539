"""The composition root: which actors this process runs, on which bus.

`serve()` starts the embedded nats-server (or uses `--nats URL`), makes sure the streams exist,
and runs the roles of this process, each under a supervisor, in one task group. Unless told
otherwise it also hosts the tool servers over HTTP (`codeloop.hosted_mcp`), their audit records
published as `tool_call` events (`codeloop.audit_events`). On `stop` it drains: no new fetches,
in-flight messages finish and are acked; a second stop (or the grace period running out)
cancels, which hands in-flight messages back to JetStream and stops the HTTP servers.

One `serve` per state directory: it holds the directory's lock for its life (`bus.state_lock`),
so a second one is refused before it touches the first one's server or notes. The embedded
server is watched: if it dies it is restarted on the same store and port (clients reconnect), and
if it cannot be, `serve` ends saying so and where the server's log is.
"""

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from agents.observe.events import bind_step
from agents.observe.tool_events import ObservedTools, tool_call_observer
from agents.orchestrator import Pipeline, orchestrator_spec
from agents.orchestrator.records import TaskRecords
from agents.orchestrator.rejections import watch_rejections
from agents.orchestrator.waiting import watch_waiting
from agents.replay.observer import recording_observer
from agents.roles.verifier.spares import VERIFIER_SPARES, VerifierSpares
from agents.runtime.plugins import RoleRegistry, load_roles
from agents.runtime.role import Capability, RoleDeps, RunObserver
from agents.runtime.tools import ToolProvider
from agents.runtime.tracing import traced
from agents.workspace.providers import WORKSPACES, Workspaces
from bus import subjects
from bus.actor import Actor, ActorSpec, DeliveryPolicy
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.credentials import CREDENTIALS_FILE, CredentialsError, ensure_credentials, server_auth_args
from bus.dead_letters import watch_max_deliveries
from bus.discovery import ORCHESTRATOR_KIND, WorkCounts, advertise, check_schema, counted
from bus.server import keep_server_running, open_nats_server
from bus.state_lock import hold_state_dir
from bus.streams import ensure_streams
from bus.supervise import Supervisor
from codeloop.audit_events import bus_audit_sink
from codeloop.config import (
    ConfigError,
    McpNote,
    ServeNote,
    ToolServerConfig,
    read_serve_note,
    write_serve_note,
)
from codeloop.errors import CodeloopError
from codeloop.health import Readiness
from codeloop.hosted_mcp import McpHosting, host_tool_servers
from codeloop.metrics import Metrics, follow_events, poll_queues, serve_metrics
from codeloop.telemetry import tracing_observers
from codeloop.tool_provider import InProcessTools
from codeloop.workspace_service import WorkspaceHosting, WorkspaceService
from layout import INDEX_DIR, NATS_DIR, WORK_DIR

log = logging.getLogger("codeloop")
DEFAULT_ROLES = ("orchestrator", "planner", "retriever", "coder", "verifier")
KNOWN_ROLES = (*DEFAULT_ROLES, "echo")
"""The roles codeloop itself installs (the orchestrator and the built-ins of `codeloop.roles`);
`role_specs` also runs every installed plug-in role."""
DRAIN_GRACE_S = 10.0


class UnknownRole(CodeloopError, ValueError):
    """A role name `role_specs` cannot run; the message says why (not installed, or broken)."""


def unknown_role_problem(roles: Sequence[str], registry: RoleRegistry) -> str | None:
    """Why one of `roles` cannot run in this process, or None when all can."""
    for role in roles:
        if role != "orchestrator" and registry.get(role) is None:
            return registry.why_missing(role)
    return None


@dataclass(frozen=True)
class MetricsServing:
    """Where `serve` exports its Prometheus metrics (port 0: a free one, printed and noted)."""

    host: str = "127.0.0.1"
    port: int = 0
    queue_poll_s: float = 5.0


def role_deps(
    bus: Bus,
    state_dir: Path,
    *,
    tools: ToolProvider | None = None,
    observers: tuple[RunObserver, ...] = (),
    record: bool = True,
) -> RoleDeps:
    """What the worker roles of this process share: the bus, the tool servers, scratch space, and
    the observers every model run gets — with `record`, the recorder (`agents/replay/`), which
    stores every model response and tool observation and answers `replay:` models."""
    scratch_dir = _made(state_dir / WORK_DIR)
    if record:
        observers = (recording_observer(bus, scratch_dir=scratch_dir), *observers)
    return RoleDeps(
        bus=bus,
        tools=tools or InProcessTools(),
        observers=observers,
        scratch_dir=scratch_dir,
        index_dir=_made(state_dir / INDEX_DIR),
    )


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


async def role_specs(
    bus: Bus,
    roles: Sequence[str],
    policy: DeliveryPolicy | None = None,
    *,
    pipeline: Pipeline | None = None,
    deps: RoleDeps | None = None,
    registry: RoleRegistry | None = None,
) -> list[ActorSpec]:
    """The actor of each role name; a role may appear twice to run two workers of it.

    `policy` replaces every actor's delivery policy (e.g. a short `ack_wait_s` in tests);
    `pipeline` fixes the orchestrator's pipeline for every task (default: chosen per task);
    `deps` are the worker roles' dependencies (required when `roles` has one); `registry` the
    installed roles (default: the `codeloop.roles` entry points).

    Raises:
        UnknownRole: a role that is not installed, or is installed but broken (the reason).
    """
    registry = registry or load_roles()
    problem = unknown_role_problem(roles, registry)
    if problem is not None:
        raise UnknownRole(problem)
    specs = []
    for role in roles:
        if role == "orchestrator":
            specs.append(orchestrator_spec(await TaskRecords.open(bus), policy=policy, pipeline=pipeline))
            continue
        definition = registry.get(role)
        assert definition is not None  # checked above
        if deps is None and definition.actor is None:
            raise ValueError(f"role {role} needs RoleDeps")
        specs.append(definition.spec(deps, policy))  # type: ignore[arg-type]
    return [traced(spec) for spec in specs]  # spans are non-recording unless telemetry is set up


async def serve(
    config: BusConfig,
    *,
    roles: Sequence[str] = DEFAULT_ROLES,
    stop: anyio.Event,
    actor_policy: DeliveryPolicy | None = None,
    pipeline: Pipeline | None = None,
    tools: ToolProvider | None = None,
    home: Path | None = None,
    mcp: McpHosting | None = None,
    tool_config: ToolServerConfig | None = None,
    record: bool = True,
    on_ready: Callable[[ServeNote], None] = lambda note: None,
    observe: bool = True,
    metrics: MetricsServing | None = MetricsServing(),
    verifier_spares: VerifierSpares | None = None,
    registry: RoleRegistry | None = None,
    readiness: Readiness | None = None,
    workspace_service: WorkspaceHosting | None = None,
    workspaces: Workspaces | None = None,
    task_status: TaskStatus[ServeNote] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run NATS (embedded unless `config.servers`) and the actors of `roles` until `stop` is set;
    with `mcp`, also host the tool servers over HTTP, publishing their audit records as events;
    `record=False` turns the recorder off (`agents/replay/`: what replay needs). With `observe`,
    every tool call of the roles is a `tool_call` event and every event names its step; with
    `metrics`, Prometheus metrics are served (see `codeloop.metrics`). `tool_config` (the
    environment's sandbox policy and cache directory, `codeloop.config.tool_server_config`) goes to
    the default tool provider and the hosted servers. The verifier takes its workspaces from
    `verifier_spares` (entered by the caller, e.g. a benchmark that waits for them), else from
    spares `serve` prepares itself (`agents.roles.verifier.spares`). Roles come from `registry` (default:
    the installed `codeloop.roles` entry points, broken ones logged and left out). `readiness`
    (the health endpoint's, `codeloop.health`) passes once the actors run and while the NATS
    connection is up; it fails again when `stop` starts the drain. With `workspace_service` this
    process also runs the workspace service (`codeloop.workspace_service`); `workspaces` is where
    the coder's workspaces are made (default: here, `agents.workspace.providers.LocalWorkspaces`).

    Raises:
        StateDirBusy: another `codeloop serve` runs on this state directory.
        ServerStartError: the embedded server could not start.
        ServerDied: the embedded server died and could not be restarted.
        BusClosed: the given server could not be reached.
        UnknownRole: a role name no actor exists for.
        OSError: a tool server could not listen.
        ConfigError: the embedded server's credentials file is unusable.
    """
    async with AsyncExitStack() as stack:
        stack.enter_context(hold_state_dir(config.state_dir, what="another codeloop serve"))
        servers = config.servers
        credentials_file: str | None = None
        server = None
        if config.embedded:
            # Not open to every local user: the server requires generated credentials (0600).
            try:
                credentials = ensure_credentials(config.state_dir)
            except (CredentialsError, OSError) as exc:
                raise ConfigError(f"the embedded NATS server cannot start ({exc})") from None
            auth = server_auth_args(credentials, config.state_dir)
            server = await stack.enter_async_context(
                open_nats_server(config.state_dir / NATS_DIR, extra_args=auth)
            )
            servers = (server.url,)
            config = config.model_copy(update={"user": credentials.user, "password": credentials.password})
            credentials_file = str(config.state_dir / CREDENTIALS_FILE)
        bus = await stack.enter_async_context(open_bus(config, servers=servers))
        await ensure_streams(bus)
        observers = tracing_observers()
        tools = tools or InProcessTools(config=tool_config)
        if observe:
            deps = role_deps(
                bus,
                home or config.state_dir,
                tools=ObservedTools(tools, bus),
                observers=(*observers, tool_call_observer(bus)),
                record=record,
            )
        else:
            deps = role_deps(bus, home or config.state_dir, tools=tools, observers=observers, record=record)
        registry = registry or load_roles()
        if workspaces is not None:
            deps = deps.providing(WORKSPACES, workspaces)
        # Spares for the roles that ask for them; with the service, the verifier runs nothing here.
        if workspaces is None and _asked_for(VERIFIER_SPARES, roles, registry):
            if verifier_spares is None:
                verifier_spares = await stack.enter_async_context(
                    VerifierSpares(deps.tools, deps.scratch_dir)
                )
            deps = deps.providing(VERIFIER_SPARES, verifier_spares)
        for broken in registry.broken:
            log.warning(
                "installed role %s is broken and not available (%s): %s",
                broken.name,
                broken.distribution,
                broken.reason,
            )
        specs = await role_specs(bus, roles, actor_policy, pipeline=pipeline, deps=deps, registry=registry)
        if "orchestrator" not in roles:
            # A worker joining another process's orchestrator: refuse a bus that speaks another version.
            await check_schema(bus, ", ".join(roles))
        if observe:
            specs = [
                spec if spec.address.role == subjects.ORCHESTRATOR else bind_step(spec) for spec in specs
            ]
        meter = Metrics() if metrics is not None else None
        if meter is not None:
            specs = [replace(spec, on_settled=meter.on_settled(spec.address.role)) for spec in specs]
        counts = [WorkCounts() for _ in specs]
        specs = [counted(spec, n, failed=_is_failure) for spec, n in zip(specs, counts, strict=True)]
        actors = [Actor(bus, spec) for spec in specs]
        async with anyio.create_task_group() as tg:
            if server is not None:
                tg.start_soon(keep_server_running, server)
            metrics_url = None
            if meter is not None and metrics is not None:
                metrics_url = await tg.start(
                    partial(serve_metrics, meter, host=metrics.host, port=metrics.port)
                )
                await tg.start(Supervisor("metrics events", partial(follow_events, bus, meter)).run)
                addresses = list({spec.address.durable: spec.address for spec in specs}.values())
                tg.start_soon(partial(poll_queues, bus, meter, addresses, interval_s=metrics.queue_poll_s))
            await tg.start(Supervisor("dead-letter watcher", partial(watch_max_deliveries, bus)).run)
            if "orchestrator" in roles:
                await tg.start(Supervisor("rejections", partial(watch_rejections, bus)).run)
                await tg.start(Supervisor("waiting", partial(watch_waiting, bus)).run)
            for actor, n in zip(actors, counts, strict=True):
                await tg.start(Supervisor(f"actor {actor.role}", actor.run).run)
                # Discoverable once it consumes: `codeloop roles` and the waiting check see it.
                definition = registry.get(actor.role)
                kind = definition.kind if definition else ORCHESTRATOR_KIND
                version = definition.version if definition else _version()
                await stack.enter_async_context(
                    advertise(bus, role=actor.role, kind=kind, version=version, counts=n)
                )
            hosted: McpNote | None = None
            if mcp is not None:
                hosted = await tg.start(
                    partial(
                        host_tool_servers,
                        mcp,
                        state_dir=config.state_dir,
                        sink=bus_audit_sink(bus),
                        tool_config=tool_config,
                        bus=bus,
                    )
                )
            hosted_workspaces = None
            if workspace_service is not None:
                service = WorkspaceService(
                    bus,
                    home or config.state_dir,
                    tools=InProcessTools(config=tool_config),
                    host=workspace_service.host,
                    port=workspace_service.port,
                    public_url=workspace_service.public_url,
                    stripped_env=list(workspace_service.stripped_env),
                )
                hosted_workspaces = await tg.start(service.run)
            note = ServeNote(
                nats_url=",".join(servers),
                pid=os.getpid(),
                state_dir=str(config.state_dir),
                roles=list(roles),
                embedded=config.embedded,
                mcp=hosted,
                credentials_file=credentials_file,
                metrics_url=metrics_url,
                workspaces=hosted_workspaces,
            )
            note_path = write_serve_note(config.state_dir, note)
            stack.callback(_remove_note, note_path, os.getpid())
            on_ready(note)
            if readiness is not None:
                readiness.add("nats", lambda: bus.connected)
                readiness.mark("actors")
            task_status.started(note)
            await stop.wait()
            if readiness is not None:
                readiness.add("actors", lambda: False)  # draining: take no new traffic
            for actor in actors:
                actor.stop()
            with anyio.move_on_after(DRAIN_GRACE_S) as grace:
                async with anyio.create_task_group() as drain:
                    for actor in actors:
                        drain.start_soon(actor.drained.wait)
            if grace.cancelled_caught:
                log.warning("in-flight work did not finish within %.0f s; handing it back", DRAIN_GRACE_S)
            tg.cancel_scope.cancel()


def _asked_for(capability: Capability, roles: Sequence[str], registry: RoleRegistry) -> bool:
    """Whether one of `roles` names `capability` in its definition's `needs`."""
    return any(capability in definition.needs for role in roles if (definition := registry.get(role)))


def _is_failure(payload: object) -> bool:
    from agents.messages import StepFailed

    return isinstance(payload, StepFailed)


def _version() -> str:
    from codeloop import __version__

    return __version__


def _remove_note(path: Path, pid: int) -> None:
    # Only our own note: a newer serve may have replaced it.
    note = read_serve_note(path.parent)
    if note is not None and note.pid == pid:
        path.unlink(missing_ok=True)


__all__ = [
    "DEFAULT_ROLES",
    "KNOWN_ROLES",
    "McpHosting",
    "MetricsServing",
    "UnknownRole",
    "role_specs",
    "serve",
]
