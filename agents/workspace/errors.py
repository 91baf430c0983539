"""Errors of repository capture, scratch workspaces and patches.

    WorkspaceError             failure_class
    ├── CaptureFailed          env.setup   the repository could not be read (not a directory, git
    │   │                                  refused, a file changed mid-capture)
    │   └── SnapshotTooLarge   env.setup   over the file-count or byte limit (the message names it)
    ├── SnapshotUnavailable    env.infra   the manifest or a blob is missing from the object store,
    │                                      or the bus failed
    ├── GitFailed              env.infra   a git command in a scratch workspace or the checkout failed
    ├── CheckoutChanged        env.setup   `--apply` refused: the checkout no longer is the snapshot's tree
    └── PatchDoesNotApply      env.setup   `git apply --check` rejected the patch; nothing was written

`failure_class` is the class a task's result reports when one of these ends a step, in the
vocabulary the other agent errors use.

Subprocess and bus failures are translated where they enter (`git.py`, `artifacts.py`), so callers (the orchestrator,
roles, the CLI) catch `WorkspaceError` and never `CalledProcessError` or `BusError`.
"""

from typing import ClassVar

from agents.errors import AgentError


class WorkspaceError(AgentError):
    """Base for every failure of capture, materialisation, patching and applying."""

    failure_class: ClassVar[str] = "env.infra"


class CaptureFailed(WorkspaceError):
    """The repository could not be captured as it is."""

    failure_class = "env.setup"


class SnapshotTooLarge(CaptureFailed):
    """The tree is bigger than the limit it was captured with."""

    def __init__(self, message: str, *, limit: int, actual: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.actual = actual


class SnapshotUnavailable(WorkspaceError):
    """The snapshot cannot be read back: an object is missing or the bus failed."""


class GitFailed(WorkspaceError):
    """A git command failed; `stderr` holds git's own words."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class CheckoutChanged(WorkspaceError):
    """The checkout's tree differs from the snapshot the patch was made against."""

    failure_class = "env.setup"


class PatchDoesNotApply(WorkspaceError):
    """The patch does not apply to the checkout; the checkout was left as it was."""

    failure_class = "env.setup"

    def __init__(self, message: str, *, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr
