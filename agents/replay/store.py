"""Where recordings live: the `codeloop-artifacts` object store, under `recording/<task_id>/`."""

from agents.replay.errors import RecordingMissing
from agents.replay.model import IndexEntry, RecordingIndex, RunRecording
from agents.workspace.artifacts import Artifacts
from bus.connection import Bus

PREFIX = "recording"


def run_name(task_id: str, step_id: str, role: str) -> str:
    return f"{PREFIX}/{task_id}/{step_id}-{role}.json"


def index_name(task_id: str) -> str:
    return f"{PREFIX}/{task_id}/index.json"


async def save_run(bus: Bus, recording: RunRecording) -> None:
    """Store the run and list it in the task's index (a step's redelivery replaces its entry).

    Steps of one task run one at a time, so the index's read-modify-write does not race."""
    store = await Artifacts.open(bus)
    name = run_name(recording.task_id, recording.step_id, recording.role)
    await store.put(name, recording.model_dump_json().encode())
    index = await load_index(bus, recording.task_id, store=store) or RecordingIndex(task_id=recording.task_id)
    runs = [r for r in index.runs if r.name != name]
    runs.append(IndexEntry(step_id=recording.step_id, role=recording.role, name=name))
    await store.put(
        index_name(recording.task_id), index.model_copy(update={"runs": runs}).model_dump_json().encode()
    )


async def load_index(bus: Bus, task_id: str, *, store: Artifacts | None = None) -> RecordingIndex | None:
    store = store or await Artifacts.open(bus)
    data = await _get_if_there(store, index_name(task_id))
    return RecordingIndex.model_validate_json(data) if data is not None else None


async def load_runs(bus: Bus, task_id: str) -> list[RunRecording]:
    """Every recorded run of `task_id`, in the order they ended.

    Raises:
        RecordingMissing: the task has no recording.
    """
    store = await Artifacts.open(bus)
    index = await load_index(bus, task_id, store=store)
    if index is None:
        raise RecordingMissing(f"task {task_id} has no recording (only LLM roles' runs are recorded)")
    names = [r.name for r in index.runs]
    found = await store.get_many(list((await store.infos(names)).keys()))
    return [RunRecording.model_validate_json(found[r.name]) for r in index.runs if r.name in found]


async def load_run(bus: Bus, task_id: str, step_id: str, role: str) -> RunRecording | None:
    store = await Artifacts.open(bus)
    name = run_name(task_id, step_id, role)
    data = await _get_if_there(store, name)
    return RunRecording.model_validate_json(data) if data is not None else None


async def _get_if_there(store: Artifacts, name: str) -> bytes | None:
    if name not in await store.infos([name]):
        return None
    return (await store.get_many([name]))[name]
