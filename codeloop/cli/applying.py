"""`codeloop run --apply`: write a finished patch into the checkout, or keep it where it can be found.

A refused apply (the checkout changed while the task ran, or the patch no longer applies) must not
lose the patch: with an embedded bus nothing else holds it once `run` exits. So whenever `--apply`
did not apply a patch the task produced, the patch is saved as `patches/<task id>.patch` in the
state directory, the result is still printed (the summary or `--json`, with the patch), and the
outcome names the file.
"""

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from codeloop.cli.common import plural
from layout import PATCHES_DIR

if TYPE_CHECKING:
    from agents.messages import TaskResult
    from agents.workspace import SnapshotRef


class ApplyOutcome(BaseModel):
    """What `--apply` did; `run --json` prints it under `apply` beside the result's fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    applied: bool
    """True when the patch is now in the checkout (uncommitted)."""
    refused: bool
    """True when a finished task's patch could not be applied (the command exits 1)."""
    message: str
    """What happened, for people."""
    patch_file: str | None = None
    """Where the patch was saved when it was not applied; None when applied or without a patch."""


def apply_result(
    result: "TaskResult", repo: Path, snapshot: "SnapshotRef", *, state_dir: Path | None
) -> ApplyOutcome:
    """Apply `result`'s patch to the checkout at `repo` when the task is done and the checkout is
    still `snapshot`'s tree; otherwise save the patch under the state directory and say why."""
    import anyio

    from agents.workspace import WorkspaceError, apply_to_checkout

    patch = result.patch
    if not patch:
        return ApplyOutcome(
            applied=False, refused=False, message=f"not applied: the task is {result.status} with no patch"
        )
    if result.status != "done":
        saved = save_patch(result, state_dir)
        return ApplyOutcome(
            applied=False,
            refused=False,
            message=f"not applied: the task is {result.status}; its patch is saved in {saved}",
            patch_file=str(saved),
        )
    try:
        anyio.run(lambda: apply_to_checkout(repo, snapshot, patch))
    except WorkspaceError as exc:
        saved = save_patch(result, state_dir)
        return ApplyOutcome(
            applied=False,
            refused=True,
            message=(
                f"{exc}. The patch is saved in {saved}: review it and apply it with "
                f"`git -C {repo} apply {saved}`, or run the task again"
            ),
            patch_file=str(saved),
        )
    return ApplyOutcome(
        applied=True,
        refused=False,
        message=f"applied the patch to {repo} ({plural(len(result.files_changed), 'file')})",
    )


def save_patch(result: "TaskResult", state_dir: Path | None) -> Path:
    """Write `result.patch` to `patches/<task id>.patch` in the state directory (mode 0600, whole
    or not at all) and return its path."""
    from codeloop.config.environment import state_dir_from

    folder = state_dir_from(state_dir) / PATCHES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.task_id}.patch"
    fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as file:
            file.write(result.patch or "")
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path.resolve()
