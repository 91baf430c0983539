"""`serve()`: one codeloop process — its bus, its actors and the services it hosts beside them.

`serve()` starts the embedded nats-server (or uses `--nats URL`), makes sure the streams exist,
and runs the roles of this process, each under a supervisor, in one task group. Unless told
otherwise it also hosts the tool servers over HTTP (`codeloop.services.hosted_mcp`), their audit
records published as `tool_call` events (`codeloop.services.audit_events`). On `stop` it drains:
no new fetches, in-flight messages finish and are acked; a second stop (or the grace period
running out) cancels, which hands in-flight messages back to JetStream and stops the HTTP servers.

What it runs comes in three typed groups: `Workers` (which actors, with which pipeline and
delivery policy, and the `Service`s beside them), `RoleSetup` (what the worker roles get: tools,
scratch space, recorder, observers, workspaces) and `Hosting` (the network services beside them:
MCP servers, metrics, health, the workspace service). A `Service` is a feature's own loop, which
the command line hands `serve`; `serve` names no feature.

One `serve` per state directory: it holds the directory's lock for its life (`bus.state_lock`),
so a second one is refused before it touches the first one's server or notes. The embedded
server is watched: if it dies it is restarted on the same store and port (clients reconnect), and
if it cannot be, `serve` ends saying so and where the server's log is.
"""

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from agents.messages import StepFailed
from agents.models.local_server import LocalServers
from agents.observe.events import bind_step
from agents.observe.tool_events import ObservedTools, tool_call_observer
from agents.orchestrator import Pipeline
from agents.orchestrator.rejections import watch_rejections
from agents.orchestrator.waiting import watch_waiting
from agents.roles.verifier.spares import VERIFIER_SPARES, VerifierSpares
from agents.runtime.plugins import RoleRegistry, load_roles
from agents.runtime.role import Capability, RoleDeps
from agents.runtime.tools import ToolProvider
from agents.runtime.user_servers import USER_SERVERS
from agents.workspace.providers import WORKSPACES, Workspaces
from bus import subjects
from bus.actor import Actor, ActorSpec, DeliveryPolicy
from bus.center import watch_center
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.credentials import CREDENTIALS_FILE, CredentialsError, ensure_credentials, server_auth_args
from bus.dead_letters import watch_max_deliveries
from bus.discovery import ORCHESTRATOR_KIND, WorkCounts, advertise, check_schema, counted
from bus.server import NatsServer, keep_server_running, open_nats_server
from bus.state_lock import hold_state_dir
from bus.streams import ensure_streams
from bus.supervise import Supervisor
from codeloop import __version__
from codeloop.config.environment import ToolServerConfig
from codeloop.config.errors import ConfigError
from codeloop.config.serve_note import (
    ConsoleNote,
    McpNote,
    ServeNote,
    WorkspacesNote,
    read_serve_note,
    write_serve_note,
)
from codeloop.services.audit_events import bus_audit_sink
from codeloop.services.center_watch import WatchedCenter
from codeloop.services.health import Readiness
from codeloop.services.hosted_mcp import McpHosting, host_tool_servers
from codeloop.services.metrics import Metrics, MetricsServing, follow_events, poll_queues, serve_metrics
from codeloop.services.workspace_service import WorkspaceHosting, WorkspaceService
from codeloop.wiring.judge import patch_verifier
from codeloop.wiring.roles import SERVED_BY_DEFAULT, role_deps, role_specs
from codeloop.wiring.telemetry import tracing_observers
from codeloop.wiring.tools import InProcessTools
from codeloop.wiring.user_servers import RelayedUserServers
from layout import LOCAL_MODELS_DIR, NATS_DIR

if TYPE_CHECKING:
    from codeloop.console.hosting import ConsoleHosting

log = logging.getLogger("codeloop")
DRAIN_GRACE_S = 10.0


class Service(Protocol):
    """A long-lived loop a serve runs on its bus beside the actors, under a supervisor: a feature's
    own workers that are no actor of the pipeline (they take their work from a stream of their own).
    `serve` knows only this shape; the command line decides which services a process runs."""

    @property
    def name(self) -> str:
        """How logs, the serve note and the schema check name it."""
        ...

    async def run(self, bus: Bus, *, task_status: TaskStatus[None] = ...) -> None:
        """Serve until cancelled (or until the service's own end); `task_status.started()` once
        it takes work."""
        ...


