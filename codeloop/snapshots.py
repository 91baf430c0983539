"""`capture_repository()`: a task's snapshot as every submitter takes it (run, submit, eval, the tasks server) — the working tree,
and the dates the project environment needs that a scratch workspace's fresh history lacks."""

from pathlib import Path

import anyio

from agents.workspace import SnapshotRef, capture_snapshot
from agents.workspace.manifest import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES
from bus.connection import Bus
from codeloop.config.project_environment import dependency_dates


async def capture_repository(
    bus: Bus,
    repo: Path,
    *,
    dated: bool = True,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SnapshotRef:
    """`capture_snapshot(bus, repo, max_files=..., max_bytes=...)` with `source_dates` (when the checkout last changed
    its dependency files, `codeloop.config.project_environment.dependency_dates`). `dated=False`:
    none, for a repository whose git history was made just now (it would date the requirements
    to today, a new environment key each time), so its environment resolves as of the newest.

    Raises:
        the errors of `capture_snapshot`.
    """
    dates = await anyio.to_thread.run_sync(dependency_dates, Path(repo)) if dated else {}
    return await capture_snapshot(
        bus, Path(repo), max_files=max_files, max_bytes=max_bytes, source_dates=dates
    )
