"""Quotas per principal and the ledger that counts against them.

A quota (`[quotas.default]`, `[quotas.NAME]` of the configuration center) bounds what one
principal — the tasks server's caller, or `local` for the command line — may have running and
may use per UTC day. The ledger is one record per principal and day in the KV bucket
`codeloop-usage`, key `day.<principal>.<YYYY-MM-DD>`, changed only by compare-and-set
(`bus.records.compare_and_set`), so every orchestrator of a fleet counts into it exactly.

Exactness: the record holds each task's usage as the task's own record states it, *set* (not
added) after every step the orchestrator applies. A redelivered step, a restarted orchestrator or
a step run twice after a SIGKILL writes the same total again; the day's usage is the sum over
the tasks, so it equals the sum of the tasks' recorded usage whatever was delivered twice. A task
counts on the UTC day it started.
"""

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field

from agents.messages import QuotaAllowance, Usage
from bus import subjects
from bus.connection import Bus
from bus.messages import Message
from bus.records import Bucket, compare_and_set, keys_under, read

LOCAL_PRINCIPAL = "local"
"""The principal of tasks submitted from the command line (`codeloop run`, `submit`)."""


class Quota(Message):
    """What one principal may do; a limit left out is no limit."""

    max_running: int | None = Field(default=None, ge=1)
    """Unfinished tasks at a time."""
    tasks_per_day: int | None = Field(default=None, ge=0)
    """Tasks started per UTC day."""
    tokens_per_day: int | None = Field(default=None, ge=0)
    """Model tokens (input + output) per UTC day, all tasks together."""
    cost_per_day_usd: float | None = Field(default=None, ge=0)
    """US dollars of model use per UTC day, all tasks together."""


def quota_for(quotas: dict[str, Quota], principal: str) -> tuple[Quota, str] | None:
    """The quota of `principal` and the table it comes from (`quotas.NAME` or `quotas.default`)."""
    if principal in quotas:
        return quotas[principal], f"quotas.{principal}"
    if "default" in quotas:
        return quotas["default"], "quotas.default"
    return None


class TaskUsage(Message):
    tokens: int = 0
    cost_usd: float = 0.0
    running: bool = True


class DayUsage(Message):
    """One principal's ledger record of one UTC day."""

    principal: str
    day: str
    """`YYYY-MM-DD`, UTC."""
    tasks: dict[str, TaskUsage] = {}
    """Task id -> what it used so far (its record's usage) and whether it still runs."""

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.tasks.values())

    @property
    def cost_usd(self) -> float:
        return round(sum(t.cost_usd for t in self.tasks.values()), 6)

    @property
    def running(self) -> list[str]:
        return [task_id for task_id, t in self.tasks.items() if t.running]


def utc_day(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).date().isoformat()


def resets_at(day: str) -> dt.datetime:
    """When the day `day` (UTC) ends and its quotas start again."""
    return dt.datetime.combine(dt.date.fromisoformat(day) + dt.timedelta(days=1), dt.time(), dt.UTC)


@dataclass(frozen=True)
class Breach:
    """A limit a principal reached: which, how much was used, the limit, and when it resets."""

    principal: str
    limit_name: str
    """`tokens_per_day`, `cost_per_day_usd`, `tasks_per_day` or `max_running`."""
    used: float
    limit: float
    key: str
    """The center's key that raises it (`quotas.alice.tokens_per_day`)."""
    resets: dt.datetime | None
    """None for `max_running`: it frees when a task ends."""

    def describe(self) -> str:
        used, limit = _number(self.used), _number(self.limit)
        when = (
            f"it resets at {self.resets.strftime('%Y-%m-%dT%H:%M:%SZ')}"
            if self.resets
            else "it frees when one of its tasks ends"
        )
        return (
            f"principal {self.principal!r} is over its quota {self.limit_name}: {used} used of {limit}; "
            f"{when}; an operator raises it with {self.key} in the configuration center "
            "(codeloop config push)"
        )


def _number(value: float) -> str:
    return f"{value:,.4f}".rstrip("0").rstrip(".") if not float(value).is_integer() else f"{int(value):,}"


