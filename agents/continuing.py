"""Continuing an ended task: which tasks can go on, and the new task that goes on from one.

A task that ended `handed_off`, `failed`, `cancelled`, `done` or `diagnosed` can be continued;
the new task (`continued_submission`) is a new `TaskSubmitted` linked to it by a `Continuation`:

- the same snapshot, mode, pipeline and (unless the person gives others) models: the verifier
  judges the combined change against the starting tree the chain began from;
- the parent's patch as the scratch workspace's starting point, so the new patch is the combined
  one and `--apply` applies the whole;
- the parent's plan, which the planner revises with the account and the new instruction;
- what a person approved the parent changing (protected paths), since the parent's changes are
  part of the new patch;
- an account of the parent from its record (`account_of`), not its transcript: how it ended, the
  files changed, what the coder said, what each stage kind tells of its stages (`StageKind.account`:
  the reviews, the verifier's verdict and failures), the hand-off reason;
- the new instruction, if any, appended to the task's text, so every role (the retriever's search,
  a review role, the verifier's reading of the task) sees what is asked now;
- fresh budgets: the caller's, never the parent's used-up ones.

This module is pure (records in, a submission out); the client that reads the parent's record and
publishes the new task is `codeloop.continuing.continue_task`.
"""

from collections.abc import Iterable

from agents.errors import AgentError
from agents.messages import (
    MAX_TASK_TEXT,
    Budgets,
    Continuation,
    ModelNames,
    TaskState,
    TaskSubmitted,
)
from agents.messages.continuation import MAX_ACCOUNT, MAX_CONTINUED_PATCH
from agents.orchestrator.stages import installed_kinds
from agents.wording import one_line

CONTINUABLE = frozenset({"handed_off", "failed", "cancelled", "done", "diagnosed"})
"""The statuses a task may be continued from: it ended, and it started (a `rejected` one never did)."""
INSTRUCTION_HEADING = "Follow-up instruction"


class CannotContinue(AgentError, ValueError):
    """The task cannot be continued as asked: it is still running, never started, or its patch or
    text is too large to carry on. The message says which and what to do."""

    failure_class = "env.setup"

    def __init__(self, message: str, *, task_id: str, status: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.status = status


def continuable(parent: TaskState) -> None:
    """Nothing when `parent` can be continued.

    Raises:
        CannotContinue: it is still running (cancel it or wait for it), was rejected, or was
            submitted without a snapshot.
    """
    task_id, status = parent.task_id, parent.status
    if status == "rejected":
        raise CannotContinue(
            f"task {task_id} was rejected and never ran, so there is nothing to continue: submit it "
            f"again ({parent.error or 'see `codeloop status`'})",
            task_id=task_id,
            status=status,
        )
    if status not in CONTINUABLE:
        raise CannotContinue(
            f"task {task_id} is still running ({status}): wait for it to end (`codeloop watch {task_id}`) "
            f"or stop it (`codeloop cancel {task_id}`), then continue it",
            task_id=task_id,
            status=status,
        )
    if parent.task.snapshot is None:
        raise CannotContinue(
            f"task {task_id} was submitted without a snapshot: its starting tree cannot be continued",
            task_id=task_id,
            status=status,
        )
    if parent.patch and len(parent.patch) > MAX_CONTINUED_PATCH:
        raise CannotContinue(
            f"task {task_id}'s patch is {len(parent.patch)} characters, more than a continuation carries "
            f"({MAX_CONTINUED_PATCH}): apply it (`codeloop status {task_id} --patch`) and run a new task",
            task_id=task_id,
            status=status,
        )


def continued_submission(
    parent: TaskState,
    *,
    instruction: str | None,
    budgets: Budgets,
    models: ModelNames | None = None,
    require_verified: bool | None = None,
    interactive: bool = False,
) -> TaskSubmitted:
    """The task that goes on from `parent` (see the module docstring); `models` None keeps the
    parent's, `require_verified` None keeps the parent's.

    Raises:
        CannotContinue: `continuable` says no, or the text with the instruction is too long.
    """
    continuable(parent)
    instruction = (instruction or "").strip() or None
    task = parent.task
    text = (
        task.text if instruction is None else f"{task.text.rstrip()}\n\n{INSTRUCTION_HEADING}: {instruction}"
    )
    if len(text) > MAX_TASK_TEXT:
        raise CannotContinue(
            f"the task's text with the new instruction is {len(text)} characters, more than a task may "
            f"have ({MAX_TASK_TEXT}): shorten the instruction",
            task_id=parent.task_id,
            status=parent.status,
        )
    earlier = task.continuation.chain if task.continuation else []
    continuation = Continuation(
        parent_task_id=parent.task_id,
        parent_status=parent.status,
        parent_failure_class=parent.result.failure_class if parent.result else None,
        chain=[*earlier, parent.task_id],
        instruction=instruction,
        patch=parent.patch if task.mode != "read" else None,
        files_changed=list(parent.files_changed) if task.mode != "read" else [],
        plan=parent.plan,
        approvals=list(parent.approvals) if task.mode != "read" else [],
        account=account_of(parent),
    )
    return task.model_copy(
        update={
            "text": text,
            "budgets": budgets,
            "models": models if models is not None else task.models,
            "interactive": interactive,
            "require_verified": task.require_verified if require_verified is None else require_verified,
            "continuation": continuation,
        }
    )


def continued_by(task_id: str, states: Iterable[TaskState]) -> list[str]:
    """The ids of the tasks that continue `task_id` directly, oldest first (a task may be continued
    more than once: each continuation is a branch of its own)."""
    children = [s for s in states if s.task.continuation and s.task.continuation.parent_task_id == task_id]
    return [s.task_id for s in sorted(children, key=lambda s: s.created_at)]


def account_of(state: TaskState) -> str:
    """What the parent tried and what the verifier said, from its record, in at most
    `MAX_ACCOUNT` characters: how it ended and why, the steps and revisions it took, the files it
    changed, the coder's last words, the reviews' and the last verification's findings."""
    result = state.result
    lines = [f"## What task {state.task_id} did"]
    how = state.status + (f" ({result.failure_class})" if result and result.failure_class else "")
    lines.append(
        f"It ended {how} after {state.usage.requests} model requests, {len(state.steps_done)} steps and "
        f"{state.revisions} revisions."
    )
    if state.files_changed:
        lines.append("Its patch changes: " + ", ".join(state.files_changed) + ".")
    elif state.task.mode != "read":
        lines.append("It changed no file.")
    if state.answer:
        lines.append("The coder's last words: " + one_line(state.answer, 1200))
    for kind in installed_kinds().values():  # the reviews', the verification's, a plug-in kind's
        if kind.account is not None:
            lines += kind.account(state)
    if result is not None and state.status != "done" and result.report:
        lines.append("Its report: " + one_line(result.report.splitlines()[0], 600))
    text = "\n".join(lines)
    return text if len(text) <= MAX_ACCOUNT else text[: MAX_ACCOUNT - 20] + "\n[... trimmed ...]"
