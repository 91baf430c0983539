"""Which command runs a repository's tests, and reading per-test results from the ones that are not pytest.

Not every project runs `pytest` bare. In order:

1. The configuration: `[verification] test_command` in the root's `codeloop.toml` (or
   `[tool.codeloop.verification]` in its `pyproject.toml`) — there only: the same key under
   `[environment]` is an error naming the right table. `{tests}` stands
   for the selected test files (each shell-quoted); without it the command always runs whole.
   `python` as the first word is the test interpreter.
2. Detected: Django's `tests/runtests.py` (with a `django/` package beside it), sympy's `bin/test`
   (with `sympy/`); else pytest, which also runs `unittest` test cases, so a `python -m unittest`
   project needs nothing configured.

pytest — bare, or a configured command that runs it (`python -m pytest ...`, `pytest ...`) — is
run as `run_tests` always runs it: a JUnit report, and per-test coverage on request. Any other
command runs as given, its verbose output parsed per test: unittest's and Django's `test_x
(module.Class) ... ok|FAIL|ERROR|skipped` lines, sympy's per-file blocks of `test_x ok|F|E`. Their
test ids are made pytest-like (`tests/admin/tests.py::AdminTests::test_x`) so the verifier's
file-based selection works the same. Per-test coverage needs pytest's hooks: with another command
the result's `coverage.error` says so, and the verifier falls back to names and tracebacks.
"""

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

RunnerKind = Literal["pytest", "django", "sympy", "command"]
CONFIG_KEY = "[verification] test_command"


class TestCommandError(ValueError):
    """The configuration's test command cannot be used; the message says why and what to do."""

    __test__ = False


@dataclass(frozen=True)
class TestCommand:
    """How the root's tests are run."""

    __test__ = False
    kind: RunnerKind
    words: tuple[str, ...] = ()
    """The configured command split into words (`{tests}` kept as a word); empty when detected."""
    source: str = "detected"

    def argv(self, python: str, selection: list[str]) -> list[str]:
        """The command for the test files in `selection` (empty: the whole suite)."""
        if self.kind == "django":
            labels = [_django_label(p) for p in selection]
            return [python, "tests/runtests.py", "--verbosity", "2", "--parallel", "1", *labels]
        if self.kind == "sympy":
            return [python, "bin/test", "-C", "--verbose", *selection]
        words = [python if w == "python" and i == 0 else w for i, w in enumerate(self.words)]
        if "{tests}" not in words:
            return words
        at = words.index("{tests}")
        return [*words[:at], *selection, *words[at + 1 :]]

    @property
    def pytest_args(self) -> list[str] | None:
        """For a configured command that runs pytest: its own arguments (before `{tests}`), which
        `run_tests` adds to its pytest run; None when it does not run pytest."""
        words = list(self.words)
        if words[:3] == ["python", "-m", "pytest"]:
            rest = words[3:]
        elif words[:1] in (["pytest"], ["py.test"]):
            rest = words[1:]
        else:
            return None
        return [w for w in rest if w != "{tests}"]


def _django_label(path: str) -> str:
    """`tests/admin_views/tests.py` → `admin_views.tests` (runtests.py's test labels)."""
    pure = PurePosixPath(path).with_suffix("")
    parts = list(pure.parts)
    if parts and parts[0] == "tests":
        parts = parts[1:]
    return ".".join(parts)


def _table(data: dict, *keys: str) -> dict:
    for key in keys:
        data = data.get(key, {}) if isinstance(data, dict) else {}
    return data if isinstance(data, dict) else {}


def configured_test_command(root: Path) -> str | None:
    """The test command the root's configuration sets, if any.

    Raises:
        TestCommandError: the file is malformed, or both keys are set and differ.
    """
    for name, prefix in (("codeloop.toml", ()), ("pyproject.toml", ("tool", "codeloop"))):
        path = root / name
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
        except tomllib.TOMLDecodeError as exc:
            raise TestCommandError(f"{name} is not valid TOML ({exc}): fix it to run the tests") from None
        if _table(data, *prefix, "environment").get("test_command") is not None:
            raise TestCommandError(
                f"{name} sets test_command under [environment]; the test command lives under "
                f"[verification]: move it to {CONFIG_KEY}"
            )
        value = _table(data, *prefix, "verification").get("test_command")
        given = [] if value is None else [value]
        if any(not isinstance(v, str) or not v.strip() for v in given):
            raise TestCommandError(f"{name}: {CONFIG_KEY} must be a non-empty string")
        if given:
            return str(given[0])
        if name == "codeloop.toml":
            return None  # codeloop.toml, when present, is the project's file: pyproject.toml is not read
    return None


