"""Which commands the `exec` server runs without asking, and what it asks about the others.

The allowlist is not the security boundary: `python` is on it and can do anything the sandbox
lets it. The sandbox is the boundary (gVisor: no network, no host files but the runtime, limits).
The allowlist separates the routine commands of a Python edit-and-test loop, which run at once,
from everything else (shells, `rm`, package managers, programs named by path...), which a human
confirms through MCP elicitation first.

Allowed without asking, named by bare program name (looked up on the sandbox's PATH, the
workspace's virtualenv first):

- Python tooling: python, python3, python3.N, pytest, py.test, ruff, mypy, make;
- looking at files: ls, cat, head, tail, wc, grep, egrep, fgrep, find, sed, sort, uniq, cut, tr,
  diff, cmp, stat, file, du, tree, echo, printf, pwd, true, false, basename, dirname, realpath,
  which;
- git, read-only subcommands only: status, diff, log, show, blame, ls-files, ls-tree, rev-parse,
  grep, shortlog, describe, cat-file.

Arguments that turn a routine program into a writer are asked about too: `find` with
-exec/-execdir/-ok/-okdir/-delete/-fprint*/-fls, `sed -i`/`--in-place`, git options before the
subcommand (`git -c ...` can point config at programs) and `git ... --output`.
"""

import re
import shlex
from collections.abc import Sequence

PYTHON_TOOLS = frozenset({"python", "python3", "pytest", "py.test", "ruff", "mypy", "make"})
FILE_VIEWERS = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "find",
        "sed",
        "sort",
        "uniq",
        "cut",
        "tr",
        "diff",
        "cmp",
        "stat",
        "file",
        "du",
        "tree",
        "echo",
        "printf",
        "pwd",
        "true",
        "false",
        "basename",
        "dirname",
        "realpath",
        "which",
    }
)
GIT_READ_ONLY = frozenset(
    {
        "status",
        "diff",
        "log",
        "show",
        "blame",
        "ls-files",
        "ls-tree",
        "rev-parse",
        "grep",
        "shortlog",
        "describe",
        "cat-file",
    }
)
ALLOWED_PROGRAMS = PYTHON_TOOLS | FILE_VIEWERS | {"git"}
"""Programs that run without confirmation (subject to the argument rules of this module)."""

_VERSIONED_PYTHON = re.compile(r"^python3\.\d{1,2}$")
_FIND_WRITERS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf"}
)
_MAX_SHOWN = 300


def describe(argv: Sequence[str]) -> str:
    """The command as a shell would show it, shortened for a confirmation prompt."""
    text = shlex.join(argv)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def why_not_allowed(argv: Sequence[str]) -> str | None:
    """Why `argv` needs a human's confirmation, or None when it is on the allowlist."""
    program, args = argv[0], list(argv[1:])
    if "/" in program:
        return f"{program} is named by path; only bare names of allowlisted programs run without asking"
    if program not in ALLOWED_PROGRAMS and not _VERSIONED_PYTHON.match(program):
        return f"{program} is not on the exec allowlist"
    if program == "find":
        writers = sorted(_FIND_WRITERS.intersection(args))
        if writers:
            return f"find {' '.join(writers)} runs programs or changes files"
    if program == "sed" and any(_is_sed_in_place(a) for a in args):
        return "sed -i edits files in place"
    if program == "git":
        return _git_problem(args)
    return None


def _is_sed_in_place(arg: str) -> bool:
    if arg.startswith("--"):
        return arg == "--in-place" or arg.startswith("--in-place=")
    # Bundled short options: -ni is -n -i. A script is its own argument and never starts with "-".
    return arg.startswith("-") and "i" in arg[1:].split("=")[0] and arg[1:2] not in ("e", "f", "l")


def _git_problem(args: list[str]) -> str | None:
    if not args:
        return None
    subcommand = args[0]
    if subcommand.startswith("-"):
        return "git options before the subcommand (like -c) can make git run programs"
    if subcommand not in GIT_READ_ONLY:
        return f"git {subcommand} is not a read-only git subcommand"
    if any(a == "--output" or a.startswith("--output=") for a in args[1:]):
        return f"git {subcommand} --output writes a file"
    return None


def confirmation_action(argv: Sequence[str]) -> str | None:
    """What the confirmation prompt says a non-allowlisted command would do, or None."""
    reason = why_not_allowed(argv)
    if reason is None:
        return None
    return f"run `{describe(argv)}` in the sandbox ({reason})"
