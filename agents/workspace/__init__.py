"""Repository capture, scratch workspaces and patches: the user's checkout is never where agents work.

At submission `capture_snapshot()` stores the working tree — tracked and untracked files git does
not ignore, uncommitted changes included — content-addressed in the `codeloop-artifacts` object
store and returns a `SnapshotRef`. A worker, on this machine or another, `materialize()`s it into
a scratch directory from `open_scratch()` as a git repository whose HEAD commit is exactly the
snapshot; the coder and verifier work there. `workspace_patch()` is the system's diff of that
workspace against the snapshot, and `apply_to_checkout()` (`codeloop run --apply`) the only write
to the user's files, refused unless the checkout still is the snapshot's tree.

    snapshot.py  manifest.py  artifacts.py   capture: the tree, its manifest, the object store
    materialize.py  scratch.py  git.py       scratch workspaces of a snapshot (`copy_checkout`:
                                              of a checkout here, without a bus)
    patch.py                                  the workspace's diff, and `--apply` to the checkout
    start.py                                  a task's starting tree for a role: its snapshot,
                                              scratch workspaces of it, a patch applied in one
    providers.py                              where a role's workspace lives: here
                                              (`LocalWorkspaces`) or in the workspace service
                                              (`RemoteWorkspaces`), the `WORKSPACES` capability
    messages.py                               the workspace service's requests and replies
    errors.py                                 the workspace errors
"""

from agents.workspace.errors import (
    CaptureFailed,
    CheckoutChanged,
    GitFailed,
    PatchDoesNotApply,
    SnapshotTooLarge,
    SnapshotUnavailable,
    WorkspaceError,
)
from agents.workspace.materialize import copy_checkout, materialize
from agents.workspace.patch import Patch, apply_to_checkout, workspace_patch
from agents.workspace.scratch import open_scratch, sweep_scratch
from agents.workspace.snapshot import SkippedPath, SnapshotRef, capture_snapshot

__all__ = [
    "CaptureFailed",
    "CheckoutChanged",
    "GitFailed",
    "Patch",
    "PatchDoesNotApply",
    "SkippedPath",
    "SnapshotRef",
    "SnapshotTooLarge",
    "SnapshotUnavailable",
    "WorkspaceError",
    "apply_to_checkout",
    "capture_snapshot",
    "copy_checkout",
    "materialize",
    "open_scratch",
    "sweep_scratch",
    "workspace_patch",
]
