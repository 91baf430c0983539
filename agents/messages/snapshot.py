"""The name of a captured working tree as messages carry it: `SnapshotRef` (and the paths left out).

The tree itself is in the object store (`agents.workspace.snapshot` captures it,
`agents.workspace.materialize` rebuilds it); the submission and every request carry only this
reference, so it is a wire contract like the other messages.
"""

from bus.messages import Message


class SkippedPath(Message):
    """A path of the working tree left out of the snapshot."""

    path: str
    """Relative to the repository root."""
    reason: str
    """Why it is not in the snapshot (e.g. a symlink leaving the tree)."""


class SnapshotRef(Message):
    """Names a captured tree; everything else about it is in the object store."""

    digest: str
    """sha256 of the canonical manifest; the manifest is stored as `manifest/<digest>`."""
    files: int
    """Entries in the manifest (regular files and symlinks)."""
    bytes: int
    """Total size of the regular files."""
    source_path: str
    """The absolute path the tree was captured from: a hint for a worker on the same machine, which
    may copy unchanged files from there; never required."""
    git_head: str | None = None
    """The repository's HEAD commit at capture, if it is a git repository with a commit."""
    skipped: list[SkippedPath] = []
    """Paths left out and why, at most the first 100."""
    skipped_count: int = 0
    """How many paths were left out in all (may exceed `len(skipped)`)."""
    source_dates: dict[str, str] = {}
    """Path -> committer date (ISO 8601) of the last commit that changed it in the source checkout,
    for the files the capturer asked about that were as committed there (the project
    environment's dependency files). A scratch workspace's history is one fresh commit, so this
    is how its environment learns the dates the checkout's would resolve requirements at."""
