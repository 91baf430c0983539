"""The configuration center as the orchestrator uses it: the watched revision, parsed once.

`WatchedCenter` is the `agents.orchestrator.center.CenterLayer` of a process: `settle` reads the
revision its `bus.center.CenterWatch` holds (memory, no round trip) and applies it to the task
(`codeloop.config.center.settle`). A revision that does not read as a document (written past
`codeloop config push`'s checks) is not applied: the task runs as submitted, its record naming no
revision, and the problem is logged once per revision.
"""

import logging
from datetime import UTC, datetime

from agents.messages import TaskSubmitted
from agents.orchestrator.center import Settled
from agents.quotas import Breach, Ledger, Quota, breach, quota_for, utc_day
from bus.center import CenterEntry, CenterWatch, center_bucket, latest
from bus.connection import Bus
from bus.errors import BusError, BusNotFound
from codeloop.config.center import parsed_revision, settle

log = logging.getLogger("codeloop.center")


class WatchedCenter:
    """The center's current revision in this process, applied to the tasks it claims."""

    def __init__(self, watch: CenterWatch) -> None:
        self.watch = watch
        self._unreadable: set[int] = set()

    def settle(self, task: TaskSubmitted, principal: str) -> Settled:
        entry = self.watch.current
        if entry is None:
            return Settled(task=task, revision=None)
        config = parsed_revision(entry.record.document, entry.record.base_dir)
        if config is None:
            if entry.revision not in self._unreadable:
                self._unreadable.add(entry.revision)
                log.error(
                    "configuration center revision %d does not read as a configuration document; "
                    "tasks run without it until an operator pushes a good one (codeloop config push)",
                    entry.revision,
                )
            return Settled(task=task, revision=None)
        return settle(task, config, revision=entry.revision, principal=principal)


async def center_quota(bus: Bus, principal: str) -> tuple[CenterEntry | None, tuple[Quota, str] | None]:
    """The center's current revision and `principal`'s quota in it with its key (None: none applies)."""
    try:
        entry = await latest(await center_bucket(bus))
    except BusNotFound:
        return None, None
    config = parsed_revision(entry.record.document, entry.record.base_dir) if entry else None
    return entry, (quota_for(config.quotas, principal) if config is not None else None)


async def quota_breach(bus: Bus, principal: str, *, now: datetime | None = None) -> Breach | None:
    """The quota `principal` is over right now (a new task would be refused), or None: what
    `submit`, `run` and the tasks server check before anything starts. Two reads, no watch: a
    submitting command is short-lived. The orchestrator checks again, atomically, when it claims
    the task (`agents.quotas.Ledger.admit`)."""
    _, found = await center_quota(bus, principal)
    if found is None:
        return None
    quota, key = found
    try:
        ledger = await Ledger.open(bus)
    except BusError:
        return None  # a bus no serve prepared has counted nothing yet
    used = await ledger.day(principal, utc_day(now or datetime.now(UTC)))
    return breach(quota, key, used, starting=True)
