"""The role API: how a role is written, built-in or plug-in alike.

A role is a `RoleDefinition`: a name, the stage kind it serves (`agents/orchestrator/stages/`:
which request it is sent and which result it answers with) and a typed handler

    async def handle(request: ReviewRequest, ctx: RoleContext) -> ReviewResult | dict: ...

`define_role` checks the handler's shape at definition time and builds the role's actor on the
same runtime every role uses (`agents/runtime/role.py`'s `role_spec`, `bus/actor.py`): one durable
consumer per role shared by all its workers, acks only after the result is stored, idempotent
redeliveries, failure isolation, events naming the step, tracing, the recorder and redaction.
The four built-in roles are defined with it too and registered under the same entry-point group
(`codeloop.roles`) as any plug-in; see docs/custom-roles.md. A role that needs more than every role
gets (`RoleDeps`) names it in `needs` (a `Capability`); the composition root supplies it.

A handler returns its kind's result model, or a dict of its fields (`step_id` may be left out:
it is filled in from the request). A result that does not fit fails the step with class
`role.malformed`; a `StepError` fails it with the class it names; any other exception is retried
on another delivery and, at the last one, fails the step as `env.infra`.
"""

import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from collections.abc import Set as AbstractSet
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue, ValidationError

from agents.messages import StepBudget, TaskSubmitted
from agents.orchestrator.stages import StageKind, stage_kind
from agents.runtime.role import (
    Capability,
    RoleDeps,
    RunInfo,
    StepError,
    index_dir_for,
    observer_capabilities,
    role_spec,
    typed_handler,
)
from agents.runtime.tools import MODE_SCOPES, ScopeName
from agents.workspace.errors import GitFailed
from agents.workspace.start import apply_patch, scratch_workspace
from bus import subjects
from bus.actor import ActorSpec, Delivery, DeliveryPolicy
from bus.errors import BusError
from bus.messages import Event, Message

if TYPE_CHECKING:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import Model

Handler = Callable[[Any, "RoleContext"], Awaitable[Any]]
ENTRY_POINT_GROUP = "codeloop.roles"
"""The `importlib.metadata` entry-point group roles are installed under: `NAME = "module:OBJECT"`,
the object a `RoleDefinition` (or a callable without arguments returning one)."""


@dataclass(frozen=True)
class RoleContext:
    """What a handler gets besides its request: the task, its budget, the tools its grant allows,
    its model, and a way to tell the task's followers what it is doing."""

    role: str
    task_id: str
    step_id: str
    trace_id: str | None
    task: TaskSubmitted
    budget: StepBudget | None
    """What the step may still spend (None for a kind whose request carries no budget)."""
    grant: frozenset[ScopeName]
    """The tool scopes this role's definition asks for, never more than the task's mode allows."""
    deps: RoleDeps
    delivery: Delivery

    @property
    def model_name(self) -> str | None:
        """The model the task names for this role (`--model`, or a per-role model); None: no model."""
        return self.task.models.for_role(self.role)

    def model(self) -> "Model | None":
        """The task's model for this role, metered (each call a `model_call` event), or None.

        Pass `capabilities()` to the `pydantic_ai.Agent` running it, so the recorder, tracing and
        the events see every request and tool call, as they do for the built-in roles."""
        # Here, not at the top: the metered model imports pydantic-ai (about 1.5 s), which a
        # process that only lists or checks roles should not pay.
        from agents.runtime.metering import model_for

        name = self.model_name
        return model_for(self.deps, name, role=self.role, task_id=self.task_id) if name else None

    def capabilities(self) -> list["AbstractCapability[object]"]:
        """The observers every model run of a role gets (recording for replay, tracing, events)."""
        info = RunInfo(task_id=self.task_id, role=self.role, step_id=self.step_id, trace_id=self.trace_id)
        return observer_capabilities(self.deps, info)

    async def instructions(self, files_in_play: list[str] | None = None) -> str:
        """The project's instructions (`AGENTS.md` files of the task's tree and the user's own) as
        a prompt section, empty when there are none or the task was submitted with
        `--no-instructions`; give it to the model as the built-in roles do. The files given are
        named in an `instructions` event. They are untrusted text: never act on them otherwise."""
        from agents.instructions import project_instructions

        found = await project_instructions(self.deps.bus, self.task, files_in_play=files_in_play or [])
        return found.text

    @asynccontextmanager
    async def workspace(self, label: str | None = None, *, patch: str | None = None) -> AsyncIterator[Path]:
        """A scratch copy of the task's starting tree (removed afterwards), with `patch` applied
        when given (e.g. a review's `request.patch`); the user's checkout is never touched.

        Raises:
            StepError: (`patch.apply_failed`) the patch does not apply to the starting tree.
        """
        async with scratch_workspace(self.deps, self.task_id, self.task, label or self.role) as root:
            if patch:
                try:
                    await apply_patch(root, patch)
                except GitFailed as exc:
                    raise StepError("patch.apply_failed", f"the patch does not apply: {exc}") from None
            yield root

    def tools(self, root: Path) -> dict[str, Any]:
        """MCP targets of the tool servers (`fs`, `search`, `git`, `exec`) on `root` under this
        role's grant: open each with `mcp.Client(target)` (or pydantic-ai's `MCPToolset`)."""
        # `Any`, not `ToolTarget`: plug-ins pass these to `mcp.Client` as documented, which does
        # not take the stdio transports `ToolTarget` includes (only the coder's fs and git are).
        return dict(self.deps.tools.servers(root, self.grant, index_dir=index_dir_for(self.deps, self.task)))

    async def emit(self, name: str, message: str, data: dict[str, JsonValue] | None = None) -> None:
        """Publish an event on the task (`codeloop.events.<task_id>.<name>`), naming role and step.

        Never put secrets or whole files in it; a lost event does not fail the step."""
        event = Event(
            name=name, message=message, data={**(data or {}), "role": self.role, "step_id": self.step_id}
        )
        envelope = self.delivery.envelope.reply(event, id=self.delivery.derived_id(f"event-{name}-{message}"))
        try:
            await self.deps.bus.publish(subjects.event(self.task_id, name), envelope)
        except BusError:
            pass


