"""Validate and apply a unified diff to a confined tree: all hunks or none.

`plan_patch` parses the diff (unidiff), confines every path, and computes each file's new text
in memory, matching every hunk strictly: its context and removed lines must equal the file's
lines, at the stated position or — like `git apply` — at a nearby offset, but never fuzzily.
Only when every hunk of every file matches does `write_plan` touch the disk, one temp file +
`os.replace` per file, restoring the already-written files if a later write fails.

Files are read and written as bytes (UTF-8 with surrogate escapes), so line endings and any
undecodable bytes survive. A file with CRLF line endings takes a diff made with either CRLF
lines (as `git diff` prints them) or LF lines (as most editors and models write them), and keeps
its CRLF endings. Git renames (`rename from`/`rename to`, with or without hunks) move the file.
"""

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk, PatchedFile, PatchSet

from tool_servers.confinement import Root
from tool_servers.protocol.errors import Conflict, InvalidArguments, NotFound

Action = Literal["modify", "create", "delete", "rename"]


@dataclass(frozen=True)
class FileChange:
    """One file's planned change."""

    path: Path
    rel: str
    action: Action
    old_text: str | None
    """Content before (None: the file does not exist yet); for a rename, the source's content."""
    new_text: str | None
    """Content after (None: the file is deleted)."""
    hunks: int
    added: int
    removed: int
    renamed_from: Path | None = None
    """For a rename: the source path, removed once `path` is written."""
    renamed_from_rel: str | None = None


def plan_patch(root: Root, diff: str) -> list[FileChange]:
    """Every file's new content, or an error naming the first hunk that does not apply.

    Raises:
        InvalidArguments: The diff is empty, malformed or binary, or changes a file twice.
        PermissionDenied: A path leaves the root or lies in `.git/`.
        NotFound: A modified or deleted file does not exist.
        Conflict: A file to create exists, or a hunk does not match.
    """
    if not diff.strip():
        raise InvalidArguments("the patch is empty")
    try:
        patch = PatchSet(diff)
    except UnidiffParseError as exc:
        raise InvalidArguments(f"the patch is not a valid unified diff: {exc}", reason=str(exc)) from exc
    if not len(patch):
        raise InvalidArguments(
            "the patch contains no file changes (expected '--- a/..' / '+++ b/..' headers)"
        )
    changes: list[FileChange] = []
    seen: set[Path] = set()
    for patched in patch:
        change = _plan_file(root, patched)
        touched = [(change.path, change.rel)]
        if change.renamed_from is not None:
            touched.append((change.renamed_from, change.renamed_from_rel or ""))
        for path, rel in touched:
            if path in seen:
                raise InvalidArguments(f"the patch changes {rel} twice; merge those sections", path=rel)
            seen.add(path)
        changes.append(change)
    return changes


def _plan_file(root: Root, patched: PatchedFile) -> FileChange:
    if patched.is_binary_file:
        raise InvalidArguments(f"{patched.path}: binary patches are not supported", path=patched.path)
    if patched.is_rename:
        return _plan_rename(root, patched)
    action: Action = "create" if patched.is_added_file else "delete" if patched.is_removed_file else "modify"
    rel = patched.path
    path = root.resolve(rel, for_write=True)
    if action == "create":
        if path.exists():
            raise Conflict(f"{rel}: the patch creates it but it already exists", path=rel)
        old_lines: list[str] = []
        old_text = None
    else:
        old_text = _read(path, rel)
        old_lines = old_text.splitlines(keepends=True)
    new_lines = _apply_hunks(rel, old_lines, list(patched))
    new_text = None if action == "delete" else "".join(new_lines)
    if action == "delete" and new_lines:
        raise Conflict(f"{rel}: the patch deletes it but does not remove all of its lines", path=rel)
    return FileChange(
        path=path,
        rel=rel,
        action=action,
        old_text=old_text,
        new_text=new_text,
        hunks=len(patched),
        added=patched.added,
        removed=patched.removed,
    )


def _plan_rename(root: Root, patched: PatchedFile) -> FileChange:
    """A git rename: the target gets the source's content with the hunks applied; the source goes."""
    source_rel = _strip_prefix(patched.source_file, "a/")
    target_rel = _strip_prefix(patched.target_file, "b/")
    source = root.resolve(source_rel, for_write=True)
    target = root.resolve(target_rel, for_write=True)
    source_rel, target_rel = root.relative(source), root.relative(target)
    if source == target:
        raise InvalidArguments(f"{target_rel}: the patch renames it to itself", path=target_rel)
    old_text = _read(source, source_rel)
    if target.exists():
        raise Conflict(
            f"{target_rel}: the patch renames {source_rel} to it but it already exists", path=target_rel
        )
    new_lines = _apply_hunks(source_rel, old_text.splitlines(keepends=True), list(patched))
    return FileChange(
        path=target,
        rel=target_rel,
        action="rename",
        old_text=old_text,
        new_text="".join(new_lines),
        hunks=len(patched),
        added=patched.added,
        removed=patched.removed,
        renamed_from=source,
        renamed_from_rel=source_rel,
    )


