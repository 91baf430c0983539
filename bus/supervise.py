"""Supervision: restart a crashed long-running loop with back-off, give up if it keeps crashing.

The loop runs in its own task group, so a crash ends it and everything it started before the
supervisor decides; "Exceptions always propagate" (trio's design) still holds one level up: after
`max_restarts` within `window_s`, the last crash is re-raised to the owner (`codeloop/wiring/process.py`).
"""

import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
from anyio.abc import TaskStatus

log = logging.getLogger("codeloop.bus")

Startable = Callable[..., Coroutine[Any, Any, None]]
"""An async function taking `task_status=` and calling `task_status.started()` once ready."""


@dataclass
class RestartPolicy:
    max_restarts: int = 10
    window_s: float = 60.0
    backoff_s: tuple[float, ...] = (0.05, 0.5, 2.0, 5.0)


@dataclass
class Supervisor:
    """Keeps one loop running; `restarts` lists the crashes it recovered from."""

    name: str
    start: Startable
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    restarts: list[BaseException] = field(default_factory=list)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run `start` until it returns; restart it after a crash; re-raise when crashing too often."""
        recent: list[float] = []
        started = False
        while True:
            try:
                async with anyio.create_task_group() as tg:
                    await tg.start(self.start)
                    if not started:
                        started = True
                        task_status.started()
                return
            except Exception as exc:
                now = time.monotonic()
                recent = [t for t in recent if now - t < self.policy.window_s] + [now]
                if len(recent) > self.policy.max_restarts:
                    log.error(
                        "%s crashed %d times in %.0f s; giving up",
                        self.name,
                        len(recent),
                        self.policy.window_s,
                    )
                    raise
                self.restarts.append(_leaf(exc))
                delay = self.policy.backoff_s[min(len(recent), len(self.policy.backoff_s)) - 1]
                log.warning("%s crashed (%r); restarting in %.2f s", self.name, _leaf(exc), delay)
                await anyio.sleep(delay)


def _leaf(exc: BaseException) -> BaseException:
    """The one real error inside the task groups' wrappers, for logs and `restarts`."""
    while (inner := _only_member(exc)) is not None:
        exc = inner
    return exc


def _only_member(exc: BaseException) -> BaseException | None:
    """The single exception an exception group wraps; None for a plain error or several."""
    if isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        if len(group.exceptions) == 1:
            return group.exceptions[0]
    return None
