"""One walk over a tree with git's `.gitignore` rules: `list_files`, the search indexer and the
index's freshness check all see the same files.

The walk is depth-first in sorted order, a directory's own entries before its subdirectories', and
never enters `.git` or `.codeloop` (callers add their own skips). `.gitignore` files apply as git
applies them:

- a nested `.gitignore` matches paths relative to its own directory;
- the last matching line decides, and a deeper file's lines come after its parents', so a nested
  `!keep.py` re-includes a file an outer rule ignored;
- an ignored directory is not entered, so nothing below it can be re-included (git cannot either:
  `build/` then `!build/keep.py` leaves keep.py ignored, `build/*` then `!build/keep.py` does not);
- a line decides for a path only when it matches that path itself (`!*/` re-includes directories
  and nothing else), `dir/` lines match directories only, a line without an inner `/` matches a
  name at any depth, one with a `/` is anchored to its `.gitignore`'s directory;
- `.gitignore` files are not followed when they are symlinks (nor read when not regular files).

Symlinks are never followed: a symlink, to a file or a directory, is one of a directory's `files`
(git too tracks a symlink as a file), and callers decide what to do with it. `.git/info/exclude`
and `core.excludesFile` are not read: the roots this walks are not always git repositories, and
what a user's own git config hides should not change what tools see.
"""

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from layout import TREE_DIR
from tool_servers.globs import glob_matcher

ALWAYS_SKIPPED = frozenset({".git", TREE_DIR})
"""Directory names no walk enters: git's own store and this project's per-repo state."""


@dataclass(slots=True)
class Directory:
    """One directory of a walk, handed to the caller before the walk goes below it."""

    path: str
    """The directory's path: the root joined with `rel`."""
    rel: str
    """Its path relative to the root with a trailing `/` (`""` for the root): prefix it to a name."""
    dirs: list[str]
    """Subdirectories the walk enters next, sorted, ignored ones left out; remove a name to skip it."""
    files: list[str]
    """Every other entry, sorted, ignored ones left out (unless asked for): regular files, symlinks,
    FIFOs, sockets and devices alike."""


@dataclass(frozen=True, slots=True)
class _Rule:
    negated: bool
    dir_only: bool
    basename: bool
    """No `/` inside the pattern: it matches the last component, at any depth."""
    matches: Callable[[str], bool]


_Levels = tuple[tuple[str, tuple[_Rule, ...]], ...]
"""(directory prefix relative to the root, its rules) of the enclosing `.gitignore` files, outer first."""


def walk(
    root: str | os.PathLike[str],
    *,
    start: str = "",
    skip_dir: Callable[[str], bool] | None = None,
    gitignore: bool = True,
    keep_ignored_files: bool = False,
) -> Iterator[Directory]:
    """Walk `root` (or its subdirectory `start`, a relative POSIX path) as described above.

    `skip_dir(name)` prunes more directory names. `gitignore=False` applies no `.gitignore` at all;
    `keep_ignored_files` still prunes ignored directories but lists ignored files.
    Unreadable directories yield nothing; so does a `start` inside an ignored directory.
    """
    path, rel = os.fspath(root), ""
    levels: _Levels = ()
    for name in [part for part in start.split("/") if part and part != "."]:
        # The .gitignore files above `start` apply to it; `start`'s own is read by the walk below.
        levels = _levels_of(path, rel, levels, gitignore)
        if gitignore and _ignored(levels, rel + name, name, is_dir=True):
            return
        path, rel = os.path.join(path, name), rel + name + "/"
    ignore_files = gitignore and not keep_ignored_files
    pending: list[tuple[str, str, _Levels]] = [(path, rel, levels)]
    while pending:
        path, rel, levels = pending.pop()
        try:
            with os.scandir(path) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            continue  # vanished or unreadable, as os.walk skips it
        if gitignore and any(entry.name == ".gitignore" for entry in entries):
            levels = _levels_of(path, rel, levels, gitignore)
        dirs, files = [], []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False  # callers stat the file and skip it with their reason
            if is_dir:
                if name in ALWAYS_SKIPPED or (skip_dir is not None and skip_dir(name)):
                    continue
                if gitignore and _ignored(levels, rel + name, name, is_dir=True):
                    continue
                dirs.append(name)
            elif not (ignore_files and _ignored(levels, rel + name, name, is_dir=False)):
                files.append(name)
        here = Directory(path, rel, dirs, files)
        yield here
        # Reversed onto the stack, so the first directory is walked first.
        pending.extend((os.path.join(path, d), rel + d + "/", levels) for d in reversed(here.dirs))


def parse_gitignore(text: str) -> tuple[_Rule, ...]:
    """The rules of one `.gitignore` file's text, in file order (git's `dir.c` parsing)."""
    rules = []
    for raw in text.removeprefix("\ufeff").split("\n"):
        line = _trim_trailing_spaces(raw.removesuffix("\r"))
        if not line or line.startswith("#"):
            continue  # `\#` escapes a leading hash and reaches the matcher as a literal `#`
        negated = line.startswith("!")
        pattern = line[1:] if negated else line
        dir_only = pattern.endswith("/")
        pattern = pattern.removesuffix("/")
        basename = "/" not in pattern
        pattern = pattern.removeprefix("/")
        if not pattern:
            continue  # `/` or `!` alone matches nothing in git
        rules.append(_Rule(negated, dir_only, basename, glob_matcher(pattern)))
    return tuple(rules)


def _ignored(levels: _Levels, rel: str, name: str, *, is_dir: bool) -> bool:
    # The deepest .gitignore first and its last line first: the first rule matching decides.
    for prefix, rules in reversed(levels):
        below = rel[len(prefix) :]
        for rule in reversed(rules):
            if rule.dir_only and not is_dir:
                continue
            if rule.matches(name if rule.basename else below):
                return not rule.negated
    return False


def _levels_of(path: str, rel: str, levels: _Levels, gitignore: bool) -> _Levels:
    rules = _read_gitignore(os.path.join(path, ".gitignore")) if gitignore else ()
    return (*levels, (rel, rules)) if rules else levels


def _read_gitignore(path: str) -> tuple[_Rule, ...]:
    # O_NOFOLLOW: git does not follow a symlinked .gitignore (and one could point out of the root);
    # O_NONBLOCK and the S_ISREG check: opening a FIFO planted as .gitignore would block forever.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read()
    except OSError:
        return ()
    finally:
        os.close(fd)
    # surrogateescape, as os.scandir decodes names: a pattern of non-UTF-8 bytes matches those bytes.
    return parse_gitignore(data.decode("utf-8", errors="surrogateescape"))


def _trim_trailing_spaces(line: str) -> str:
    """`line` without its trailing spaces, but a backslash keeps the space it escapes (as git)."""
    i, last_space = 0, None
    while i < len(line):
        char = line[i]
        if char == " ":
            if last_space is None:
                last_space = i
        elif char == "\\":
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]
