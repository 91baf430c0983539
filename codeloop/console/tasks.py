"""The console's view of the tasks: what a principal may see and touch, and the actions it takes.

Everything is read from the bus, nothing is kept here: the task records (`TaskState`), the owner
keys the tasks server writes (`codeloop.services.tasks_backend.BusTasks`) and the pending
confirmations. Every action is the call the CLI and the tasks server make, through the same
backend: `submit` checks a submission as `codeloop submit` does, `cancel`, `answer` (approve or
deny) publish what `codeloop cancel`/`approve`/`deny` publish.

The rule is the tasks server's: a principal sees and touches only the tasks it submitted, and a
task of another principal does not exist for it (the page is a 404, never a 403, so task ids do
not leak). An operator sees and touches every task, those submitted from a terminal too.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import JsonValue

from agents.messages import TERMINAL_STATUSES, TaskState
from agents.orchestrator.records import TaskRecords
from agents.runtime.confirmations import pending_confirmation
from bus import subjects
from bus.connection import Bus, nats_errors
from bus.records import read
from codeloop.console.access import Grant
from codeloop.services.tasks_backend import BusTasks
from tool_servers.confinement import Root
from tool_servers.protocol.errors import ToolServerError
from tool_servers.protocol.scopes import Scope
from tool_servers.tasks.backend import Submission, SubmissionRefused, TaskStillRunning, TooManyTasks
from tool_servers.tasks.views import PendingConfirmation

MODE_SCOPES = {"read": Scope.READ, "write": Scope.WRITE, "execute": Scope.EXECUTE}
UNKNOWN_PRINCIPAL = "-"
"""The principal shown for a task submitted outside the console and the tasks server (a terminal)."""


class Refused(ValueError):
    """An action the console would not take; `field` names the form field to blame, if one."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


@dataclass(frozen=True)
class TaskRow:
    """One line of the tasks list."""

    task_id: str
    status: str
    stage: str | None
    repo: str
    principal: str
    mode: str
    text: str
    created_at: datetime
    tokens: int
    cost_usd: float | None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def age_s(self) -> float:
        return max(0.0, (datetime.now(UTC) - self.created_at).total_seconds())


@dataclass(frozen=True)
class TaskPage:
    """What a task's page shows beside its events."""

    state: TaskState | None
    """None while the task waits for the orchestrator to take it."""
    principal: str
    pending: PendingConfirmation | None