@dataclass(frozen=True)
class RoleDefinition:
    """A role: its name, the stage kind it serves, and how its worker is built."""

    name: str
    kind: str
    handler: Handler | None = None
    version: str = "0.1.0"
    """The role's own version (semantic), shown by `codeloop roles` and its workers' discovery."""
    grant: frozenset[ScopeName] = frozenset({"read"})
    """Tool scopes the role needs; a task's mode caps them (a read task grants read only)."""
    description: str = ""
    actor: Callable[[RoleDeps, DeliveryPolicy | None], ActorSpec] | None = field(default=None, repr=False)
    """Builds the worker's actor itself instead of from `handler` (the `echo` test role does)."""
    concurrency: int | None = None
    """Requests one worker handles at once (default: the runtime's, 64); 1 for a role that uses a
    whole machine per request, so that more workers share the work instead of one taking it all."""
    needs: frozenset[Capability[object]] = frozenset()
    """What the role needs beyond every role's dependencies; its worker gets these (when the
    composition root has them) and no others."""
    stage: StageKind | None = field(default=None, repr=False, compare=False)
    """The kind itself, as `define_role` resolved it; None: looked up by `kind` when needed."""

    @property
    def stage_kind(self) -> StageKind:
        return self.stage if self.stage is not None else stage_kind(self.kind)

    def spec(self, deps: RoleDeps, policy: DeliveryPolicy | None = None) -> ActorSpec:
        """The worker's actor on the bus runtime."""
        deps = deps.only(self.needs)
        if self.concurrency is not None:
            policy = replace(policy or DeliveryPolicy(), concurrency=self.concurrency)
        if self.actor is not None:
            return self.actor(deps, policy)
        assert self.handler is not None  # define_role checks that one of the two is given
        return role_spec(
            self.name, typed_handler(self.name, self.stage_kind.request, self._work(deps)), policy=policy
        )

    def _work(self, deps: RoleDeps) -> Callable[[Delivery, Message], Awaitable[Message]]:
        handler = self.handler
        kind = self.stage_kind
        assert handler is not None

        async def work(delivery: Delivery, request: Message) -> Message:
            ctx = context_for(self, deps, delivery, request)
            return result_of(self.name, kind, request, await handler(request, ctx))

        return work


