"""What every role worker shares: its dependencies, and how a step fails.

A role's handler takes one request and returns one result (`Reply` to
`codeloop.task.result.<role>`). Failures are classed here, once: an `AgentError` carrying a
failure class (a provider that stays down, a snapshot that cannot be read) ends the step with a
`StepFailed` of that class; any other exception is left to the runtime (nak, back-off, retry on
another delivery) until the last delivery, where it becomes `StepFailed(env.infra)` — so a task
never waits forever on a step whose messages were all dead-lettered. The scratch workspaces a
role works in are `agents.workspace.start`'s.
"""

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agents.errors import AgentError
from agents.messages import StepFailed, TaskSubmitted, Usage
from agents.models.local_server import LocalServers
from agents.runtime.tools import ToolProvider
from bus import subjects
from bus.actor import ActorSpec, Delivery, DeliveryPolicy, Reply
from bus.connection import Bus
from bus.errors import BusError, MalformedMessage
from bus.messages import Event, Message

if TYPE_CHECKING:
    from pydantic_ai.capabilities import AbstractCapability

log = logging.getLogger("codeloop.agents")

EventSink = Callable[[str, Event], Awaitable[None]]


@dataclass(frozen=True)
class RunInfo:
    """What an observer of one model run is told: whose run it is."""

    task_id: str
    role: str
    step_id: str
    trace_id: str | None = None


RunObserver = Callable[[RunInfo], "AbstractCapability[object]"]
"""Builds a pydantic-ai capability (e.g. `Hooks`) for one model run: how events, traces and
recordings see every model request and tool call without the roles knowing about them."""


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class Capability(Generic[T_co]):
    """Something only some roles need (the verifier's spare workspaces, the workspace service):
    a role asks for it in its definition (`RoleDefinition.needs`), the composition root supplies
    it (`RoleDeps.providing`), and the role reads it with `RoleDeps.get`. `T_co` is the type of
    what is supplied (covariant: a `Capability[object]` stands for any capability)."""

    name: str


@dataclass(frozen=True)
class RoleDeps:
    """Everything a role needs besides its message; built by the composition root."""

    bus: Bus
    tools: ToolProvider
    scratch_dir: Path
    """Where scratch workspaces are made (one per step, removed after it)."""
    index_dir: Path
    """Where the search server keeps one index per repository, shared by that repository's steps,
    so a second task on the same code re-embeds only what changed."""
    observers: tuple[RunObserver, ...] = ()
    """Capabilities added to every LLM role's run (see `RunObserver`)."""
    coverage_dir: Path | None = None
    """Where the verifier keeps its coverage runs of starting trees, shared by this machine's
    verifications (`agents.roles.verifier.execution.CoverageCache`); None: measured every time."""
    model_base_dir: Path | None = None
    """Relative `function:` model paths resolve against it (the submitting client's directory)."""
    local_models: LocalServers | None = None
    """Starts and owns the llama.cpp servers of `local:` models (`agents.models.local_server`);
    None: such a model fails its step saying this process runs none."""
    provided: Mapping[Capability[Any], Any] = field(default_factory=dict)
    """What the composition root supplies beyond the above, by capability; a role's worker sees
    only those its definition asked for."""

    def get(self, capability: Capability[T]) -> T | None:
        """What was supplied for `capability`; None when nothing was (or the role did not ask)."""
        return self.provided.get(capability)

    def providing(self, capability: Capability[T], value: T) -> "RoleDeps":
        """These dependencies with `value` supplied for `capability`."""
        return replace(self, provided={**self.provided, capability: value})

    def only(self, needs: Iterable[Capability[object]]) -> "RoleDeps":
        """These dependencies with only the capabilities in `needs` supplied."""
        wanted = set(needs)
        return replace(self, provided={c: v for c, v in self.provided.items() if c in wanted})


