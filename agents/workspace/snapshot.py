"""`capture_snapshot()`: the user's working tree, stored content-addressed in the object store.

Each file's bytes go to `blob/<sha256>` (a blob already there is not sent again, so a second
task on the same repository uploads only what changed), the manifest to `manifest/<digest>`;
the `SnapshotRef` naming it (`agents.messages.snapshot`) travels in the task's messages. A worker anywhere can rebuild the tree
from the bus alone (`materialize`).
"""

import hashlib
from collections.abc import Mapping
from pathlib import Path

import anyio

from agents.messages.snapshot import SkippedPath, SnapshotRef
from agents.workspace.artifacts import Artifacts
from agents.workspace.errors import CaptureFailed, SnapshotUnavailable
from agents.workspace.manifest import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    MODE_LINK,
    Entry,
    parse_manifest,
    scan_tree,
)
from bus.connection import Bus

UPLOAD_GROUP_FILES = 1000
UPLOAD_GROUP_BYTES = 16 * 1024 * 1024
"""Blobs read and published together: large enough to pipeline, small enough to hold in memory."""
SKIPPED_CAP = 100


def blob_name(sha256: str) -> str:
    return f"blob/{sha256}"


def manifest_name(digest: str) -> str:
    return f"manifest/{digest}"


async def capture_snapshot(
    bus: Bus,
    repo: Path,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    source_dates: Mapping[str, str] | None = None,
) -> SnapshotRef:
    """Store the working tree at `repo` in the object store and return its reference;
    `source_dates` (see `SnapshotRef.source_dates`) goes into the reference as given.

    Nothing in `repo` is written (git runs read-only, without optional locks).

    Raises:
        SnapshotTooLarge: over `max_files` files or `max_bytes` bytes; nothing was uploaded.
        CaptureFailed: `repo` is not a readable directory, or a file changed while it was captured.
        SnapshotUnavailable: the object store failed.
    """
    repo = Path(await anyio.Path(repo).resolve())
    tree = await scan_tree(repo, max_files=max_files, max_bytes=max_bytes)
    store = await Artifacts.open(bus)
    manifest = tree.manifest_bytes()
    digest = tree.digest()
    if manifest_name(digest) not in await store.infos([manifest_name(digest)]):
        await _upload_blobs(store, repo, tree.entries)
        # The manifest goes last: once it exists, every blob it names does.
        await store.put(manifest_name(digest), manifest)
    skipped = [SkippedPath(path=path, reason=reason) for path, reason in tree.skipped[:SKIPPED_CAP]]
    return SnapshotRef(
        digest=digest,
        files=len(tree.entries),
        bytes=tree.total_bytes,
        source_path=str(repo),
        git_head=tree.git_head,
        skipped=skipped,
        skipped_count=len(tree.skipped),
        source_dates=dict(source_dates or {}),
    )


async def _upload_blobs(store: Artifacts, repo: Path, entries: list[Entry]) -> None:
    unique: dict[str, Entry] = {}
    for entry in entries:
        if entry.mode != MODE_LINK and entry.size > 0:
            unique.setdefault(entry.sha256, entry)
    present = await store.infos([blob_name(sha) for sha in unique])
    missing = [entry for sha, entry in unique.items() if blob_name(sha) not in present]
    group: list[Entry] = []
    size = 0
    for entry in missing:
        group.append(entry)
        size += entry.size
        if size >= UPLOAD_GROUP_BYTES or len(group) >= UPLOAD_GROUP_FILES:
            await _upload_group(store, repo, group)
            group, size = [], 0
    if group:
        await _upload_group(store, repo, group)


async def _upload_group(store: Artifacts, repo: Path, group: list[Entry]) -> None:
    items = await anyio.to_thread.run_sync(_read_group, repo, group)
    await store.put_many(items)


def _read_group(repo: Path, group: list[Entry]) -> list[tuple[str, bytes]]:
    items = []
    for entry in group:
        path = repo / entry.path
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CaptureFailed(f"cannot read {path}: {exc.strerror}") from exc
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise CaptureFailed(f"{path} changed while the snapshot was taken; submit the task again")
        items.append((blob_name(entry.sha256), data))
    return items


async def read_manifest(store: Artifacts, ref: SnapshotRef) -> list[Entry]:
    """The entries of `ref`'s manifest, checked against its digest.

    Raises:
        SnapshotUnavailable: the manifest is missing or does not match its digest.
    """
    data = await store.get(manifest_name(ref.digest))
    if hashlib.sha256(data).hexdigest() != ref.digest:
        raise SnapshotUnavailable(f"manifest {ref.digest} in the object store does not match its digest")
    try:
        return parse_manifest(data)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SnapshotUnavailable(f"manifest {ref.digest} cannot be read: {exc}") from exc
