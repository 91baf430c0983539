"""Failures the environment causes, told apart from the patch's.

A project's environment can make a whole group of tests fail whatever the code does: a dependency
newer than the project expects deprecates a call, and the project's `filterwarnings = error` turns
the warning into a failure in every test that reaches it. Such a test may well execute the code a
patch changes, which makes it one of the task's tests; failing before and after, it would be
blamed as `test.still_failing`, and no patch could pass.

A target failing with the patch is the environment's, listed as pre-existing and never blamed,
when on the starting tree it failed with the same crash — the same exception line (numbers
aside) raised at the same place; the coverage run records each failing test's crash
(`tool_servers.exec.test_coverage`); a test the patch adds, on the reproduction tree (the patch's
tests without its source changes) — and either:

- the crash is what a connection attempt raises without a network (`NETWORK_SIGNS`, wherever the
  project wraps it): the sandbox never gives one, so a test that needs it fails before and after
  whatever the patch does; or
- it was raised in the test runner's own code (pytest, pluggy), or is a fixture pytest cannot
  resolve (a plug-in the tests expect is missing): the test and the installed runner disagree — an
  API the runner dropped, a warning it turns into an error — which no change to the project's
  source mends (a failed `assert`, `pytest.raises` or `approx` is reported at the test's line,
  not in the runner); or
- it is a warning turned into an error (`DeprecationWarning: ...`, any `*Warning`) and the test's
  traceback runs through none of the source the patch changes: the installed Python or a
  dependency deprecates something the project calls (Python 3.9's `parser` module in pytest's
  own source, say), which the task's fix neither causes nor mends; or
- the crash happened outside the repository (an installed package, the standard library), and
  the same crash also fails, on the starting tree, tests that execute none of the changed code,
  or fails many tests in several test files (`systemic_crashes`: a dependency's warning turned
  error fails a project tested with itself everywhere, where every test executes the change):
  not the task's problem but something many tests share.

Such a test shows nothing either way: when one of the task's tests is the environment's and no
other test went from failing to passing, the verdict is `unverified`, not `passed`
(`agents.roles.verifier.testing`).

A wrong fix whose test still fails in the project's code or in its test body (an assertion) is
never the environment's; nor is one whose test still fails in a library, unless unrelated tests
crash there the same way. What the rule gives up: a task whose problem is itself
a crash in a dependency shared by unrelated tests; its tests are then never evidence either way,
so such a patch is `unverified` unless another test shows the fix.
"""

import re
from collections import Counter

from agents.roles.verifier.exec_session import Crash, TestFailure

_LOCATION = re.compile(r"^(?P<path>[^\s:][^:\n]*\.py):(?P<line>\d+): ", re.M)
"""A traceback entry of pytest's `--tb=short` form: `path:line: in function`."""
_FIXTURE_LOCATION = re.compile(r"^file (?P<path>[^\n]+\.py), line (?P<line>\d+)$", re.M)
"""How pytest places a fixture it cannot resolve: `file PATH, line N`."""
_FIXTURE_ERRORS = re.compile(r"^fixture '[^']*' not found|^recursive dependency involving fixture")
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+")
_INSTALLED = ("site-packages/", "dist-packages/")
_RUNNER = ("/_pytest/", "/pluggy/")
NETWORK_SIGNS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "No route to host",
    "Network is unreachable",
    "socket.gaierror",
    "NewConnectionError",
    "Failed to establish a new connection",
    "ConnectTimeout",
)
"""What a connection attempt raises in a sandbox without a network, as pytest reports it."""
CrashKey = tuple[str, int, str]
_WARNING = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*Warning: ")
"""An exception line of a warning raised as an error: `DeprecationWarning: ...`."""


def crash_of(failure: TestFailure) -> Crash | None:
    """Where `failure` was raised: its traceback's last entry, and the exception reported after it
    (for a chained exception, the last one raised, as pytest's own crash is); for a fixture that
    cannot be resolved, the fixture's place and pytest's error line."""
    entries = list(_LOCATION.finditer(failure.traceback))
    fixture = list(_FIXTURE_LOCATION.finditer(failure.traceback))
    if fixture and (not entries or fixture[-1].start() > entries[-1].start()):
        raised = [line[1:].strip() for line in failure.traceback.splitlines() if line.startswith("E ")]
        if not raised:
            return None
        return Crash(path=fixture[-1]["path"], line=int(fixture[-1]["line"]), message=raised[0])
    if not entries:
        return None
    last = entries[-1]
    raised = [line[1:] for line in failure.traceback[last.end() :].splitlines() if line.startswith("E ")]
    message = "\n".join(raised) if raised else failure.message
    if not message.strip():
        return None
    return Crash(path=last["path"], line=int(last["line"]), message=message)


