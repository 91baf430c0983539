"""What the orchestrator takes from the configuration center when it claims a task.

The center's document is configuration (its schema, its layers, its checks live in
`codeloop.config.center`); the orchestrator only needs what it means for one submission, through
`CenterLayer`: the task with the center's values applied where the submitter did not pin them
(`TaskSubmitted.pinned`), the revision they came from, and the principal's quota. The composition
root builds one over a `bus.center.CenterWatch`, so settling a task reads memory, not the bus.
"""

from dataclasses import dataclass
from typing import Protocol

from agents.messages import TaskSubmitted
from agents.quotas import Quota


@dataclass(frozen=True)
class Settled:
    """A submission under the center's current revision."""

    task: TaskSubmitted
    """The submission with the center's models, budgets and verification applied below its pins."""
    revision: int | None
    """The revision applied; None when the bus has no center document."""
    quota: Quota | None = None
    """The principal's quota; None: no quota applies."""
    quota_key: str = ""
    """Where the quota comes from: `quotas.NAME` or `quotas.default`."""


class CenterLayer(Protocol):
    """The configuration center as the orchestrator sees it."""

    def settle(self, task: TaskSubmitted, principal: str) -> Settled:
        """`task` under the current revision, and `principal`'s quota (pure: no I/O)."""
        ...


class NoCenter:
    """No configuration center: every task as submitted, no quota."""

    def settle(self, task: TaskSubmitted, principal: str) -> Settled:
        return Settled(task=task, revision=None)
