"""A replay of a recorded task: what to resubmit, and what the replay found.

    task = await replay_submission(bus, "t-1")       # the original submission, models → replay:t-1
    envelope, _ = await submit_task(bus, task)       # runs like any task (tools run again)
    ...wait for its result...
    divergences = await divergences_of(bus, envelope.task_id)

The resubmitted task is the original `TaskSubmitted` from the task record: the same text, mode,
budgets and snapshot. Only its models change: each LLM role the original ran with a model gets
`replay:<original task id>`, so the recorder answers that role's requests from its recording.
"""

from agents.messages import LLM_ROLES, ModelNames, TaskResult, TaskState, TaskSubmitted
from agents.models.names import REPLAY_PREFIX
from agents.orchestrator.records import TaskRecords
from agents.replay.errors import RecordingMissing
from agents.replay.model import Divergence
from agents.replay.store import load_index, load_runs
from bus.connection import Bus


async def original_state(bus: Bus, task_id: str) -> TaskState:
    """The task's record, checked to have a recording.

    Raises:
        RecordingMissing: no such task, or it has no recording.
    """
    state = await (await TaskRecords.open(bus)).get(task_id)
    if state is None:
        raise RecordingMissing(f"no task {task_id!r} on this bus (see `codeloop status`)")
    if await load_index(bus, task_id) is None:
        raise RecordingMissing(
            f"task {task_id} has no recording: only runs of LLM roles are recorded (a diagnose-mode "
            "task has none), by a serve whose recorder is on"
        )
    return state


async def replay_submission(bus: Bus, task_id: str) -> TaskSubmitted:
    """The original submission of `task_id`, its LLM roles' models replaced by `replay:TASK_ID`.

    Raises:
        RecordingMissing: no such task, or it has no recording.
    """
    task = (await original_state(bus, task_id)).task
    if task.snapshot is None:
        raise RecordingMissing(
            f"task {task_id} was submitted without a snapshot: its tree cannot be replayed"
        )
    replayed = {role: f"{REPLAY_PREFIX}{task_id}" for role in LLM_ROLES if task.models.for_role(role)}
    return task.model_copy(update={"models": ModelNames(**replayed), "interactive": False})  # pyright: ignore[reportArgumentType] - the keys are built-in role names, each a str field of ModelNames


async def divergences_of(bus: Bus, replay_task_id: str) -> list[Divergence]:
    """Every divergence the replay's runs found, in the order they happened."""
    try:
        runs = await load_runs(bus, replay_task_id)
    except RecordingMissing:
        return []
    return [d for run in runs for d in run.divergences]


def replayed_result(result: TaskResult, divergences: list[Divergence]) -> dict:
    """The object `codeloop replay --json` prints: the result (the shape of `run --json`) and the
    divergences (empty when every observation matched)."""
    return {**result.model_dump(mode="json"), "divergences": [d.model_dump(mode="json") for d in divergences]}