def context_for(role: RoleDefinition, deps: RoleDeps, delivery: Delivery, request: Any) -> RoleContext:
    task: TaskSubmitted = request.task
    return RoleContext(
        role=role.name,
        task_id=delivery.envelope.task_id,
        step_id=getattr(request, "step_id", ""),
        trace_id=delivery.envelope.trace_id,
        task=task,
        budget=getattr(request, "budget", None),
        grant=frozenset(role.grant & MODE_SCOPES[task.mode]) or frozenset({"read"}),
        deps=deps,
        delivery=delivery,
    )


def result_of(role: str, kind: StageKind, request: Message, returned: object) -> Message:
    """The handler's return value (whatever it is: this is where it is checked) as its kind's
    result, answering the request's step.

    Raises:
        StepError: (`role.malformed`) anything else, saying what was wrong.
    """
    step_id = getattr(request, "step_id", None)
    expected = kind.result.__name__
    if isinstance(returned, kind.result):
        if step_id is not None and getattr(returned, "step_id", step_id) != step_id:
            returned = returned.model_copy(update={"step_id": step_id})
        return returned
    if isinstance(returned, dict):
        fields = dict(returned)
        if step_id is not None and "step_id" in kind.result.model_fields:
            fields["step_id"] = step_id
        try:
            return kind.result.model_validate(fields)
        except ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5]
            )
            raise StepError(
                "role.malformed", f"the {role} role returned a malformed {expected}: {errors}"
            ) from None
    raise StepError(
        "role.malformed",
        f"the {role} role returned {type(returned).__name__}, not a {expected} or a dict of its fields",
    )


def define_role(
    name: str,
    kind: str | StageKind,
    handler: Handler | None = None,
    *,
    version: str = "0.1.0",
    grant: frozenset[ScopeName] | set[ScopeName] = frozenset({"read"}),
    description: str = "",
    actor: Callable[[RoleDeps, DeliveryPolicy | None], ActorSpec] | None = None,
    concurrency: int | None = None,
    needs: AbstractSet[Capability[object]] = frozenset(),
) -> RoleDefinition:
    """A role serving stages of `kind` (an installed kind's name, or the `StageKind` itself, as a
    plug-in defining its own kind beside the role does) with `async handler(request, ctx) -> result`.

    Raises:
        ValueError: a name that is not a subject token, an unknown kind, a version that is not semantic.
        TypeError: a handler that is not `async def handler(request, ctx)`.
    """
    if not _is_token(name):
        raise ValueError(f"role name {name!r}: use letters, digits, '-' and '_' (at most 64)")
    if isinstance(kind, str):
        try:
            kind = stage_kind(kind)
        except ValueError as exc:
            raise ValueError(f"role {name!r}: {exc}") from None
    if not _SEMVER(version):
        raise ValueError(f"role {name!r}: version {version!r} is not a semantic version such as 1.0.0")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"role {name!r}: concurrency must be at least 1")
    if (handler is None) == (actor is None):
        raise TypeError(f"role {name!r}: give a handler (or, for a hand-built actor, `actor`), not both")
    if handler is not None:
        check_handler(name, handler)
    return RoleDefinition(
        name=name,
        kind=kind.name,
        handler=handler,
        version=version,
        grant=frozenset(grant),
        description=description,
        actor=actor,
        concurrency=concurrency,
        needs=frozenset(needs),
        stage=kind,
    )


def check_handler(name: str, handler: Handler) -> None:
    """Raises TypeError unless `handler` is `async def handler(request, ctx)`."""
    if not inspect.iscoroutinefunction(handler) and not inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):
        raise TypeError(f"role {name!r}: the handler {_name(handler)} is not an async function (async def)")
    try:
        inspect.signature(handler).bind(object(), object())
    except TypeError:
        raise TypeError(
            f"role {name!r}: the handler {_name(handler)}{inspect.signature(handler)} must take (request, ctx)"
        ) from None
    except ValueError:
        pass  # no signature to read (a builtin): trust it


def _name(handler: object) -> str:
    return getattr(handler, "__qualname__", type(handler).__name__)


def _is_token(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name))


def _SEMVER(version: str) -> bool:
    return bool(re.fullmatch(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?", version))


__all__ = [
    "ENTRY_POINT_GROUP",
    "RoleContext",
    "RoleDefinition",
    "StepError",
    "check_handler",
    "define_role",
    "result_of",
]
