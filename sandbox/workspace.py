"""The workspace cap of the gVisor backend: the sandbox works on a mirror of the workspace kept on
a size-limited tmpfs, synchronised with the real workspace at each command's boundaries.

Why a mirror: a runsc bind mount has no quota, so a payload can fill the host disk through it
, and filesystem project quotas need a feature and tools we cannot
assume on the host. A host tmpfs mounted with `size=` gives ENOSPC at the cap. Before each
command the tmpfs is resized to what it holds plus `workspace_write_mb`, so each command may add
at most that much.

Synchronisation is by (kind, size, mtime) snapshots of both sides: before a command, what the host
changed since the last sync is copied into the mirror (host tools edit the workspace between
commands); after it, what the command changed is copied back, deletions included. A command sees
its own writes at once; the host sees them when the command returns. Costs: one copy of the
workspace in RAM per sandbox, and two directory walks per command, both growing with the
workspace's file count.

Hostile entries never fail a sync: FIFOs, sockets and devices are not in the snapshots (they are
not content, and opening a FIFO blocks), symlinks are copied as links and never followed (a loop
is just a link), names need not be UTF-8, and an entry that cannot be read is left out (it stays
as it is on the side that has it) instead of failing the command.

Virtualenvs directly inside the workspace (`sandbox.runtime.workspace_venvs`) are not mirrored:
a real one can be gigabytes and tens of thousands of files, whose two walks alone would dominate
every command, and a command has no business changing it. The caller
names them (`unmirrored`); the snapshots and the copy-in skip them, the mirror holds only an empty
directory as their mount point, and the gVisor bundle binds the host's virtualenv there read-only
(`sandbox.bundle`). A command's writes into it fail (EROFS) and a host edit (`pip install` between
commands) is seen at once, by the next command.
"""

import ctypes
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

from layout import TREE_DIR, TREE_OUTBOX
from sandbox.errors import WorkspaceError

_MS_REMOUNT = 32
_MNT_DETACH = 2


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


PROTECTED_DIRS = frozenset({".git", TREE_DIR})
"""Top-level workspace directories a sandboxed command may read but never change on the host."""
OUTBOX = str(TREE_OUTBOX)
"""The one place under `.codeloop/` a command may write to the host: reports a tool reads back
(pytest's JUnit XML); never executed, never committed."""

Entry = tuple[str, int, int]  # kind ("f", "d", "l"), size, mtime_ns
Snapshot = dict[str, Entry]


def snapshot(
    root: Path, exclude: frozenset[str] = frozenset(), hidden: frozenset[str] = frozenset()
) -> Snapshot:
    """Every file, directory and symlink under root (not following links), by relative path,
    except the top-level entries named in `exclude`, the relative paths in `hidden` (at any
    depth), and what they hold."""
    found: Snapshot = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            if not rel and entry.name in exclude:
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            if path in hidden:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile, or not ours to see
            if entry.is_symlink():
                found[path] = ("l", st.st_size, st.st_mtime_ns)
            elif entry.is_dir(follow_symlinks=False):
                found[path] = ("d", 0, 0)
                stack.append(path)
            elif entry.is_file(follow_symlinks=False):
                found[path] = ("f", st.st_size, st.st_mtime_ns)
    return found


def _is_protected(rel: str) -> bool:
    if rel == OUTBOX or rel.startswith(OUTBOX + "/"):
        return False
    return rel.split("/", 1)[0] in PROTECTED_DIRS


def _unprotected(snap: Snapshot) -> Snapshot:
    return {p: e for p, e in snap.items() if not _is_protected(p)}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _copy_entry(kind: str, src: Path, dst: Path) -> None:
    if kind == "d":
        if dst.is_symlink() or (dst.exists() and not dst.is_dir()):
            _remove(dst)
        dst.mkdir(exist_ok=True)
        shutil.copystat(src, dst)
        return
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    if kind == "l":
        dst.unlink(missing_ok=True)
        dst.symlink_to(os.readlink(src))
    else:
        shutil.copy2(src, dst, follow_symlinks=False)


def apply_changes(
    src: Path, dst: Path, before: Snapshot, after: Snapshot, *, owner: int | None = None
) -> list[str]:
    """Makes dst follow what changed in src between two snapshots of src; returns touched paths.

    `owner` (uid = gid) is given to what is created in dst: the mirror belongs to the sandbox's
    unprivileged user; copies back into the workspace keep the caller's ownership.
    """
    changed = [p for p, e in after.items() if before.get(p) != e or (e[0] == "d" and p not in before)]
    removed = [p for p in before if p not in after]
    # Deepest removals first, then creations parents-first.
    for rel in sorted(removed, key=lambda p: p.count("/"), reverse=True):
        _remove(dst / rel)
    for rel in sorted(changed, key=lambda p: p.count("/")):
        try:
            _copy_entry(after[rel][0], src / rel, dst / rel)
            if owner is not None:
                os.lchown(dst / rel, owner, owner)
        except (FileNotFoundError, PermissionError):
            continue  # removed again while we copied (the next sync settles it), or unreadable
    return changed + removed


def restat(root: Path, snap: Snapshot, paths: list[str]) -> None:
    """Updates the snapshot entries of `paths` (and drops those now missing) from the disk."""
    for rel in paths:
        path = root / rel
        try:
            st = path.lstat()
        except FileNotFoundError:
            snap.pop(rel, None)
            continue
        if path.is_symlink():
            snap[rel] = ("l", st.st_size, st.st_mtime_ns)
        elif path.is_dir():
            snap[rel] = ("d", 0, 0)
        else:
            snap[rel] = ("f", st.st_size, st.st_mtime_ns)