def find_test_command(root: Path) -> TestCommand:
    """The root's test command (see the module docstring).

    Raises:
        TestCommandError: the configured command cannot be used.
    """
    configured = configured_test_command(root)
    if configured is not None:
        try:
            words = tuple(shlex.split(configured))
        except ValueError as exc:
            raise TestCommandError(f"test_command {configured!r} cannot be split into words: {exc}") from None
        if not words:
            raise TestCommandError("test_command is empty")
        command = TestCommand("command", words, source="configuration")
        return (
            TestCommand("pytest", words, source="configuration")
            if command.pytest_args is not None
            else command
        )
    if (root / "tests" / "runtests.py").is_file() and (root / "django").is_dir():
        return TestCommand("django")
    if (root / "bin" / "test").is_file() and (root / "sympy").is_dir():
        return TestCommand("sympy")
    return TestCommand("pytest")


Outcome = Literal["passed", "failed", "error", "skipped"]
_UNITTEST = re.compile(
    r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?:\n.*?)? \.\.\. (?P<status>ok|FAIL|ERROR|skipped|expected failure|unexpected success)",
    re.M,
)
_UNITTEST_STATUS: dict[str, Outcome] = {
    "ok": "passed",
    "FAIL": "failed",
    "ERROR": "error",
    "skipped": "skipped",
    "expected failure": "skipped",
    "unexpected success": "failed",
}
_SYMPY_FILE = re.compile(r"^(?P<file>[\w/.-]+\.py)\[\d+\]", re.M)
_SYMPY_TEST = re.compile(r"^(?P<name>test_\w+) (?P<status>ok|F|E|f|X|s|Skipped|w)\b", re.M)
_SYMPY_STATUS: dict[str, Outcome] = {
    "ok": "passed",
    "F": "failed",
    "E": "error",
    "f": "skipped",
    "X": "failed",
    "s": "skipped",
    "Skipped": "skipped",
    "w": "skipped",
}


def _module_file(root: Path, dotted: str, *, base: str = "") -> str:
    """The file of a dotted module (the longest prefix that is a file under `base`, else all of it)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        candidate = PurePosixPath(base, *parts[:cut]).with_suffix(".py").as_posix()
        if (root / candidate).is_file():
            return candidate
    return PurePosixPath(base, *parts).with_suffix(".py").as_posix()


def parse_unittest_output(root: Path, output: str, *, base: str = "") -> dict[str, Outcome]:
    """Per-test outcomes of unittest's (and Django's) verbose output, ids made pytest-like:
    `FILE::Class::test`. `base`: the folder test labels are relative to (Django's `tests`)."""
    outcomes: dict[str, Outcome] = {}
    for match in _UNITTEST.finditer(output):
        where, name = match["where"], match["name"]
        if where.endswith("." + name):
            where = where[: -len(name) - 1]
        module, _, cls = where.rpartition(".")
        file = _module_file(root, module or where, base=base)
        test_id = f"{file}::{cls}::{name}" if module else f"{file}::{name}"
        outcomes[test_id] = _UNITTEST_STATUS[match["status"]]
    return outcomes


def parse_sympy_output(output: str) -> dict[str, Outcome]:
    """Per-test outcomes of sympy's `bin/test --verbose` output: `FILE::test`."""
    outcomes: dict[str, Outcome] = {}
    files = [(m.start(), m["file"]) for m in _SYMPY_FILE.finditer(output)]
    for match in _SYMPY_TEST.finditer(output):
        file = next((f for start, f in reversed(files) if start < match.start()), "")
        outcomes[f"{file}::{match['name']}" if file else match["name"]] = _SYMPY_STATUS[match["status"]]
    return outcomes


def parse_outcomes(command: TestCommand, root: Path, output: str) -> dict[str, Outcome]:
    """Per-test outcomes of a run of `command` that is not pytest."""
    if command.kind == "sympy":
        return parse_sympy_output(output)
    return parse_unittest_output(root, output, base="tests" if command.kind == "django" else "")
