"""Paths confined to a server's root.

Every path a tool receives goes through `Root.resolve` before anything is read or written:
no `..` component, no absolute path outside the root, no symlink leading out, and no writes
inside a `.git/` (git's own state, hooks included) or `.codeloop/` (codeloop's state in a
repository: the index `codeloop index` builds, tool reports, an audit log someone put there; a
model able to rewrite its own index or audit trail would make them worthless).
"""

from pathlib import Path, PurePosixPath

from layout import TREE_DIR
from tool_servers.protocol.errors import InvalidArguments, NotFound, PermissionDenied

READ_ONLY_DIRS = (".git", TREE_DIR)
"""Directories (at any depth) no tool may write into."""


class Root:
    """A directory tools may work in, and the checks that keep them there."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve(strict=True)
        if not self.path.is_dir():
            raise NotADirectoryError(f"root {self.path} is not a directory")

    def resolve(self, raw: str, *, for_write: bool = False) -> Path:
        """The absolute, symlink-free path for `raw`, which must stay inside the root.

        Raises:
            InvalidArguments: `raw` is empty or contains a NUL byte.
            NotFound: `raw` runs into a symlink loop (it names nothing).
            PermissionDenied: `raw` leaves the root (by `..`, an absolute path or a symlink),
                or `for_write` and it lies in `.git/` or `.codeloop/`.
        """
        if not raw or "\x00" in raw:
            raise InvalidArguments("a path must be a non-empty string without NUL bytes", path=raw)
        if ".." in PurePosixPath(raw.replace("\\", "/")).parts:
            raise PermissionDenied(f"path {raw!r} contains '..'; use a path inside the root", path=raw)
        absolute = Path(raw).is_absolute()
        # resolve() follows every symlink on the way, so a link inside the root that points
        # outside it is caught here, before any open().
        try:
            resolved = (Path(raw) if absolute else self.path / raw).resolve(strict=False)
        except (RuntimeError, OSError) as exc:  # RuntimeError: Python's word for a symlink loop
            raise NotFound(f"{raw}: a symlink loop, not a file", path=raw) from exc
        if not _is_within(resolved, self.path):
            why = "is outside the root" if absolute else "leads outside the root (through a symlink)"
            raise PermissionDenied(f"path {raw!r} {why}", path=raw)
        if for_write:
            self._check_writable(resolved, raw)
        return resolved

    def relative(self, path: Path) -> str:
        """`path` relative to the root, POSIX-style ("." for the root itself)."""
        rel = path.relative_to(self.path).as_posix()
        return rel or "."

    def _check_writable(self, resolved: Path, raw: str) -> None:
        # Any depth: a nested repository's .git/hooks is as dangerous as the top one.
        for part in resolved.relative_to(self.path).parts:
            if part.lower() in READ_ONLY_DIRS:
                raise PermissionDenied(f"path {raw!r} is inside {part}/, which tools may not write", path=raw)


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def is_utf8_name(name: str) -> bool:
    """False for a name `os.walk`/`os.listdir` decoded with surrogate escapes (its bytes are not
    UTF-8): such a file can be neither named in JSON nor confined by its path."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