def breach(
    quota: Quota, key: str, usage: DayUsage, *, starting: bool, extra: Usage | None = None
) -> Breach | None:
    """The first limit of `quota` that `usage` (plus `extra`, a running task's own use not yet in
    the ledger) reached; `starting`: a new task would start, so the task limits count too."""
    tokens = usage.tokens + (extra.tokens if extra else 0)
    cost = usage.cost_usd + ((extra.cost_usd or 0.0) if extra else 0.0)
    checks: list[tuple[str, float, float | None]] = []
    if starting:
        checks += [
            ("max_running", len(usage.running), quota.max_running),
            ("tasks_per_day", len(usage.tasks), quota.tasks_per_day),
        ]
    checks += [
        ("tokens_per_day", tokens, quota.tokens_per_day),
        ("cost_per_day_usd", cost, quota.cost_per_day_usd),
    ]
    for name, used, limit in checks:
        if limit is not None and used >= limit:
            resets = None if name == "max_running" else resets_at(usage.day)
            return Breach(usage.principal, name, used, limit, f"{key}.{name}", resets)
    return None


def ledger_key(principal: str, day: str) -> str:
    return f"day.{subjects.token(principal)}.{day}"


class Ledger:
    """The quota ledger in the bucket `codeloop-usage`."""

    def __init__(self, kv: Bucket) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, bus: Bus) -> "Ledger":
        return cls(await bus.kv(subjects.USAGE_BUCKET))

    async def day(self, principal: str, day: str) -> DayUsage:
        found = await read(self.kv, ledger_key(principal, day))
        if found.value is None:
            return DayUsage(principal=principal, day=day)
        return DayUsage.model_validate_json(found.value)

    async def record(
        self, principal: str, day: str, task_id: str, usage: Usage, *, running: bool
    ) -> DayUsage:
        """Set `task_id`'s entry of the day to `usage` (the task's total so far); atomic."""
        entry = TaskUsage(tokens=usage.tokens, cost_usd=round(usage.cost_usd or 0.0, 6), running=running)

        def change(raw: bytes | None) -> bytes | None:
            current = DayUsage.model_validate_json(raw) if raw else DayUsage(principal=principal, day=day)
            if current.tasks.get(task_id) == entry:
                return None
            return (
                current.model_copy(update={"tasks": {**current.tasks, task_id: entry}})
                .model_dump_json()
                .encode()
            )

        stored = await compare_and_set(self.kv, ledger_key(principal, day), change)
        return (
            DayUsage.model_validate_json(stored.value)
            if stored.value
            else DayUsage(principal=principal, day=day)
        )

    async def admit(
        self, principal: str, day: str, task_id: str, check: Callable[[DayUsage], Breach | None]
    ) -> Breach | None:
        """Enter `task_id` as running on the day unless `check` finds a limit reached; atomic, so
        of two tasks racing for the last slot one gets it. A task entered before is admitted
        again (a redelivered submission). The breach, or None once entered."""
        found: list[Breach] = []

        def change(raw: bytes | None) -> bytes | None:
            found.clear()
            current = DayUsage.model_validate_json(raw) if raw else DayUsage(principal=principal, day=day)
            if task_id in current.tasks:
                return None
            reached = check(current)
            if reached is not None:
                found.append(reached)
                return None
            tasks = {**current.tasks, task_id: TaskUsage()}
            return current.model_copy(update={"tasks": tasks}).model_dump_json().encode()

        await compare_and_set(self.kv, ledger_key(principal, day), change)
        return found[0] if found else None

    async def days(self, principal: str | None = None) -> list[DayUsage]:
        """Every record (of `principal`), newest day first."""
        head = f"day.{subjects.token(principal)}." if principal else "day."
        found: list[DayUsage] = []
        for key in await keys_under(self.kv, head):
            value = (await read(self.kv, key)).value
            if value:
                found.append(DayUsage.model_validate_json(value))
        return sorted(found, key=lambda d: (d.day, d.principal), reverse=True)


def allowance(quota: Quota, key: str, usage: DayUsage, task_id: str) -> QuotaAllowance | None:
    """How `quota` bounds the running task `task_id`, given the day's ledger; None when the quota
    sets neither a token nor a cost limit."""
    if quota.tokens_per_day is None and quota.cost_per_day_usd is None:
        return None
    own = usage.tasks.get(task_id, TaskUsage())
    return QuotaAllowance(
        principal=usage.principal,
        key=key,
        day=usage.day,
        tokens_per_day=quota.tokens_per_day,
        cost_per_day_usd=quota.cost_per_day_usd,
        others_tokens=usage.tokens - own.tokens,
        others_cost_usd=round(usage.cost_usd - own.cost_usd, 6),
    )
