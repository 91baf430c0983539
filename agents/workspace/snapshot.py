"""Placeholder snapshot reference until the workspace package lands (replaced wholesale then)."""

from bus.messages import Message


class SnapshotRef(Message):
    digest: str
    files: int = 0
    bytes: int = 0
    source_path: str | None = None
    head: str | None = None
