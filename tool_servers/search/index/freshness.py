"""A cheap "did anything change?" check for a long-lived index, so queries see edits at once.

`CodeIndex.update` reads and hashes every file, which grows with the repository's size and is
too much to pay before every query. `tree_fingerprint` only stats: it walks the tree with the
indexer's walk and pruning (VCS, vendored and build directories, our own `.codeloop`,
directories a `.gitignore` ignores) and records each file's path, size, mtime and inode. Two
equal fingerprints mean no file the indexer would read was added, removed, rewritten
or replaced (an editor's atomic rename changes the inode even within one mtime tick).

It errs on the side of updating: files ignored one by one (`*.log`) are not filtered, so a
change to one of them costs a no-op update, never a missed edit (a `.gitignore` that ignores
itself still counts: editing it changes what the indexer reads).
"""

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from tool_servers.ignore_walk import walk
from tool_servers.search.index.files import is_skipped_dir

Fingerprint = tuple[tuple[str, int, int, int], ...]
"""(relative path, size, mtime_ns, inode) per file, sorted by path."""


def tree_fingerprint(root: Path, *, skip: Iterable[Path] = ()) -> Fingerprint:
    """The stat fingerprint of the files under `root` the indexer could read. Blocking.

    `skip` lists directories to leave out, such as an index kept inside the root (its lock file
    changes on every update and would make every check report a change).
    """
    skipped = frozenset(str(p) for p in skip)
    entries: list[tuple[str, int, int, int]] = []
    # The indexer's walk, pruning the same directories; ignored files are kept (see above).
    for directory in walk(root, skip_dir=is_skipped_dir, keep_ignored_files=True):
        directory.dirs[:] = [d for d in directory.dirs if os.path.join(directory.path, d) not in skipped]
        for name in directory.files:
            try:
                st = os.lstat(os.path.join(directory.path, name))
            except OSError:
                continue  # removed while walking: the next fingerprint will differ anyway
            if stat.S_ISREG(st.st_mode):
                entries.append((directory.rel + name, st.st_size, st.st_mtime_ns, st.st_ino))
    entries.sort()
    return tuple(entries)
