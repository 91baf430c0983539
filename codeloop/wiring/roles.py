"""Which roles a process runs, and the actor each role becomes.

A role is the orchestrator or an installed role of the entry-point group `codeloop.roles` (the
built-ins are installed the same way as a plug-in, `agents.runtime.plugins`). `role_specs` turns role
names into actor specs with what the worker roles share (`role_deps`: the bus, the tool servers,
scratch space, the observers of every model run).
"""

from collections.abc import Sequence
from pathlib import Path

from agents.messages import PipelineChoice, TaskSubmitted
from agents.orchestrator import Pipeline, orchestrator_spec
from agents.orchestrator.center import CenterLayer
from agents.orchestrator.pipeline import parse_pipeline, pipeline_for
from agents.orchestrator.records import TaskRecords
from agents.quotas import Ledger
from agents.replay.observer import recording_observer
from agents.runtime.plugins import RoleRegistry, load_roles
from agents.runtime.role import RoleDeps, RunObserver
from agents.runtime.tools import ToolProvider
from agents.runtime.tracing import traced
from bus.actor import ActorSpec, DeliveryPolicy
from bus.connection import Bus
from codeloop.config.pipelines import serving_roles
from codeloop.errors import CodeloopError
from codeloop.wiring.tools import InProcessTools
from layout import COVERAGE_DIR, INDEX_DIR, WORK_DIR

DEFAULT_ROLES = ("orchestrator", "planner", "retriever", "coder", "verifier")
SERVED_BY_DEFAULT = (*DEFAULT_ROLES, "selector")
"""What `codeloop serve` runs without `--role`: the standard pipeline's roles, and the selector a
task with several attempts (`budgets.attempts`) needs."""
KNOWN_ROLES = (*SERVED_BY_DEFAULT, "echo")
"""The roles codeloop itself installs (the orchestrator and the built-ins of `codeloop.roles`);
`role_specs` also runs every installed plug-in role."""


class UnknownRole(CodeloopError, ValueError):
    """A role name `role_specs` cannot run; the message says why (not installed, or broken)."""


SERVE_ONLY_ROLES = ("orchestrator",)
"""What `serve --role` takes beyond the installed roles: the orchestrator."""


def unknown_role_problem(
    roles: Sequence[str], registry: RoleRegistry, *, services: Sequence[str] = ()
) -> str | None:
    """Why one of `roles` cannot run in this process, or None when all can; `services` names what
    else the command line takes as a role (a `Service` of `codeloop.wiring.process`), for the
    message."""
    beyond = (*SERVE_ONLY_ROLES, *services)
    for role in roles:
        if role not in beyond and registry.get(role) is None:
            why = registry.why_missing(role)
            if role not in registry.roles and not any(b.name == role for b in registry.broken):
                why += f"; besides them serve runs {' and '.join(beyond)}"
            return why
    return None


def plugin_roles(registry: RoleRegistry) -> tuple[str, ...]:
    """The installed roles that are not codeloop's own, by name."""
    return tuple(name for name, role in sorted(registry.roles.items()) if not role.builtin)


def every_role(registry: RoleRegistry | None = None) -> tuple[str, ...]:
    """The standard roles, the selector, and every installed plug-in role: what a process runs that
    must take any task, whatever pipeline or attempts it names (the tasks server's embedded bus,
    the test kit)."""
    return (*SERVED_BY_DEFAULT, *plugin_roles(registry or load_roles()))


def roles_for(pipeline: Pipeline | None, base: tuple[str, ...] = SERVED_BY_DEFAULT) -> tuple[str, ...]:
    """`base` plus the installed roles `pipeline` needs that `base` lacks: a process running a
    whole pipeline by itself (`codeloop run` without a serve)."""
    return serving_roles(base, pipeline, load_roles()) if pipeline is not None else base


def roles_for_choice(
    choice: PipelineChoice | None, base: tuple[str, ...] = SERVED_BY_DEFAULT
) -> tuple[str, ...]:
    """`roles_for` the pipeline of a task's `PipelineChoice` (None: `base`)."""
    if choice is None:
        return base
    return roles_for(parse_pipeline(choice.name, choice.stages), base)


def roles_for_task(task: TaskSubmitted, base: tuple[str, ...] = SERVED_BY_DEFAULT) -> tuple[str, ...]:
    """`roles_for` the pipeline `task` runs: its own, or the standard one, with the select stage
    its attempts add (`codeloop run` without a serve)."""
    return roles_for(pipeline_for(task), base)


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
        coverage_dir=_made(state_dir / COVERAGE_DIR),
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
    center: CenterLayer | None = None,
) -> list[ActorSpec]:
    """The actor of each role name; a role may appear twice to run two workers of it.

    `policy` replaces every actor's delivery policy (e.g. a short `ack_wait_s` in tests);
    `pipeline` fixes the orchestrator's pipeline for every task (default: chosen per task);
    `deps` are the worker roles' dependencies (required when `roles` has one); `registry` the
    installed roles (default: the `codeloop.roles` entry points); `center` the configuration
    center the orchestrator settles tasks under (default: none). The orchestrator counts usage in
    the quota ledger (`agents.quotas`; the bus's buckets must exist, `bus.streams.ensure_streams`).

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
            records, ledger = await TaskRecords.open(bus), await Ledger.open(bus)
            specs.append(
                orchestrator_spec(records, policy=policy, pipeline=pipeline, center=center, ledger=ledger)
            )
            continue
        definition = registry.get(role)
        assert definition is not None  # checked above
        if deps is None and definition.actor is None:
            raise ValueError(f"role {role} needs RoleDeps")
        specs.append(definition.spec(deps, policy))  # type: ignore[arg-type] - a plug-in's spec function, typed loosely by its entry point
    return [traced(spec) for spec in specs]  # spans are non-recording unless telemetry is set up