@dataclass(frozen=True)
class Workers:
    """Which actors this process runs, and how they take their messages."""

    roles: Sequence[str] = SERVED_BY_DEFAULT
    """Role names; a role may appear twice to run two workers of it."""
    pipeline: Pipeline | None = None
    """The orchestrator's pipeline for every task that names none (default: chosen per task)."""
    policy: DeliveryPolicy | None = None
    """Replaces every actor's delivery policy (e.g. a short `ack_wait_s` in tests)."""
    registry: RoleRegistry | None = None
    """The installed roles (default: the `codeloop.roles` entry points, broken ones logged and left out)."""
    services: Sequence[Service] = ()
    """Loops run beside the actors, each under its own supervisor (see `Service`)."""


@dataclass(frozen=True)
class RoleSetup:
    """What the worker roles of this process get."""

    home: Path | None = None
    """Where scratch workspaces and indexes live (default: the bus's state directory)."""
    tools: ToolProvider | None = None
    """The tool servers (default: in process, `codeloop.wiring.tools.InProcessTools`)."""
    tool_config: ToolServerConfig | None = None
    """The environment's sandbox policy and cache directory, for the default tools and the hosted servers."""
    record: bool = True
    """Record every model response and tool observation (`agents/replay/`: what replay needs)."""
    observe: bool = True
    """Every tool call a `tool_call` event, every event naming its step."""
    verifier_spares: VerifierSpares | None = None
    """The verifier's ready workspaces, entered by the caller (e.g. a benchmark that waits for
    them); default: spares `serve` prepares itself (`agents.roles.verifier.spares`)."""
    workspaces: Workspaces | None = None
    """Where the coder's workspaces are made (default: here, `agents.workspace.providers.LocalWorkspaces`)."""


@dataclass(frozen=True)
class Hosting:
    """The network services this process runs beside its actors (None: not that one)."""

    mcp: McpHosting | None = None
    """The tool servers and the tasks server over HTTP, their audit records published as events."""
    metrics: MetricsServing | None = field(default_factory=MetricsServing)
    """Prometheus metrics (`codeloop.services.metrics`)."""
    readiness: Readiness | None = None
    """The health endpoint's checks (`codeloop.services.health`): passing once the actors run and
    while the NATS connection is up; failing again when `stop` starts the drain."""
    workspace_service: WorkspaceHosting | None = None
    """Run the workspace service (`codeloop.services.workspace_service`) here."""
    console: "ConsoleHosting | None" = None
    """The web console (`codeloop.console`) on its own port; imported only when asked for (Jinja2,
    Starlette and Pygments cost a second or more of a serve's start)."""