def _key(crash: Crash) -> CrashKey:
    # Numbers in a message differ between two runs of the same failure: an object's address, a
    # thread's ("Exception in thread Thread-5"), a port. The other conditions keep this safe.
    # A line in the repository moves when the patch edits its file: only a place outside it
    # keeps its line.
    line = crash.line if _outside(crash) else 0
    # pytest's crash and the report's `E` lines lay out the same text differently.
    message = " ".join(crash.message.split())[:300]
    return crash.path, line, _NUMBER.sub("#", message)


def _outside(crash: Crash) -> bool:
    return crash.path.startswith("/") or any(part in crash.path for part in _INSTALLED)


def crashes_outside(starting: dict[str, Crash], covering: frozenset[str]) -> Counter[CrashKey]:
    """How many tests executing none of the changed code crashed at each place on the starting tree."""
    return Counter(_key(crash) for tid, crash in starting.items() if tid not in covering)


SYSTEMIC_TESTS = 3
"""A crash outside the repository that fails at least this many tests on the starting tree..."""
SYSTEMIC_FILES = 2
"""... in at least this many test files is the environment's, whatever those tests execute."""


def systemic_crashes(starting: dict[str, Crash]) -> Counter[CrashKey]:
    """The crashes outside the repository that fail, on the starting tree, at least `SYSTEMIC_TESTS`
    tests in at least `SYSTEMIC_FILES` test files (counted as one test each): a dependency's
    warning turned error fails a whole project's tests alike, even where every test executes the
    changed code (a project tested with itself, as pytest is)."""
    files: dict[CrashKey, set[str]] = {}
    tests: Counter[CrashKey] = Counter()
    for tid, crash in starting.items():
        if _outside(crash):
            key = _key(crash)
            files.setdefault(key, set()).add(tid.split("::")[0])
            tests[key] += 1
    return Counter(
        {key: 1 for key, n in tests.items() if n >= SYSTEMIC_TESTS and len(files[key]) >= SYSTEMIC_FILES}
    )


def unchanged(failure: TestFailure, starting: dict[str, Crash]) -> bool:
    """`failure` is the crash its test had on the starting tree (numbers aside; in the repository,
    wherever the line moved to)."""
    before, now = starting.get(failure.test_id), crash_of(failure)
    return before is not None and now is not None and _key(before) == _key(now)


def environmental(
    failure: TestFailure,
    starting: dict[str, Crash],
    elsewhere: Counter[CrashKey],
    *,
    through_changed: bool = True,
) -> str | None:
    """Why `failure`, a target failing with the patch, is the environment's (see the module
    docstring; `elsewhere` from `crashes_outside`; `through_changed`: its traceback runs through
    source the patch changes): where it crashed, shortly; None when it may be the patch's."""
    before, now = starting.get(failure.test_id), crash_of(failure)
    if before is None or now is None or _key(before) != _key(now):
        return None
    network = any(sign in now.message for sign in NETWORK_SIGNS)
    runner = (_outside(now) and any(part in now.path for part in _RUNNER)) or bool(
        _FIXTURE_ERRORS.match(now.message.strip())
    )
    deprecated = not through_changed and bool(_WARNING.match(now.message.strip()))
    if not (network or runner or deprecated or (_outside(now) and elsewhere[_key(now)])):
        return None
    return f"{_short(now.path)}:{now.line}: {now.message.strip().splitlines()[0][:120]}"


def _short(path: str) -> str:
    """An installed module's path from its package on, a standard module's from `pythonX.Y/`."""
    for part in _INSTALLED:
        if part in path:
            return path.split(part, 1)[1]
    found = re.search(r"/python\d+\.\d+/(.+)$", path)
    return found[1] if found else path
