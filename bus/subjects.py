"""Every NATS name codeloop uses, built in one place (see `bus/__init__.py` for the scheme)."""

import hashlib
import re
from dataclasses import dataclass

TASKS_STREAM = "CODELOOP_TASKS"
WORK_STREAM = "CODELOOP_WORK"
EVENTS_STREAM = "CODELOOP_EVENTS"
TASKS_BUCKET = "codeloop-tasks"
"""KV: one `TaskState` record per task id."""
HANDLED_BUCKET = "codeloop-handled"
"""KV: ids of messages a role has finished handling, so a redelivery skips the handler."""
CONFIG_BUCKET = "codeloop-config"
"""KV: the configuration center's document (key `document`), its history kept (`bus.center`)."""
USAGE_BUCKET = "codeloop-usage"
"""KV: the quota ledger, one record per principal and UTC day (`bus.ledger`)."""
ARTIFACTS_BUCKET = "codeloop-artifacts"
"""Object store: repository snapshots (`blob/`, `manifest/`) and replay recordings (`recording/`)."""

TASK_SUBMIT = "codeloop.task.submit"
TASK_CANCEL = "codeloop.task.cancel"
TASKS_ALL = "codeloop.task.>"
WORK_ALL = "codeloop.work.>"
EVENTS_ALL = "codeloop.events.>"
ORCHESTRATOR = "orchestrator"
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def is_token(text: str) -> bool:
    """True when `text` can be one subject token and one KV key part as it is."""
    return bool(_TOKEN.match(text))


def token(text: str) -> str:
    """`text` if it is a safe subject token, else a stable hash of it (ids from foreign peers)."""
    return text if is_token(text) else "h" + hashlib.sha256(text.encode()).hexdigest()[:32]


def task_result(role: str) -> str:
    """Where workers of `role` publish results; the orchestrator consumes `codeloop.task.>`."""
    return f"codeloop.task.result.{token(role)}"


def work(role: str) -> str:
    return f"codeloop.work.{token(role)}"


def event(task_id: str, name: str) -> str:
    return f"codeloop.events.{token(task_id)}.{token(name)}"


def task_events(task_id: str) -> str:
    return f"codeloop.events.{token(task_id)}.>"


@dataclass(frozen=True)
class RoleAddress:
    """Where a role's messages live: its stream, the subjects it consumes, its shared durable."""

    role: str
    stream: str
    filter_subject: str

    @property
    def durable(self) -> str:
        return f"codeloop-{token(self.role)}"

    @classmethod
    def worker(cls, role: str) -> "RoleAddress":
        """A worker role consuming `codeloop.work.<role>`."""
        return cls(role=role, stream=WORK_STREAM, filter_subject=work(role))

    @classmethod
    def orchestrator(cls) -> "RoleAddress":
        """The orchestrator consumes submissions and every role's results."""
        return cls(role=ORCHESTRATOR, stream=TASKS_STREAM, filter_subject=TASKS_ALL)
