"""What a snapshot holds: the tree's files as git sees them, each with its content digest.

The manifest is a canonical JSON document (sorted paths, no whitespace), so its sha256 names the
tree: the same tree gives the same digest on any machine, and `--apply` can recompute it from the
checkout to tell whether the checkout still is the tree a patch was made against. Rows are
positional to keep a 100,000-file manifest near 10 MB:

    {"format": "codeloop-snapshot/1",
     "files": [[path, "100644" | "100755", size, sha256], [path, "120000", link target], ...]}

Which files: in a git repository, `git ls-files -co --exclude-standard` — tracked files and
untracked ones git does not ignore, with their uncommitted contents (a tracked file deleted in the
working tree is simply absent), except untracked files inside a virtualenv or a cache directory
(named once each among the skipped paths; tracking them with `git add -f` takes them along).
Elsewhere a walk that skips `.git`, `.codeloop`, virtualenvs and caches. Symlinks stay links when their target stays inside the tree; a link leaving the tree
(absolute, or climbing out with `..`) is skipped with a reason, as are sockets, nested
repositories and names that are not UTF-8.
"""

import hashlib
import json
import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import anyio

from agents.workspace.errors import CaptureFailed, SnapshotTooLarge
from agents.workspace.git import run_git
from layout import TREE_DIR