async def serve(
    config: BusConfig,
    *,
    stop: anyio.Event,
    workers: Workers = Workers(),
    setup: RoleSetup = RoleSetup(),
    hosting: Hosting = Hosting(),
    on_ready: Callable[[ServeNote], None] = lambda note: None,
    task_status: TaskStatus[ServeNote] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run NATS (embedded unless `config.servers`), the actors of `workers` with `setup` and the
    services of `hosting` until `stop` is set; `on_ready` and `task_status` get the note written
    to the state directory once everything runs.

    Raises:
        StateDirBusy: another `codeloop serve` runs on this state directory.
        ServerStartError: the embedded server could not start.
        ServerDied: the embedded server died and could not be restarted.
        BusClosed: the given server could not be reached.
        UnknownRole: a role name no actor exists for.
        OSError: a tool server or the console could not listen.
        ConfigError: the embedded server's credentials file is unusable.
        AccessFileError: the console's token file is unreadable or malformed.
    """
    async with AsyncExitStack() as stack:
        stack.enter_context(hold_state_dir(config.state_dir, what="another codeloop serve"))
        server, config, credentials_file = await _start_nats(stack, config)
        bus = await stack.enter_async_context(open_bus(config))
        await ensure_streams(bus)
        # Watched for the process's life: a push reaches the next task claimed here, no restart.
        center = WatchedCenter(await stack.enter_async_context(watch_center(bus)))
        registry = workers.registry or load_roles()
        roles = tuple(workers.roles)
        names = [*roles, *(service.name for service in workers.services)]
        deps = await _role_deps(stack, bus, config, roles, setup, registry)
        for broken in registry.broken:
            log.warning(
                "installed role %s is broken and not available (%s): %s",
                broken.name,
                broken.distribution,
                broken.reason,
            )
        specs = await role_specs(
            bus, roles, workers.policy, pipeline=workers.pipeline, deps=deps, registry=registry, center=center
        )
        if "orchestrator" not in roles:
            # A worker joining another process's orchestrator: refuse a bus that speaks another version.
            await check_schema(bus, ", ".join(names))
        if setup.observe:
            specs = [
                spec if spec.address.role == subjects.ORCHESTRATOR else bind_step(spec) for spec in specs
            ]
        meter = Metrics() if hosting.metrics is not None else None
        if meter is not None:
            specs = [replace(spec, on_settled=meter.on_settled(spec.address.role)) for spec in specs]
        counts = [WorkCounts() for _ in specs]
        actors = [
            Actor(bus, counted(spec, n, failed=_is_failure)) for spec, n in zip(specs, counts, strict=True)
        ]
        async with anyio.create_task_group() as tg:
            if server is not None:
                tg.start_soon(keep_server_running, server)
            metrics_url = await _start_metrics(tg, bus, meter, hosting.metrics, specs)
            await _start_watchers(tg, bus, roles)
            for service in workers.services:
                await tg.start(Supervisor(service.name, partial(service.run, bus)).run)
            for actor, n in zip(actors, counts, strict=True):
                await tg.start(Supervisor(f"actor {actor.role}", actor.run).run)
                # Discoverable once it consumes: `codeloop roles` and the waiting check see it.
                definition = registry.get(actor.role)
                kind = definition.kind if definition else ORCHESTRATOR_KIND
                version = definition.version if definition else __version__
                await stack.enter_async_context(
                    advertise(bus, role=actor.role, kind=kind, version=version, counts=n)
                )
            hosted = await _start_mcp(tg, bus, config, hosting.mcp, setup.tool_config)
            workspaces = await _start_workspaces(tg, bus, setup.home or config.state_dir, hosting, setup)
            console = await _start_console(tg, bus, config, hosting.console)
            note = ServeNote(
                nats_url=",".join(config.servers),
                pid=os.getpid(),
                state_dir=str(config.state_dir),
                roles=names,
                embedded=server is not None,
                mcp=hosted,
                credentials_file=credentials_file,
                metrics_url=metrics_url,
                workspaces=workspaces,
                console=console,
            )
            note_path = write_serve_note(config.state_dir, note)
            stack.callback(_remove_note, note_path, os.getpid())
            on_ready(note)
            readiness = hosting.readiness
            if readiness is not None:
                readiness.add("nats", lambda: bus.connected)
                readiness.mark("actors")
            task_status.started(note)
            await stop.wait()
            if readiness is not None:
                readiness.add("actors", lambda: False)  # draining: take no new traffic
            await _drain(actors)
            tg.cancel_scope.cancel()


async def _start_nats(
    stack: AsyncExitStack, config: BusConfig
) -> tuple[NatsServer | None, BusConfig, str | None]:
    """The embedded server when `config` names none: (the server, `config` pointed at it with its
    generated credentials, the credentials file); else (None, `config`, None)."""
    if not config.embedded:
        return None, config, None
    # Not open to every local user: the server requires generated credentials (0600).
    try:
        credentials = ensure_credentials(config.state_dir)
    except (CredentialsError, OSError) as exc:
        raise ConfigError(f"the embedded NATS server cannot start ({exc})") from None
    auth = server_auth_args(credentials, config.state_dir)
    server = await stack.enter_async_context(open_nats_server(config.state_dir / NATS_DIR, extra_args=auth))
    config = config.model_copy(
        update={"servers": (server.url,), "user": credentials.user, "password": credentials.password}
    )
    return server, config, str(config.state_dir / CREDENTIALS_FILE)


async def _role_deps(
    stack: AsyncExitStack,
    bus: Bus,
    config: BusConfig,
    roles: Sequence[str],
    setup: RoleSetup,
    registry: RoleRegistry,
) -> RoleDeps:
    """What the worker roles get (see `RoleSetup`): the capabilities the roles of `registry` ask
    for, the verifier's spares entered on `stack`."""
    tools = setup.tools or InProcessTools(config=setup.tool_config)
    observers = tracing_observers()
    home = setup.home or config.state_dir
    if setup.observe:
        tools = ObservedTools(tools, bus)
        observers = (*observers, tool_call_observer(bus))
    deps = role_deps(bus, home, tools=tools, observers=observers, record=setup.record)
    # Started at a local: model's first request, stopped and reaped when this serve ends.
    local = await stack.enter_async_context(LocalServers(log_dir=home / LOCAL_MODELS_DIR))
    deps = replace(deps, local_models=local)
    if setup.workspaces is not None:
        deps = deps.providing(WORKSPACES, setup.workspaces)
    deps = deps.providing(USER_SERVERS, RelayedUserServers(home))
    # Spares for the roles that ask for them; with the service, the verifier runs nothing here.
    if setup.workspaces is None and _asked_for(VERIFIER_SPARES, roles, registry):
        spares = setup.verifier_spares
        if spares is None:
            spares = await stack.enter_async_context(VerifierSpares(deps.tools, deps.scratch_dir))
        deps = deps.providing(VERIFIER_SPARES, spares)
    return deps


def _asked_for(capability: Capability, roles: Sequence[str], registry: RoleRegistry) -> bool:
    """Whether one of `roles` names `capability` in its definition's `needs`."""
    return any(capability in definition.needs for role in roles if (definition := registry.get(role)))


async def _start_metrics(
    tg: TaskGroup, bus: Bus, meter: Metrics | None, serving: MetricsServing | None, specs: list[ActorSpec]
) -> str | None:
    """Serve `meter` as `serving` asks, fed from the events and the role queues; its URL."""
    if meter is None or serving is None:
        return None
    url = await tg.start(partial(serve_metrics, meter, host=serving.host, port=serving.port))
    await tg.start(Supervisor("metrics events", partial(follow_events, bus, meter)).run)
    addresses = list({spec.address.durable: spec.address for spec in specs}.values())
    tg.start_soon(partial(poll_queues, bus, meter, addresses, interval_s=serving.queue_poll_s))
    return url


async def _start_watchers(tg: TaskGroup, bus: Bus, roles: Sequence[str]) -> None:
    """The dead-letter watcher, and with an orchestrator its rejection and waiting watchers."""
    await tg.start(Supervisor("dead-letter watcher", partial(watch_max_deliveries, bus)).run)
    if "orchestrator" in roles:
        await tg.start(Supervisor("rejections", partial(watch_rejections, bus)).run)
        await tg.start(Supervisor("waiting", partial(watch_waiting, bus)).run)


async def _start_mcp(
    tg: TaskGroup, bus: Bus, config: BusConfig, mcp: McpHosting | None, tool_config: ToolServerConfig | None
) -> McpNote | None:
    """The hosted tool servers' note once they listen; None when `mcp` asks for none."""
    if mcp is None:
        return None
    if mcp.verifier is None:  # served only under an execute grant (the tool's scope)
        mcp = replace(mcp, verifier=patch_verifier(config.state_dir))
    return await tg.start(
        partial(
            host_tool_servers,
            mcp,
            state_dir=config.state_dir,
            sink=bus_audit_sink(bus),
            tool_config=tool_config,
            bus=bus,
        )
    )


async def _start_workspaces(
    tg: TaskGroup, bus: Bus, home: Path, hosting: Hosting, setup: RoleSetup
) -> WorkspacesNote | None:
    """The workspace service's note once it listens; None when `hosting` asks for none."""
    if hosting.workspace_service is None:
        return None
    service = WorkspaceService(
        bus, home, tools=InProcessTools(config=setup.tool_config), hosting=hosting.workspace_service
    )
    return await tg.start(service.run)


async def _start_console(
    tg: TaskGroup, bus: Bus, config: BusConfig, console: "ConsoleHosting | None"
) -> ConsoleNote | None:
    """The web console's note once it listens; None when `console` asks for none."""
    if console is None:
        return None
    from codeloop.console.hosting import host_console

    return await tg.start(partial(host_console, console, bus=bus, state_dir=config.state_dir))


async def _drain(actors: list[Actor]) -> None:
    """Stop every actor fetching and wait, at most `DRAIN_GRACE_S`, for their in-flight work."""
    for actor in actors:
        actor.stop()
    with anyio.move_on_after(DRAIN_GRACE_S) as grace:
        async with anyio.create_task_group() as drain:
            for actor in actors:
                drain.start_soon(actor.drained.wait)
    if grace.cancelled_caught:
        log.warning("in-flight work did not finish within %.0f s; handing it back", DRAIN_GRACE_S)


def _is_failure(payload: object) -> bool:
    return isinstance(payload, StepFailed)


def _remove_note(path: Path, pid: int) -> None:
    # Only our own note: a newer serve may have replaced it.
    note = read_serve_note(path.parent)
    if note is not None and note.pid == pid:
        path.unlink(missing_ok=True)
