"""Checking a read-mode answer against the tree: what it cites must exist.

An answer cites files (`pkg/calc.py`), lines (`pkg/calc.py:12`, `pkg/calc.py:12-20`) and symbols
(`` `parse_config()` ``, `` `Calculator.add` ``). Each cited file must exist inside the workspace,
each cited line must be within its file, and each cited symbol must occur as a word in the
repository's source (its last dotted part: `Calculator.add` needs `add`). Builtins and keywords are
not checked. Anything cited that is not there is `answer.unsupported`; an answer that cites
nothing checkable is `unverified`, not passed.
"""

import builtins
import keyword
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agents.failures import FailureClass
from agents.feedback import order_failures
from agents.messages.verification import Check, Failure, VerificationReport
from agents.roles.verifier.selection import SKIP_DIRS
from agents.roles.verifier.verdict import decide

CODE_SUFFIXES = (
    "py",
    "pyi",
    "md",
    "rst",
    "txt",
    "toml",
    "cfg",
    "ini",
    "json",
    "yaml",
    "yml",
    "js",
    "ts",
    "tsx",
    "jsx",
    "rs",
    "go",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "java",
    "kt",
    "rb",
    "sh",
    "html",
    "css",
    "sql",
    "lock",
)
_PATH = re.compile(
    r"(?<![\w/.:-])(?P<path>(?:[\w.-]+/)*[\w.-]*\w\.(?:" + "|".join(CODE_SUFFIXES) + r"))"
    r"(?:(?::|#L)(?P<line>\d+)(?:-L?(?P<end>\d+))?)?(?![\w/])"
)
_BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
_SYMBOL = re.compile(r"^(?P<name>[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)(?P<call>\(\))?$")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
MAX_SOURCE_BYTES = 30_000_000
_IGNORED = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls", "pytest", "os", "sys", "re"}


@dataclass(frozen=True)
class Citation:
    kind: str
    """`file`, `line` or `symbol`."""
    text: str
    path: str | None = None
    line: int | None = None
    end: int | None = None


def citations(answer: str) -> list[Citation]:
    """The files, lines and symbols `answer` cites (URLs ignored)."""
    text = _URL.sub(" ", answer)
    found: list[Citation] = []
    for match in _PATH.finditer(text):
        path = match["path"].removeprefix("./")
        line = int(match["line"]) if match["line"] else None
        end = int(match["end"]) if match["end"] else None
        found.append(Citation("line" if line else "file", match[0], path=path, line=line, end=end))
    for match in _BACKTICKED.finditer(text):
        inner = match[1].strip()
        symbol = _SYMBOL.match(inner)
        if not symbol or _PATH.fullmatch(inner):
            continue
        name = symbol["name"]
        last = name.rsplit(".", 1)[-1]
        looks_like_code = (
            symbol["call"] or "." in name or "_" in name or re.search(r"[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", name)
        )
        if looks_like_code and last not in _IGNORED:
            found.append(Citation("symbol", inner, path=None))
    return list({(c.kind, c.text): c for c in found}.values())


def _inside(root: Path, path: str) -> Path | None:
    candidate = (root / path).resolve()
    return candidate if candidate == root or root in candidate.parents else None


def _source_text(root: Path) -> str:
    chunks, total = [], 0
    for here, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in names:
            if name.rsplit(".", 1)[-1] not in CODE_SUFFIXES:
                continue
            try:
                text = Path(here, name).read_text(errors="replace")
            except OSError:
                continue
            chunks.append(text)
            total += len(text)
            if total > MAX_SOURCE_BYTES:
                return "\n".join(chunks)
    return "\n".join(chunks)


def check_answer(root: Path, answer: str) -> VerificationReport:
    """The report on `answer` against the tree at `root` (see the module docstring)."""
    root = root.resolve()
    cited = citations(answer)
    failures: list[Failure] = []
    source: str | None = None
    for c in cited:
        if c.kind == "symbol":
            source = _source_text(root) if source is None else source
            last = c.text.removesuffix("()").rsplit(".", 1)[-1]
            if not re.search(rf"\b{re.escape(last)}\b", source):
                failures.append(
                    Failure(
                        failure_class=FailureClass.ANSWER_UNSUPPORTED,
                        message=f"cites symbol {c.text} which is not in the repository",
                    )
                )
            continue
        assert c.path is not None
        target = _inside(root, c.path)
        if target is None or not target.is_file():
            failures.append(
                Failure(
                    failure_class=FailureClass.ANSWER_UNSUPPORTED,
                    path=c.path,
                    message=f"cites {c.path}, which does not exist",
                )
            )
            continue
        if c.line is not None:
            lines = len(target.read_text(errors="replace").splitlines())
            last_line = max(c.line, c.end or c.line)
            if c.line < 1 or last_line > lines:
                failures.append(
                    Failure(
                        failure_class=FailureClass.ANSWER_UNSUPPORTED,
                        path=c.path,
                        line=c.line,
                        message=f"cites line {last_line} of {c.path}, which has {lines} lines",
                    )
                )
    if not cited:
        failures.append(
            Failure(
                failure_class=FailureClass.VERIFY_UNVERIFIABLE,
                message="the answer cites no file, line or symbol to check",
            )
        )
    unsupported = [f for f in failures if f.failure_class == FailureClass.ANSWER_UNSUPPORTED]
    check = Check(
        name="answer",
        ok=not failures,
        summary=f"{len(cited)} citation(s) checked, {len(unsupported)} not found in the tree",
    )
    verdict = decide(failures, judged=bool(cited))
    return VerificationReport(
        verdict=verdict,
        checks=[check],
        failures=order_failures(failures),
        summary=f"answer {verdict}: {check.summary}",
    )
