"""A cheap "did anything change?" check for a long-lived index, so queries see edits at once.

`CodeIndex.update` reads and hashes every file (about 10 ms for 50 files, 170-800 ms for
1,500-4,700 files on this machine), too much to pay before every query. `tree_fingerprint` only
stats: it walks the tree with the indexer's pruning (VCS, vendored and build directories, our own
`.codeloop`, directories a `.gitignore` ignores) and records each file's path, size, mtime and
inode. Two equal fingerprints mean no file the indexer would read was added, removed, rewritten
or replaced (an editor's atomic rename changes the inode even within one mtime tick).

It errs on the side of updating: files ignored one by one (`*.log`) are not filtered, so a
change to one of them costs a no-op update, never a missed edit.
"""

import os
from collections.abc import Iterable
from pathlib import Path

import pathspec

from tool_servers.search.index.files import SKIP_DIRS, is_ignored, read_gitignore

Fingerprint = tuple[tuple[str, int, int, int], ...]
"""(relative path, size, mtime_ns, inode) per file, sorted by path."""


def tree_fingerprint(root: Path, *, skip: Iterable[Path] = ()) -> Fingerprint:
    """The stat fingerprint of the files under `root` the indexer could read. Blocking.

    `skip` lists directories to leave out, such as an index kept inside the root (its lock file
    changes on every update and would make every check report a change).
    """
    entries: list[tuple[str, int, int, int]] = []
    _walk(str(root), "", [], entries, frozenset(str(p) for p in skip))
    entries.sort()
    return tuple(entries)


def _walk(
    directory: str,
    prefix: str,
    specs: list[tuple[str, pathspec.GitIgnoreSpec]],
    out: list[tuple[str, int, int, int]],
    skip: frozenset[str],
) -> None:
    try:
        with os.scandir(directory) as scan:
            items = list(scan)
    except OSError:
        return  # vanished or unreadable: the indexer skips it too
    if any(item.name == ".gitignore" for item in items):
        spec = read_gitignore(Path(directory, ".gitignore"))
        if spec is not None:
            specs = [*specs, (prefix, spec)]
    for item in items:
        rel = prefix + item.name
        try:
            if item.is_dir(follow_symlinks=False):
                if (
                    item.name not in SKIP_DIRS
                    and item.path not in skip
                    and not item.name.endswith(".egg-info")
                    and not is_ignored(specs, rel + "/")
                ):
                    _walk(item.path, rel + "/", specs, out, skip)
            elif item.is_file(follow_symlinks=False):
                st = item.stat(follow_symlinks=False)
                out.append((rel, st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            continue  # removed while walking: the next fingerprint will differ anyway