class ConsoleTasks:
    """The tasks a grant may see, and the actions it may take on them."""

    def __init__(self, bus: Bus, backend: BusTasks, *, root: Path) -> None:
        self.bus = bus
        self.backend = backend
        self.records = TaskRecords(backend.kv)
        self.root = root

    # seeing

    async def owner(self, task_id: str) -> str | None:
        """The principal that submitted `task_id` through the console or the tasks server, else None."""
        if not subjects.is_token(task_id):
            return None
        owners = await self._owners(f"*.{task_id}")
        return owners.get(task_id)

    async def visible(self, grant: Grant, task_id: str) -> bool:
        return (await self._seen(grant, task_id)) is not None

    async def _seen(self, grant: Grant, task_id: str) -> tuple[TaskState | None, str | None] | None:
        """(record, owner) of a task `grant` may see, else None: the one place of the rule."""
        if not subjects.is_token(task_id):
            return None
        owner = await self.owner(task_id)
        state = await self.records.get(task_id)
        if grant.operator:
            return (state, owner) if state is not None or owner is not None else None
        return (state, owner) if owner == grant.principal else None

    async def rows(
        self, grant: Grant, *, status: str | None = None, principal: str | None = None
    ) -> list[TaskRow]:
        """The tasks `grant` sees, newest first, filtered by `status` and `principal`."""
        owners = await self._owners()
        if grant.operator:
            states = await self.records.all()
        else:
            mine = [t for t, p in owners.items() if p == grant.principal]
            states = [s for t in mine if (s := await self.records.get(t)) is not None]
        rows = [_row(s, owners.get(s.task_id, UNKNOWN_PRINCIPAL)) for s in states]
        rows = [
            r
            for r in rows
            if (status is None or r.status == status) and (principal is None or r.principal == principal)
        ]
        return sorted(rows, key=lambda r: r.created_at, reverse=True)

    async def row(self, grant: Grant, task_id: str) -> TaskRow | None:
        seen = await self._seen(grant, task_id)
        if seen is None or seen[0] is None:
            return None
        return _row(seen[0], seen[1] or UNKNOWN_PRINCIPAL)

    async def page(self, grant: Grant, task_id: str) -> TaskPage | None:
        """The task's record and pending confirmation; None when `grant` may not see it."""
        seen = await self._seen(grant, task_id)
        if seen is None:
            return None
        state, owner = seen
        pending = None
        if state is not None and state.status not in TERMINAL_STATUSES:
            asked = await pending_confirmation(self.bus, task_id)
            if asked is not None:
                pending = PendingConfirmation(
                    request_id=asked.request_id, question=asked.question, timeout_s=asked.timeout_s
                )
        return TaskPage(state=state, principal=owner or UNKNOWN_PRINCIPAL, pending=pending)

    async def principals(self) -> list[str]:
        return sorted(set((await self._owners()).values()))

    async def _owners(self, pattern: str = ">") -> dict[str, str]:
        """task id -> principal, from the owner keys (`owner.<principal hash>.<task_id>`) that
        match `pattern` after `owner.`."""
        kv = self.backend.kv
        prefix = kv._pre + "owner."  # `$KV.<bucket>.`: the bucket's keys are its stream's subjects
        with nats_errors():
            info = await kv._js.stream_info(kv._stream, subjects_filter=prefix + pattern)
        owners: dict[str, str] = {}
        keys: list[str] = list(info.state.subjects or {})
        for subject in keys:
            key = subject.removeprefix(kv._pre)
            value = (await read(kv, key)).value
            if value:
                owners[key.rsplit(".", 1)[1]] = str(json.loads(value)["principal"])
        return owners

    # acting

    async def submit(
        self, grant: Grant, *, text: str, repo: str, mode: str, options: dict[str, JsonValue]
    ) -> str:
        """Submit as `grant.principal`, with the checks of `codeloop submit` and the tasks server.

        Raises:
            Refused: a mode beyond the grant, a blank text, a repository outside the root, or
                anything the submission check refuses (unknown model or pipeline, bad budget,
                too many unfinished tasks); nothing was submitted.
        """
        needed = MODE_SCOPES.get(mode)
        if needed is None:
            raise Refused(f"mode {mode!r} is none of read, write, execute", field="mode")
        if needed not in grant.scopes:
            raise Refused(
                f"mode {mode!r} needs the '{needed.value}' scope, and {grant.principal} was not granted it; "
                "submit in read mode, or ask for a token with that scope; nothing was submitted",
                field="mode",
                status=403,
            )
        if not text.strip():
            raise Refused("the task is blank: say what to do; nothing was submitted", field="task")
        try:
            where = Root(self.root).resolve(repo or ".")
        except ToolServerError as exc:
            raise Refused(f"repository {repo!r}: {exc}", field="repo") from None
        if not where.is_dir():
            raise Refused(f"repository {repo!r} is no directory under {self.root}", field="repo")
        submission = Submission(principal=grant.principal, text=text, repo=where, mode=mode, options=options)  # pyright: ignore[reportArgumentType] - mode is checked against MODE_SCOPES above
        try:
            return await self.backend.submit(submission)
        except TooManyTasks as exc:
            raise Refused(str(exc), status=409) from None
        except SubmissionRefused as exc:
            raise Refused(str(exc), field=exc.field) from None

    async def cancel(self, grant: Grant, task_id: str) -> bool:
        """Ask the orchestrator to stop the task; False when `grant` may not see it."""
        if not await self.visible(grant, task_id):
            return False
        state = await self.records.get(task_id)
        if state is None or state.status not in TERMINAL_STATUSES:
            from agents.client import cancel_task

            await cancel_task(self.bus, task_id, reason=f"cancelled by {grant.principal} in the web console")
        return True

    async def answer(self, grant: Grant, task_id: str, request_id: str, *, approve: bool) -> bool:
        """Approve or deny the pending confirmation `request_id`; False when `grant` may not see the task.

        Raises:
            Refused: (409) the request was answered already, or timed out.
        """
        if not await self.visible(grant, task_id):
            return False
        from agents.runtime.confirmations import answer

        answered = await answer(
            self.bus,
            task_id,
            approve=approve,
            request_id=request_id,
            by=f"{grant.principal} in the web console",
        )
        if not answered:
            raise Refused("that confirmation was answered already or timed out", status=409)
        return True

    async def continue_task(self, grant: Grant, task_id: str, text: str) -> str | None:
        """Continue the ended task with `text` (blank: as its hand-off left it) as a new task
        linked to it, owned by the task's own principal, as `codeloop continue` does; its id, or
        None when `grant` may not see the task.

        Raises:
            Refused: (409) the task has not ended; (400) it cannot go on (submitted from a
                terminal, or the continuation's check refused it).
        """
        seen = await self._seen(grant, task_id)
        if seen is None:
            return None
        owner = seen[1]
        if owner is None:
            raise Refused(
                f"task {task_id} was submitted from a terminal: continue it with `codeloop continue`"
            )
        try:
            new_id = await self.backend.continue_task(owner, task_id, text=text.strip() or None, options={})
        except TaskStillRunning as exc:
            raise Refused(str(exc), status=409) from None
        except SubmissionRefused as exc:
            raise Refused(str(exc), field=exc.field) from None
        return new_id

    def repositories(self) -> list[str]:
        """The directories a task may name: the root and its non-hidden subdirectories."""
        found = ["."]
        try:
            found += sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            pass
        return found


def _row(state: TaskState, principal: str) -> TaskRow:
    usage = state.result.usage if state.result is not None else {}
    cost = usage.get("cost_usd") if usage else state.usage.cost_usd
    return TaskRow(
        task_id=state.task_id,
        status=state.status,
        stage=state.stage,
        repo=state.task.repo,
        principal=principal,
        mode=state.task.mode,
        text=state.task.text,
        created_at=state.created_at,
        tokens=state.usage.tokens,
        cost_usd=cost,
    )
