"""The task records: one `TaskState` per task id in the `codeloop-tasks` bucket."""

from agents.messages import TaskState
from bus import subjects
from bus.connection import Bus
from bus.records import Bucket, Records


class TaskRecords(Records[TaskState]):
    def __init__(self, kv: Bucket) -> None:
        super().__init__(kv, TaskState, prefix="task")

    @classmethod
    async def open(cls, bus: Bus) -> "TaskRecords":
        return cls(await bus.kv(subjects.TASKS_BUCKET))

    async def all(self) -> list[TaskState]:
        return sorted(await super().all(), key=lambda s: s.created_at)
