"""Errors of repository capture, scratch workspaces and patches.

    WorkspaceError
    ├── CaptureFailed        the repository could not be read (not a directory, git refused, a file changed mid-capture)
    │   └── SnapshotTooLarge the tree is over the file-count or byte limit (the message names the limit)
    ├── SnapshotUnavailable  the snapshot's manifest or a blob is missing from the object store, or the bus failed
    ├── GitFailed            a git command in a scratch workspace or the checkout failed
    ├── CheckoutChanged      `--apply` refused: the checkout no longer matches the snapshot the task started from
    └── PatchDoesNotApply    `git apply --check` rejected the patch; nothing was written

Subprocess and bus failures are translated here, where they enter, so callers (the orchestrator,
roles, the CLI) catch `WorkspaceError` and never `CalledProcessError` or `BusError`.
"""


class WorkspaceError(Exception):
    """Base for every failure of capture, materialisation, patching and applying."""


class CaptureFailed(WorkspaceError):
    """The repository could not be captured as it is."""


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


class PatchDoesNotApply(WorkspaceError):
    """The patch does not apply to the checkout; the checkout was left as it was."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr
