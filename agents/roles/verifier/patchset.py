"""A patch read into per-file changes: what the diff review, test selection and tree switching use.

The patch is a unified diff with `a/`/`b/` prefixes, as `git diff` writes it. Each file's section
is kept as text so the verifier can apply a subset of the patch (its test files alone, its source
files alone) to move the workspace between the trees it compares.
"""

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk, PatchSet

from agents.roles.verifier.errors import VerifierError

ChangeKind = Literal["added", "deleted", "modified", "renamed"]
_SYMLINK_MODE = re.compile(r"^(new file mode|new mode|old mode|deleted file mode|index \S+) 120000", re.M)
_SUBMODULE_MODE = re.compile(r"^(new file mode|new mode|index \S+) 160000", re.M)
TEST_DIRS = frozenset({"tests", "test", "testing"})


class MalformedPatch(VerifierError, ValueError):
    """The text is not a unified diff the verifier can read."""

    failure_class = "patch.malformed"


@dataclass(frozen=True)
class FileChange:
    """One file's part of a patch."""

    path: str
    """The file's path after the patch (its old path when deleted)."""
    old_path: str | None
    """The path before the patch; None for an added file."""
    kind: ChangeKind
    added: tuple[tuple[int, str], ...] = ()
    """(line in the new file, text) of each added line."""
    removed: tuple[tuple[int, str], ...] = ()
    """(line in the old file, text) of each removed line."""
    anchors: tuple[tuple[int, int], ...] = ()
    """(line in the new file, the old file's line just before it — 0: the file's start) of each
    added line: where in the old file the addition is."""
    binary: bool = False
    special: str | None = None
    """`symlink` or `submodule` when the change is not to a regular file."""
    text: str = field(default="", repr=False)
    """This file's section of the patch, applicable on its own."""

    @property
    def is_test(self) -> bool:
        return is_test_path(self.path) or (self.old_path is not None and is_test_path(self.old_path))

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")


def is_test_path(path: str) -> bool:
    """pytest's default discovery names (`test_*.py`, `*_test.py`), `conftest.py`, or a file under a
    `tests/` (`test/`, `testing/`) directory."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    if name == "conftest.py" or (
        name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    ):
        return True
    return any(part in TEST_DIRS for part in parts[:-1])


def _strip(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    for prefix in ("a/", "b/"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def parse_patch(text: str) -> list[FileChange]:
    """The per-file changes of `text`; an empty list for a patch that changes nothing.

    Raises:
        MalformedPatch: the text is not a unified diff.
    """
    if not text.strip():
        return []
    try:
        patch = PatchSet(text if text.endswith("\n") else text + "\n")
    except UnidiffParseError as exc:
        raise MalformedPatch(f"not a unified diff: {exc}") from exc
    if not patch and text.strip():
        raise MalformedPatch("no file sections found (expected `diff --git a/... b/...` or `--- a/...`)")
    changes = []
    for patched in patch:
        source, target = _strip(patched.source_file), _strip(patched.target_file)
        info = str(patched.patch_info or "")
        if patched.is_added_file:
            kind: ChangeKind = "added"
        elif patched.is_removed_file:
            kind = "deleted"
        elif patched.is_rename:
            kind = "renamed"
        else:
            kind = "modified"
        path = target if target is not None else source
        if path is None:
            raise MalformedPatch("a file section names no file")
        special = (
            "symlink" if _SYMLINK_MODE.search(info) else "submodule" if _SUBMODULE_MODE.search(info) else None
        )
        added = tuple((ln.target_line_no, ln.value) for h in patched for ln in h if ln.is_added)
        removed = tuple((ln.source_line_no, ln.value) for h in patched for ln in h if ln.is_removed)
        anchors = tuple(anchor for h in patched for anchor in _anchors(h))
        changes.append(
            FileChange(
                path=path,
                old_path=None if kind == "added" else source,
                kind=kind,
                added=added,  # pyright: ignore[reportArgumentType] - added lines always carry their target line number
                removed=removed,  # pyright: ignore[reportArgumentType] - removed lines always carry their source line number
                anchors=anchors,
                binary=bool(patched.is_binary_file) or "GIT binary patch" in info,
                special=special,
                text=str(patched),
            )
        )
    return changes


def _anchors(hunk: Hunk) -> list[tuple[int, int]]:
    """(new line, the old line before it) of each added line of `hunk` (a unidiff Hunk)."""
    anchors, last = [], hunk.source_start - 1
    for line in hunk:
        if line.is_added:
            anchors.append((line.target_line_no, max(last, 0)))
        elif line.source_line_no is not None:
            last = line.source_line_no
    return anchors


def join_sections(changes: list[FileChange]) -> str:
    """The patch of just these changes."""
    return "".join(c.text if c.text.endswith("\n") else c.text + "\n" for c in changes)
