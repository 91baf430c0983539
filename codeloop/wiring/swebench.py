"""SWE-bench workers as part of `codeloop serve`: `--role swebench` (repeatable: one instance at
a time per occurrence) runs `codeloop.swebench.worker.serve_workers` beside this process's actors,
taking the instances of any `codeloop swebench` run on the bus (their own stream and durable
consumer, `codeloop.swebench.distribution`, never `codeloop.task.>`).

It is not an actor of the agents' pipeline (no stage, no `codeloop.roles` entry point): `serve`
takes its occurrences out of the roles before making actors and starts it as one more supervised
loop, as it starts its watchers.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from bus.connection import Bus

SWEBENCH_ROLE = "swebench"


@dataclass(frozen=True)
class SwebenchWorkers:
    """The SWE-bench worker slots of one serve process."""

    jobs: int
    """Instances run at once here (the occurrences of `--role swebench`)."""
    repos_dir: Path | None = None
    """This machine's repositories (clones, mirrors or bundles; `codeloop swebench --repos`)."""
    idle_exit_s: float | None = None
    """Return after this many seconds without work (`codeloop swebench-worker --idle-exit`, for
    batch pods); None: until cancelled (serve's)."""


def split_roles(roles: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """The actor roles of `roles`, and how many SWE-bench worker slots it asks for."""
    actors = tuple(role for role in roles if role != SWEBENCH_ROLE)
    return actors, len(roles) - len(actors)


async def run_swebench_workers(
    bus: Bus, workers: SwebenchWorkers, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Take and run SWE-bench instances from the bus until cancelled."""
    from codeloop.swebench.cli_support import cache_dir, settings_for
    from codeloop.swebench.worker import serve_workers

    await serve_workers(
        bus,
        settings_for=settings_for,
        repos_dir=workers.repos_dir,
        cache_dir=cache_dir(),
        jobs=workers.jobs,
        idle_exit_s=workers.idle_exit_s,
        task_status=task_status,
    )