class StepError(AgentError):
    """A step that cannot succeed, with its failure class (see `agents/failures.py`)."""

    def __init__(self, failure_class: str, message: str, *, usage: "Usage | None" = None) -> None:
        super().__init__(message)
        # Per instance, shadowing AgentError's class-level default: the raiser names the class.
        self.failure_class = failure_class  # type: ignore[misc] - a class attribute of StepError set per instance on purpose
        self.usage = usage
        """What the step consumed before it failed (a budget hit mid-step), charged to the task."""


def observer_capabilities(deps: RoleDeps, info: RunInfo) -> list["AbstractCapability[object]"]:
    return [observer(info) for observer in deps.observers]


def index_dir_for(deps: RoleDeps, task: TaskSubmitted) -> Path:
    """One search index per repository path: successive tasks and steps update it incrementally."""
    return deps.index_dir / subjects.token(task.repo.replace("/", "_").strip("_") or "root")


def innermost_exception(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (else `exc` itself)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _bus_failed_under(exc: BaseException) -> bool:
    """Whether a classed failure was caused by the bus (a timeout while a node fails over, say):
    transient, so the step is redelivered like an unclassed one rather than failed for good."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, BusError):
            return True
        cause = cause.__cause__
    return False


def step_failed(role: str) -> Callable[[Message, str, str], Message]:
    """The standard `failed` of `role_spec`: a `StepFailed` naming the request's step."""

    def failed(request: Message, failure_class: str, message: str) -> Message:
        return StepFailed(
            step_id=getattr(request, "step_id", ""), role=role, failure_class=failure_class, message=message
        )

    return failed


def typed_handler(
    role: str, kind: type[M], work: Callable[[Delivery, M], Awaitable[Message]]
) -> Callable[[Delivery, Message], Awaitable[Message]]:
    """`work(delivery, request)` for requests of `kind`; anything else is the sender's format error."""

    async def handle(delivery: Delivery, request: Message) -> Message:
        if not isinstance(request, kind):
            raise StepError("agent.format", f"the {role} takes {kind.__name__}, got {delivery.envelope.kind}")
        return await work(delivery, request)

    return handle


def role_spec(
    role: str,
    handle: Callable[[Delivery, Message], Awaitable[Message]],
    *,
    policy: DeliveryPolicy | None = None,
    failed: Callable[[Message, str, str], Message] | None = None,
) -> ActorSpec:
    """The actor of a role whose `handle(delivery, request)` returns its result; `failed(request,
    failure_class, message)` builds the reply for a step that cannot succeed (default: `StepFailed`)."""
    policy = policy or DeliveryPolicy()
    failed = failed or step_failed(role)

    async def handler(delivery: Delivery) -> Reply:
        request = delivery.envelope.open()
        try:
            result = await handle(delivery, request)
        except MalformedMessage:
            raise
        except StepError as exc:
            result = failed(request, exc.failure_class, str(exc))
            if exc.usage is not None and "usage" in type(result).model_fields:
                result = result.model_copy(update={"usage": exc.usage})
        except Exception as exc:
            # A failure inside an MCP session arrives wrapped in the session's exception group.
            failure_class = getattr(innermost_exception(exc), "failure_class", None)
            if isinstance(innermost_exception(exc), StepError):
                return Reply(
                    subjects.task_result(role),
                    failed(request, failure_class, str(innermost_exception(exc))),  # pyright: ignore[reportArgumentType] - the innermost exception is a StepError (checked above), which has a failure class
                    label="result",
                )
            retry = failure_class is None or _bus_failed_under(innermost_exception(exc))
            if retry and delivery.num_delivered < policy.max_deliver:
                raise  # the runtime naks it; another delivery may succeed
            log.warning("%s: step failed for good: %s: %s", role, type(exc).__name__, exc)
            result = failed(request, failure_class or "env.infra", f"{type(exc).__name__}: {exc}"[:2000])
        return Reply(subjects.task_result(role), result, label="result")

    return ActorSpec(address=subjects.RoleAddress.worker(role), handler=handler, policy=policy)
