"""A task's starting tree where a role works: the snapshot it was submitted with, scratch
workspaces of it, and a patch applied in one.

Every role that reads or runs the task's code works in a scratch workspace made here, never in
the user's checkout: the snapshot is materialized from the object store (or copied from the
original path when it is on this machine and unchanged) as a git repository whose HEAD is it.
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from agents.messages import TaskSubmitted
from agents.runtime.role import RoleDeps, StepError
from agents.workspace.git import run_git
from agents.workspace.materialize import materialize
from agents.workspace.scratch import open_scratch
from agents.workspace.snapshot import SnapshotRef, capture_snapshot


@asynccontextmanager
async def scratch_workspace(
    deps: RoleDeps, task_id: str, task: TaskSubmitted, label: str
) -> AsyncIterator[Path]:
    """A fresh scratch copy of the task's starting tree (a git repository whose HEAD is it)."""
    async with open_scratch(deps.scratch_dir, task_id, label) as root:
        await materialize_start(deps, task, root)
        yield root


async def materialize_start(deps: RoleDeps, task: TaskSubmitted, root: Path) -> None:
    """Write the task's starting tree into the empty directory `root`, as a git repository."""
    await materialize(deps.bus, await task_snapshot(deps, task), root)


async def task_snapshot(deps: RoleDeps, task: TaskSubmitted) -> SnapshotRef:
    """The snapshot the task starts from."""
    ref = task.snapshot
    if ref is None:
        # A submission from a client that did not capture (any NATS client may submit): capture
        # here, which works only where the path exists — the same machine.
        try:
            is_dir = await anyio.Path(task.repo).is_dir()
        except OSError:  # a directory above it closed to us: PermissionError
            is_dir = True
        if not is_dir:
            raise StepError("env.setup", f"the task has no snapshot and {task.repo} is not a directory here")
        if not os.access(task.repo, os.R_OK | os.X_OK):
            # A worker running as another user (or in its own mount namespace) sees the directory
            # but not its files: capturing would fail file by file, or worse, find an empty tree.
            raise StepError(
                "env.setup",
                f"the task has no snapshot and {task.repo} is not readable by this worker; "
                "submit with a client that captures the repository (codeloop submit, run, the tasks server)",
            )
        ref = await capture_snapshot(deps.bus, Path(task.repo))
    return SnapshotRef.model_validate(ref.model_dump())


async def apply_patch(root: Path, patch: str) -> None:
    """Apply the unified diff `patch` to the scratch workspace `root`.

    Raises:
        GitFailed: the patch does not apply.
    """
    await run_git(
        root,
        "apply",
        "--whitespace=nowarn",
        "-",
        scratch=True,
        input=patch.encode("utf-8", "surrogateescape"),
    )
