"""`materialize()`: a snapshot written out as a fresh git repository whose HEAD is the snapshot.

Files come from the user's path when it is still there and a file there has the manifest's
digest (a local copy, no bus traffic), else from the object store, so a worker on a machine
that never had the user's path builds the same tree. The repository gets one commit — fixed
author and date, no hooks, our config only — so the git tool server works there and every diff
is against the tree the task started from. What that fixed date hides, when the source checkout
last changed its dependency files, is kept beside it (`layout.SOURCE_DATES` in `.git/`) for the
project environment (`sandbox.environments`).
"""

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import anyio

from agents.workspace.artifacts import Artifacts
from agents.workspace.errors import CaptureFailed, GitFailed, SnapshotUnavailable, WorkspaceError
from agents.workspace.git import (
    AUTHOR_EMAIL,
    AUTHOR_NAME,
    FIXED_EPOCH,
    GIT_TIMEOUT_S,
    SCRATCH_CONFIG,
    run_git,
    scratch_env,
)
from agents.workspace.manifest import MODE_EXECUTABLE, MODE_LINK, Entry, scan_tree
from agents.workspace.snapshot import SnapshotRef, blob_name, read_manifest
from bus.connection import Bus
from layout import SOURCE_DATES, TREE_DIR

START_BRANCH = "codeloop-start"
FEED_GROUP = 500
"""Files read into one write to fast-import's stdin."""
FETCH_GROUP = 2000
"""Blobs fetched before they are written out, bounding what is held in memory at once."""
EXCLUDES = "\n".join(["__pycache__/", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", f"{TREE_DIR}/", ""])
"""Untracked outputs of running the code (bytecode, test caches) never belong in a patch."""


async def materialize(bus: Bus, ref: SnapshotRef, dest: Path) -> Path:
    """Write the tree of `ref` into `dest` (new or empty) as a git repository; returns `dest`.

    Raises:
        WorkspaceError: `dest` exists and is not empty.
        SnapshotUnavailable: the manifest or a blob is missing from the object store.
        GitFailed: git could not create the repository.
    """
    dest = Path(await anyio.Path(dest).resolve())
    await anyio.to_thread.run_sync(_prepare, dest)
    store = await Artifacts.open(bus)
    entries = await read_manifest(store, ref)
    source = Path(ref.source_path)
    local = source != dest and await anyio.to_thread.run_sync(_readable_dir, source)
    fetch = await anyio.to_thread.run_sync(_write_local, entries, source if local else None, dest)
    await _fetch_blobs(store, fetch, dest)
    await _commit(dest, ref, entries)
    return dest


async def copy_checkout(
    source: Path,
    dest: Path,
    *,
    max_files: int,
    max_bytes: int,
    source_dates: Mapping[str, str] | None = None,
) -> SnapshotRef:
    """Write the working tree of the checkout at `source` into `dest` (new or empty) as a git
    repository whose HEAD commit is that tree, as `materialize` would write its snapshot, without
    a bus: for a judgement made on this machine alone (`codeloop verify`). `source` is only read;
    `source_dates` as `SnapshotRef.source_dates`.

    Raises:
        WorkspaceError: `dest` exists and is not empty.
        CaptureFailed, SnapshotTooLarge: see `scan_tree`; also a file that changed while copied.
        GitFailed: git could not create the repository.
    """
    source = Path(await anyio.Path(source).resolve())
    dest = Path(await anyio.Path(dest).resolve())
    tree = await scan_tree(source, max_files=max_files, max_bytes=max_bytes)
    await anyio.to_thread.run_sync(_prepare, dest)
    changed = await anyio.to_thread.run_sync(_write_local, tree.entries, source, dest)
    if changed:
        raise CaptureFailed(f"{changed[0].path} changed while it was copied; try again")
    ref = SnapshotRef(
        digest=tree.digest(),
        files=len(tree.entries),
        bytes=tree.total_bytes,
        source_path=str(source),
        git_head=tree.git_head,
        source_dates=dict(source_dates or {}),
    )
    await _commit(dest, ref, tree.entries)
    return ref


def _readable_dir(source: Path) -> bool:
    """Whether the submitter's path is a directory this process may read. A worker that cannot
    (another user, another machine, a directory above it closed to us: `is_dir` then raises
    PermissionError) fetches every file from the store; one that can copies only the files whose
    digest matches the manifest."""
    try:
        return source.is_dir() and os.access(source, os.R_OK | os.X_OK)
    except OSError:
        return False


def _prepare(dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise WorkspaceError(f"{dest} is not an empty directory; a workspace is built in a new one")
    dest.mkdir(parents=True, exist_ok=True)


def _write_local(entries: list[Entry], source: Path | None, dest: Path) -> list[Entry]:
    """Write links, empty files and files unchanged at `source`; returns the entries left to fetch."""
    fetch = []
    for entry in entries:
        target = dest / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.mode == MODE_LINK:
            os.symlink(entry.link or "", target)
        elif entry.size == 0:
            _write(target, b"", entry)
        else:
            data = _unchanged_bytes(source / entry.path, entry) if source is not None else None
            if data is None:
                fetch.append(entry)
            else:
                _write(target, data, entry)
    return fetch


def _unchanged_bytes(path: Path, entry: Entry) -> bytes | None:
    """The bytes at `path` if they are the manifest's (hashed as read, so what is written is what
    was checked even if the file changes meanwhile), else None."""
    try:
        if path.is_symlink() or path.stat().st_size != entry.size:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == entry.sha256 else None


def _write(target: Path, data: bytes, entry: Entry) -> None:
    target.write_bytes(data)
    target.chmod(0o755 if entry.mode == MODE_EXECUTABLE else 0o644)


async def _fetch_blobs(store: Artifacts, entries: list[Entry], dest: Path) -> None:
    for start in range(0, len(entries), FETCH_GROUP):
        group = entries[start : start + FETCH_GROUP]
        blobs = await store.get_many(sorted({blob_name(entry.sha256) for entry in group}))
        await anyio.to_thread.run_sync(_write_fetched, group, blobs, dest)


def _write_fetched(entries: list[Entry], blobs: dict[str, bytes], dest: Path) -> None:
    for entry in entries:
        data = blobs[blob_name(entry.sha256)]
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise SnapshotUnavailable(f"blob {entry.sha256} of {entry.path} does not match its digest")
        _write(dest / entry.path, data, entry)


async def _commit(dest: Path, ref: SnapshotRef, entries: list[Entry]) -> None:
    """Make `dest` a repository whose HEAD commit holds exactly `entries`, index up to date.

    `git add` of a thousand files writes a thousand loose objects, most of a second on a slow disk;
    `git fast-import` writes the same objects as one pack. The blobs are fed from the files just
    written, so the commit is the work tree byte for byte.
    """
    await run_git(
        dest, "init", "--quiet", "--template=", f"--initial-branch={START_BRANCH}", ".", scratch=True
    )
    await anyio.to_thread.run_sync(_configure, dest, ref.source_dates)
    message = f"codeloop snapshot {ref.digest}\n\nsource: {ref.source_path}\nhead: {ref.git_head or '-'}\n"
    cmd = ["git", "-C", str(dest), "-c", "core.hooksPath=/dev/null", "fast-import", "--quiet", "--done"]
    try:
        with anyio.fail_after(GIT_TIMEOUT_S):
            async with await anyio.open_process(cmd, env=scratch_env()) as process:
                assert process.stdin is not None and process.stderr is not None
                try:
                    for start in range(0, len(entries), FEED_GROUP):
                        group = entries[start : start + FEED_GROUP]
                        await process.stdin.send(
                            await anyio.to_thread.run_sync(_blobs_stream, dest, group, start)
                        )
                    await process.stdin.send(_commit_stream(entries, message))
                except (anyio.BrokenResourceError, BrokenPipeError):
                    pass  # fast-import stopped reading: it failed, and its stderr says why
                await process.stdin.aclose()
                code = await process.wait()
                err = b"".join([chunk async for chunk in process.stderr]) if code else b""
    except TimeoutError:
        raise GitFailed(f"git fast-import took longer than {GIT_TIMEOUT_S:.0f} s in {dest}") from None
    except OSError as exc:
        raise GitFailed(f"cannot run git ({exc}); install git and make sure it is on PATH") from exc
    if code != 0:
        text = err.decode(errors="replace").strip()
        raise GitFailed(f"git fast-import failed in {dest}: {text or 'exit ' + str(code)}", stderr=text)
    # The index from HEAD, with the files' stat data, so `git status` starts clean and cheap.
    await run_git(dest, "reset", "--quiet", "--mixed", scratch=True)


def _configure(dest: Path, source_dates: dict[str, str]) -> None:
    with (dest / ".git" / "config").open("a") as config:  # one write instead of a git call per key
        for key, value in SCRATCH_CONFIG.items():
            section, _, name = key.partition(".")
            config.write(f"[{section}]\n\t{name} = {value}\n")
    info = dest / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "exclude").write_text(EXCLUDES)
    # Always written, empty too: this repository's own commit dates say nothing of the source's.
    (dest / ".git" / SOURCE_DATES).write_text(json.dumps(source_dates, sort_keys=True))


def _blobs_stream(dest: Path, entries: list[Entry], first_mark: int) -> bytes:
    parts = []
    for offset, entry in enumerate(entries):
        data = (entry.link or "").encode() if entry.mode == MODE_LINK else (dest / entry.path).read_bytes()
        parts.append(b"blob\nmark :%d\ndata %d\n" % (first_mark + offset + 1, len(data)))
        parts.append(data)
        parts.append(b"\n")
    return b"".join(parts)


def _commit_stream(entries: list[Entry], message: str) -> bytes:
    body = message.encode()
    lines = [
        f"commit refs/heads/{START_BRANCH}".encode(),
        f"author {AUTHOR_NAME} <{AUTHOR_EMAIL}> {FIXED_EPOCH} +0000".encode(),
        f"committer {AUTHOR_NAME} <{AUTHOR_EMAIL}> {FIXED_EPOCH} +0000".encode(),
        b"data %d" % len(body),
        body,
    ]
    lines += [
        f"M {entry.mode} :{mark} {_quote(entry.path)}".encode() for mark, entry in enumerate(entries, 1)
    ]
    return b"\n".join(lines) + b"\n\ndone\n"


def _quote(path: str) -> str:
    """A path as fast-import reads it: C-style quoted when it could be misread."""
    if not any(ch in path for ch in '"\\\n') and not path.startswith(" "):
        return path
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