class WorkspaceMirror:
    """A size-capped tmpfs copy of a workspace. Blocking: call through anyio.to_thread.

    `unmirrored` names top-level directories of the workspace left out of the copy (its
    virtualenvs): the mirror holds an empty, root-owned directory in their place, a mount point.
    """

    def __init__(
        self,
        workspace: Path,
        mount_point: Path,
        *,
        write_cap_mb: int,
        owner: int | None = None,
        unmirrored: frozenset[str] = frozenset(),
        placeholders: dict[str, bool] | None = None,
    ) -> None:
        self.workspace = workspace
        self.unmirrored = unmirrored
        self.placeholders = placeholders or {}
        """Relative path -> is a directory: mount points the mirror holds for a project
        environment's build products (`sandbox.bundle`), never synchronised either way."""
        self.hidden = frozenset(self.placeholders)
        self.path = mount_point
        self.write_cap = write_cap_mb * 1024 * 1024
        self.host_snap: Snapshot = {}
        self.mirror_snap: Snapshot = {}
        self.mounted = False
        self.owner = owner
        self.size = 0

    def _mount(self, size: int, *, remount: bool) -> None:
        # mount(2) directly: spawning mount(8) before every command cost milliseconds.
        flags = _MS_REMOUNT if remount else 0
        options = f"size={size},mode=0755".encode()
        if _libc().mount(b"codeloop-workspace", bytes(self.path), b"tmpfs", flags, options) != 0:
            error = ctypes.get_errno()
            raise WorkspaceError(
                f"cannot mount the workspace mirror tmpfs at {self.path} ({os.strerror(error)}); "
                "the gVisor backend needs root (CAP_SYS_ADMIN) to cap workspace writes"
            )
        self.size = size

    def used_bytes(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def open(self) -> None:
        """Mounts the tmpfs and copies the workspace in."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.host_snap = snapshot(self.workspace, self.unmirrored, self.hidden)
        used = sum(size for _, size, _ in self.host_snap.values())
        # tmpfs rounds every file up to a page; keep room for that beside the write cap.
        size = used * 2 + len(self.host_snap) * 4096 + self.write_cap + 64 * 1024 * 1024
        self._mount(size, remount=False)
        self.mounted = True
        self._copy_in()
        for name in self.unmirrored:
            (self.path / name).mkdir(mode=0o755, exist_ok=True)
        for rel, is_dir in self.placeholders.items():
            (self.path / rel).mkdir(mode=0o755, exist_ok=True) if is_dir else (self.path / rel).touch(
                mode=0o644
            )
        self.mirror_snap = snapshot(self.path, self.unmirrored, self.hidden)

    def _copy_in(self) -> None:
        # cp -a is about four times faster than copying file by file from Python (5,000 files:
        # 0.35 s against 1.5 s); the Python copy stays as the fallback where cp is not GNU's.
        # The workspace's top-level entries as arguments, so the unmirrored ones can be left out.
        entries = sorted(e.name for e in os.scandir(self.workspace) if e.name not in self.unmirrored)
        copy = [["cp", "-a", "-t", str(self.path), "--", *(str(self.workspace / e) for e in entries)]]
        owner = [] if self.owner is None else [["chown", "-R", f"{self.owner}:{self.owner}", str(self.path)]]
        for cmd in [*(copy if entries else []), *owner]:
            if subprocess.run(cmd, capture_output=True).returncode != 0:
                break
        else:
            shutil.copystat(self.workspace, self.path)
            return
        apply_changes(self.workspace, self.path, {}, self.host_snap, owner=self.owner)
        shutil.copystat(self.workspace, self.path)
        if self.owner is not None:
            os.chown(self.path, self.owner, self.owner)

    def before_command(self) -> None:
        """Brings host edits into the mirror and re-arms the cap for the next command."""
        now = snapshot(self.workspace, self.unmirrored, self.hidden)
        touched = apply_changes(self.workspace, self.path, self.host_snap, now, owner=self.owner)
        self.host_snap = now
        restat(self.path, self.mirror_snap, touched)
        size = self.used_bytes() + self.write_cap
        if size != self.size:
            self._mount(size, remount=True)

    def after_command(self) -> None:
        """Copies what the command changed back into the workspace, except in protected directories.

        A command's writes under `.git/` (hooks, config) would run code on the host the next time
        someone uses git there, and `.codeloop/` holds the audit log: those writes are undone in
        the mirror instead of reaching the workspace.
        """
        now = snapshot(self.path, self.unmirrored, self.hidden)
        before, after = _unprotected(self.mirror_snap), _unprotected(now)
        touched = apply_changes(self.path, self.workspace, before, after)
        protected_now = {p: e for p, e in now.items() if _is_protected(p)}
        protected_host = {p: e for p, e in self.host_snap.items() if _is_protected(p)}
        if protected_now != {p: e for p, e in self.mirror_snap.items() if _is_protected(p)}:
            apply_changes(self.workspace, self.path, protected_now, protected_host, owner=self.owner)
            now = snapshot(self.path, self.unmirrored, self.hidden)
        self.mirror_snap = now
        # Only the copied paths: a full re-snapshot would swallow host edits made meanwhile,
        # which the next command must still receive.
        restat(self.workspace, self.host_snap, touched)

    def close(self) -> None:
        if self.mounted:
            detach_mount(self.path)
            self.mounted = False


def detach_mount(path: Path) -> None:
    """Lazily unmount what is mounted at `path` (gone once nothing uses it); failure is ignored."""
    _libc().umount2(bytes(path), _MNT_DETACH)