def _strip_prefix(name: str, prefix: str) -> str:
    return name[len(prefix) :] if name.startswith(prefix) else name


def _read(path: Path, rel: str) -> str:
    if not path.is_file():
        raise NotFound(f"{rel}: the patch changes it but there is no such file", path=rel)
    # Bytes, not text mode: text mode would turn CRLF into LF and the write would keep that.
    return path.read_bytes().decode("utf-8", errors="surrogateescape")


def _hunk_lines(hunk: Hunk, *, crlf: bool = False) -> tuple[list[str], list[str]]:
    """(lines the hunk expects, lines it leaves), honouring '\\ No newline at end of file'; with
    `crlf`, LF line ends of the hunk become CRLF (the file's)."""
    source: list[str] = []
    target: list[str] = []
    last: str | None = None
    for line in hunk:
        if line.line_type == "\\":
            for side in (source,) if last == "-" else (target,) if last == "+" else (source, target):
                if side:
                    side[-1] = side[-1].rstrip("\n").removesuffix("\r")
            continue
        last = line.line_type
        value = line.value
        if crlf and value.endswith("\n") and not value.endswith("\r\n"):
            value = value[:-1] + "\r\n"
        if line.line_type in (" ", "-"):
            source.append(value)
        if line.line_type in (" ", "+"):
            target.append(value)
    return source, target


def _apply_hunks(rel: str, lines: list[str], hunks: list[Hunk]) -> list[str]:
    # A CRLF file given an LF diff: match and write with the file's endings. A CRLF diff (what
    # `git diff` prints for such a file) already carries them.
    crlf = _crlf_file(lines) and not any("\r" in line.value for hunk in hunks for line in hunk)
    result: list[str] = []
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        source, target = _hunk_lines(hunk, crlf=crlf)
        wanted = max(hunk.source_start - 1, 0) if source else hunk.source_start
        at = _find(lines, source, wanted, cursor)
        if at is None:
            raise Conflict(
                f"{rel}: hunk {number} ({_header(hunk)}) does not apply: {_mismatch(lines, source, wanted)}",
                path=rel,
                hunk=number,
                header=_header(hunk),
                reason=_mismatch(lines, source, wanted),
            )
        result.extend(lines[cursor:at])
        result.extend(target)
        cursor = at + len(source)
    result.extend(lines[cursor:])
    return result


def _crlf_file(lines: list[str]) -> bool:
    """Every line ending of the file is CRLF (a last line without an ending does not count)."""
    ended = [line for line in lines if line.endswith("\n")]
    return bool(ended) and all(line.endswith("\r\n") for line in ended)


def _find(lines: list[str], source: list[str], wanted: int, cursor: int) -> int | None:
    """Where `source` matches exactly, nearest to `wanted`, never before `cursor`."""
    last_start = len(lines) - len(source)
    for offset in range(0, max(len(lines), 1) + 1):
        for at in (wanted - offset, wanted + offset) if offset else (wanted,):
            if cursor <= at <= last_start and lines[at : at + len(source)] == source:
                return at
    return None


def _header(hunk: Hunk) -> str:
    return f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"


def _mismatch(lines: list[str], source: list[str], wanted: int) -> str:
    if wanted + len(source) > len(lines) and wanted >= len(lines):
        return f"it starts at line {wanted + 1} but the file has {len(lines)} lines"
    for i, expected in enumerate(source):
        actual = lines[wanted + i] if wanted + i < len(lines) else None
        if actual != expected:
            found = "end of file" if actual is None else repr(actual.rstrip("\n"))
            return f"line {wanted + i + 1}: expected {expected.rstrip(chr(10))!r}, found {found} (and no nearby match)"
    return "its lines match nowhere after the previous hunk"


def write_plan(changes: list[FileChange]) -> None:
    """Write every change atomically per file; on failure restore the files already written."""
    done: list[FileChange] = []
    try:
        for change in changes:
            done.append(change)
            _write_one(change.path, change.new_text)
            if change.renamed_from is not None:
                _write_one(change.renamed_from, None)
    except BaseException:
        for change in reversed(done):
            if change.renamed_from is not None:
                _write_one(change.renamed_from, change.old_text)
                _write_one(change.path, None)
            else:
                _write_one(change.path, change.old_text)
        raise


def _write_one(path: Path, text: str | None) -> None:
    if text is None:
        path.unlink(missing_ok=True)
        return
    atomic_write(path, text.encode("utf-8", errors="surrogateescape"))


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` through a temp file in the same directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".codeloop-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
