"""Glob matching of POSIX relative paths with git's wildmatch rules; wcmatch does the matching.

`*`, `?` and `[...]` stay within one path component; `**` as a whole component matches any number
of directories, none included (`**/*.py`, `src/**`, `a/**/b`); `**` inside a component is a plain
`*`. Names starting with a dot match like any other, matching is case-sensitive, and `\\` escapes
the next character. Braces, extglobs and a leading `!` are literal characters, as they are in git.
The `.gitignore` rules (`ignore_walk`) and `list_files`' pattern share this one dialect.
"""

import re
from collections.abc import Callable

from wcmatch import glob

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.FORCEUNIX | glob.CASE


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate: does a whole relative path (no leading or trailing `/`) match `pattern`?"""
    # translate, not glob.compile: its matcher builds an object per call, about ten times slower,
    # and the freshness walk checks every directory of a large tree before each query.
    (regex,), _ = glob.translate(pattern, flags=_FLAGS)
    compiled = re.compile(regex)
    return lambda path: compiled.fullmatch(path) is not None