FORMAT = "codeloop-snapshot/1"
MODE_FILE = "100644"
MODE_EXECUTABLE = "100755"
MODE_LINK = "120000"
WALK_SKIP_DIRS = frozenset({".git", TREE_DIR, "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
"""Directories a walk of a non-git tree leaves out (virtualenvs too: any directory with `pyvenv.cfg`)."""
DEFAULT_MAX_FILES = 200_000
DEFAULT_MAX_BYTES = 512 * 1024 * 1024


class Entry(NamedTuple):
    """One manifest row. For a link, `sha256` and `size` describe the target string."""

    path: str
    mode: str
    size: int
    sha256: str
    link: str | None = None

    def row(self) -> list:
        if self.mode == MODE_LINK:
            return [self.path, self.mode, self.link]
        return [self.path, self.mode, self.size, self.sha256]

    @classmethod
    def from_row(cls, row: list) -> "Entry":
        if row[1] == MODE_LINK:
            return link_entry(row[0], row[2])
        return cls(path=row[0], mode=row[1], size=row[2], sha256=row[3])


def link_entry(path: str, target: str) -> Entry:
    data = target.encode()
    return Entry(
        path=path, mode=MODE_LINK, size=len(data), sha256=hashlib.sha256(data).hexdigest(), link=target
    )


@dataclass
class Scan:
    """A tree read from disk: its entries (sorted by path) and what was left out, with why."""

    entries: list[Entry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    git_head: str | None = None

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.entries if entry.mode != MODE_LINK)

    def manifest_bytes(self) -> bytes:
        document = {"format": FORMAT, "files": [entry.row() for entry in self.entries]}
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()

    def digest(self) -> str:
        return hashlib.sha256(self.manifest_bytes()).hexdigest()


def parse_manifest(data: bytes) -> list[Entry]:
    """Entries of a stored manifest, checked to stay inside the tree they are written into.

    Raises:
        ValueError: not a manifest of this format, or one that would write outside its tree.
    """
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} manifest")
    entries = [Entry.from_row(row) for row in document["files"]]
    check_confined(entries)
    return entries


def check_confined(entries: list[Entry]) -> None:
    """Refuse entries that would write outside the tree when materialised.

    The object store is shared by every client of the bus, so a manifest is checked, not trusted:
    no absolute or `..` paths, nothing inside `.git`, no link leaving the tree, and no path under
    a link (writing `a/x` after a link `a -> /etc` would write `/etc/x`).

    Raises:
        ValueError: naming the first offending path.
    """
    links = {entry.path for entry in entries if entry.mode == MODE_LINK}
    seen = set()
    for entry in entries:
        parts = entry.path.split("/")
        if (
            not entry.path
            or entry.path.startswith("/")
            or any(part in ("", ".", "..") for part in parts)
            or ".git" in parts
            or "\0" in entry.path
        ):
            raise ValueError(f"unsafe path {entry.path!r}")
        if entry.path in seen:
            raise ValueError(f"duplicate path {entry.path!r}")
        seen.add(entry.path)
        if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
            raise ValueError(f"{entry.path!r} lies under a symlink")
        if entry.mode == MODE_LINK:
            if _link_leaves_tree(entry.path, entry.link or ""):
                raise ValueError(f"symlink {entry.path!r} leaves the tree")
        elif entry.mode not in (MODE_FILE, MODE_EXECUTABLE):
            raise ValueError(f"unknown mode {entry.mode!r} of {entry.path!r}")


def file_sha256(path: Path, size: int | None = None) -> str:
    if size is not None and size < 1 << 20:  # one read beats file_digest's buffered loop for small files
        return hashlib.sha256(path.read_bytes()).hexdigest()
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


async def list_paths(repo: Path) -> tuple[list[str] | None, str | None, list[tuple[str, str]]]:
    """(paths git sees, HEAD commit, skipped) for a git working tree; (None, None, []) elsewhere.

    Raises:
        CaptureFailed: `repo` is not a directory, or git failed on a repository.
    """
    if not await anyio.Path(repo).is_dir():
        raise CaptureFailed(f"{repo} is not a directory; pass the repository's root with --repo")
    code, out, _ = await run_git(repo, "rev-parse", "--is-inside-work-tree", scratch=False, check=False)
    if code != 0 or out.strip() != b"true":
        return None, None, []
    code, head, _ = await run_git(
        repo, "rev-parse", "--verify", "--quiet", "HEAD", scratch=False, check=False
    )
    _, tracked, _ = await run_git(repo, "ls-files", "-z", "-c", scratch=False)
    _, others, _ = await run_git(repo, "ls-files", "-z", "-o", "--exclude-standard", scratch=False)
    skipped: list[tuple[str, str]] = []
    untracked = _listed_names(others, skipped)
    # What git tracks is the project's, even inside a cache or a virtualenv; what it merely does
    # not ignore there is a machine's own state (thousands of files a snapshot should not carry).
    untracked = await anyio.to_thread.run_sync(lambda: _outside_environments(repo, untracked, skipped))
    paths = {*_listed_names(tracked, skipped), *untracked}
    return sorted(paths), (head.decode().strip() or None) if code == 0 else None, skipped


def _listed_names(listing: bytes, skipped: list[tuple[str, str]]) -> list[str]:
    """The paths of a `git ls-files -z` listing; undecodable names and nested repositories go to
    `skipped` with their reason."""
    names = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        try:
            name = raw.decode()
        except UnicodeDecodeError:
            skipped.append((raw.decode(errors="replace"), "file name is not UTF-8"))
            continue
        if name.endswith("/"):
            skipped.append((name.rstrip("/"), "nested git repository"))
            continue
        names.append(name)
    return names


ENVIRONMENT_SKIP_REASON = (
    "a virtual environment git does not ignore: left out (a snapshot carries the project, not a machine's "
    "installed packages); `git add -f` what must go with the task"
)
CACHE_SKIP_REASON = "a cache directory git does not ignore: left out; `git add -f` what must go with the task"


def _outside_environments(repo: Path, names: list[str], skipped: list[tuple[str, str]]) -> list[str]:
    """`names` without those inside a virtualenv (a directory with `pyvenv.cfg`) or a cache
    directory (`WALK_SKIP_DIRS`); each directory left out is named once in `skipped`."""
    verdicts: dict[str, str | None] = {}  # directory -> why it is left out (None: kept)

    def reason(directory: str) -> str | None:
        if directory not in verdicts:
            name = posixpath.basename(directory)
            if name in WALK_SKIP_DIRS:
                verdicts[directory] = CACHE_SKIP_REASON
            elif os.path.exists(os.path.join(repo, directory, "pyvenv.cfg")):
                verdicts[directory] = ENVIRONMENT_SKIP_REASON
            else:
                verdicts[directory] = None
            if verdicts[directory] is not None:
                skipped.append((directory, verdicts[directory] or ""))
        return verdicts[directory]

    kept = []
    for name in names:
        parts = name.split("/")[:-1]
        prefixes = ("/".join(parts[: i + 1]) for i in range(len(parts)))
        if not any(reason(prefix) is not None for prefix in prefixes):
            kept.append(name)
    return kept


def walk_paths(repo: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Paths of a directory that is no git repository, with the walk's skip rules."""
    paths = []
    skipped = []
    for dirpath, dirnames, filenames in os.walk(repo, onerror=_unreadable, followlinks=False):
        rel_dir = os.path.relpath(dirpath, repo)
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                filenames.append(name)  # a link to a directory is a link entry, never followed
            elif name not in WALK_SKIP_DIRS and not os.path.exists(os.path.join(full, "pyvenv.cfg")):
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            rel = posixpath.join(rel_dir.replace(os.sep, "/"), name) if rel_dir else name
            if _has_surrogates(rel):  # os.walk hands undecodable bytes over as surrogates
                skipped.append((rel.encode("utf-8", errors="replace").decode(), "file name is not UTF-8"))
                continue
            paths.append(rel)
    return sorted(paths), skipped


def _unreadable(exc: OSError) -> None:
    """os.walk's default skips a directory it cannot list, which would capture a partial (or, for
    an unreadable root, empty) tree as if it were the repository: refuse instead."""
    raise CaptureFailed(f"cannot read {exc.filename}: {exc.strerror}") from exc


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def scan(repo: Path, paths: list[str], *, max_files: int, max_bytes: int) -> Scan:
    """Stat and hash `paths` under `repo` (blocking: run it in a worker thread).

    Raises:
        SnapshotTooLarge: more than `max_files` files or `max_bytes` bytes.
        CaptureFailed: a file could not be read.
    """
    if len(paths) > max_files:
        raise SnapshotTooLarge(
            f"{repo} has {len(paths)} files, over the snapshot limit of {max_files} files",
            limit=max_files,
            actual=len(paths),
        )
    result = Scan()
    regular: list[tuple[str, os.stat_result]] = []
    total = 0
    for rel in paths:
        full = repo / rel
        try:
            info = full.lstat()
        except FileNotFoundError:
            continue  # a tracked file deleted in the working tree: absent from the tree
        except OSError as exc:
            raise CaptureFailed(f"cannot read {full}: {exc.strerror}") from exc
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(full)
            reason = _link_leaves_tree(rel, target)
            if reason:
                result.skipped.append((rel, reason))
            else:
                result.entries.append(link_entry(rel, target))
        elif stat.S_ISREG(info.st_mode):
            regular.append((rel, info))
            total += info.st_size
        elif stat.S_ISDIR(info.st_mode):
            result.skipped.append((rel, "directory entry (a submodule or nested repository)"))
        else:
            result.skipped.append((rel, "not a regular file or symlink"))
    if total > max_bytes:
        raise SnapshotTooLarge(
            f"{repo} holds {total} bytes in {len(regular)} files, over the snapshot limit of {max_bytes} bytes",
            limit=max_bytes,
            actual=total,
        )
    for rel, info in regular:
        try:
            digest = file_sha256(repo / rel, info.st_size)
        except OSError as exc:
            raise CaptureFailed(f"cannot read {repo / rel}: {exc.strerror}") from exc
        mode = MODE_EXECUTABLE if info.st_mode & 0o100 else MODE_FILE
        result.entries.append(Entry(path=rel, mode=mode, size=info.st_size, sha256=digest))
    result.entries.sort(key=lambda entry: entry.path)
    return result


def _link_leaves_tree(rel: str, target: str) -> str | None:
    if os.path.isabs(target):
        return f"symlink to an absolute path ({target}) leaves the tree"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    if resolved == ".." or resolved.startswith("../"):
        return f"symlink to {target} leaves the tree"
    return None


async def scan_tree(repo: Path, *, max_files: int, max_bytes: int) -> Scan:
    """The tree at `repo` as a snapshot would hold it, hashed but not uploaded.

    Raises:
        CaptureFailed, SnapshotTooLarge: see `scan` and `list_paths`.
    """
    repo = Path(await anyio.Path(repo).resolve())
    paths, head, skipped = await list_paths(repo)
    if paths is None:
        paths, skipped = await anyio.to_thread.run_sync(walk_paths, repo)
    result = await anyio.to_thread.run_sync(
        lambda: scan(repo, paths, max_files=max_files, max_bytes=max_bytes)
    )
    result.skipped[:0] = skipped
    result.git_head = head
    return result
