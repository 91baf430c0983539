"""The correctness gate `run_static_checks` runs: ruff's JSON findings and a compile of every file.

Ruff runs with a narrow default selection, the rules that mean "this code is broken", not "this
code is untidy" (the gate flake8 users know as `--select=E9,F63,F7,F82`): syntax errors, invalid
comparisons (F63), misplaced `return`/`yield`/`break` (F7) and undefined names (F82). The compile
step (`compile()` of each file, as `py_compile` does, without writing `.pyc` files) catches what
the interpreter itself rejects, in the workspace's own Python version.
"""

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
DEFAULT_SELECT = ("E9", "F63", "F7", "F82")
RULE_SELECTOR = re.compile(r"^(ALL|[A-Z]{1,4}[0-9]{0,4})$")
SYNTAX_ERROR = "syntax-error"
MAX_FINDINGS = 500

# Both checkers in one sandbox command (each command costs a round trip to the sandbox), run as
# `python -I -S -c CHECKS_SCRIPT N RUFF_ARGV... PATH...`, where N is the length of RUFF_ARGV (0
# without ruff); -S, as compiling needs nothing installed and site's start-up is a third of the
# interpreter's under gVisor. First the compile pass: one JSON line per file that does not
# compile, then {"checked": N}. Then the process becomes `RUFF_ARGV -- PATH...`, whose JSON list
# follows on stdout and whose exit status is the command's. Virtualenvs, hidden and cache
# directories are skipped by the compile pass.
CHECKS_SCRIPT = r"""
import json, os, sys
SKIP = {"__pycache__", "node_modules", "site-packages"}
def files(top):
    if os.path.isfile(top):
        yield top
        return
    for here, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP
                         and not os.path.exists(os.path.join(here, d, "pyvenv.cfg")))
        yield from (os.path.join(here, n) for n in sorted(names) if n.endswith(".py"))
n = int(sys.argv[1])
ruff, tops = sys.argv[2:2 + n], sys.argv[2 + n:]
checked = 0
for top in tops:
    for path in files(top):
        checked += 1
        try:
            with open(path, "rb") as handle:
                compile(handle.read(), path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            print(json.dumps({"path": path, "line": exc.lineno or 0, "column": exc.offset or 0,
                              "message": f"{type(exc).__name__}: {exc.msg}"}))
        except (ValueError, OSError) as exc:
            print(json.dumps({"path": path, "line": 0, "column": 0, "message": str(exc)}))
print(json.dumps({"checked": checked}), flush=True)
if ruff:
    try:
        os.execv(ruff[0], [*ruff, "--", *tops])
    except OSError as exc:
        print(f"cannot run {ruff[0]}: {exc}", file=sys.stderr)
        sys.exit(127)
"""


class Finding(BaseModel):
    """One problem a checker reported."""

    model_config = _CONFIG

    path: str
    """File relative to the root."""
    line: int
    """1-based line (0 when the checker gave none)."""
    column: int
    """1-based column (0 when the checker gave none)."""
    code: str
    """Ruff rule code (e.g. `F821`), or `syntax-error`."""
    message: str
    tool: Literal["ruff", "py_compile"]


class CheckRun(BaseModel):
    """How one checker ran."""

    model_config = _CONFIG

    tool: Literal["ruff", "py_compile"]
    exit_code: int | None
    """The checker's exit status (ruff: 0 clean, 1 findings, 2 it failed); None when killed or skipped."""
    timed_out: bool
    note: str = ""
    """Why the checker was skipped or its output unreadable, with its stderr tail."""


class StaticChecksOutput(BaseModel):
    """Findings of ruff and the compile check."""

    model_config = _CONFIG

    ok: bool
    """True when both checkers ran to completion and found nothing."""
    findings: list[Finding]
    """Sorted by path and line; a syntax error both checkers report is listed once."""
    files_checked: int
    """Python files compiled."""
    runs: list[CheckRun]
    backend: Literal["gvisor", "process"]
    warning: str | None = None
    """Set when the weaker process backend ran it: why, and what isolation was missing."""
    duration_s: float


def _relative(path: str, prefixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path.removeprefix("./")


def parse_ruff(stdout: str, prefixes: tuple[str, ...]) -> list[Finding]:
    """Findings from `ruff check --output-format=json`.

    Raises:
        ValueError: stdout is not ruff's JSON list.
    """
    findings = []
    for item in json.loads(stdout or "[]"):
        location = item.get("location") or {}
        code = item.get("code") or SYNTAX_ERROR
        findings.append(
            Finding(
                path=_relative(item.get("filename", ""), prefixes),
                line=location.get("row", 0),
                column=location.get("column", 0),
                code=SYNTAX_ERROR if code == "invalid-syntax" else code,
                message=item.get("message", ""),
                tool="ruff",
            )
        )
    return findings


def split_checks(stdout: str) -> tuple[str, str | None]:
    """`CHECKS_SCRIPT`'s output cut in two: the compile pass's lines, through its {"checked": N}
    line, and ruff's output after them (None when the compile pass did not finish: ruff never
    started)."""
    lines = stdout.splitlines(keepends=True)
    for i, raw in enumerate(lines):
        if raw.startswith('{"checked": '):
            return "".join(lines[: i + 1]), "".join(lines[i + 1 :])
    return stdout, None


def parse_compile(stdout: str, prefixes: tuple[str, ...]) -> tuple[list[Finding], int | None]:
    """Findings and the number of files checked from the compile pass's output (None if cut short)."""
    findings, checked = [], None
    for raw in stdout.splitlines():
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if "checked" in item:
            checked = item["checked"]
            continue
        findings.append(
            Finding(
                path=_relative(item["path"], prefixes),
                line=item["line"],
                column=item["column"],
                code=SYNTAX_ERROR,
                message=item["message"],
                tool="py_compile",
            )
        )
    return findings, checked


def merge(ruff: list[Finding], compiled: list[Finding]) -> list[Finding]:
    """Both lists, sorted, without compile errors on a line ruff already reports as a syntax error."""
    seen = {(f.path, f.line) for f in ruff if f.code == SYNTAX_ERROR}
    kept = ruff + [f for f in compiled if (f.path, f.line) not in seen]
    return sorted(kept, key=lambda f: (f.path, f.line, f.column, f.code))[:MAX_FINDINGS]
