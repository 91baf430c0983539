"""Which tests execute the code a patch changes: one coverage run of the suite on the starting tree.

`StartingRun` is what that run found: every test's outcome on the starting tree, and per measured
file, per test, the lines it executed (`tool_servers.exec.test_coverage` measures it in the
sandbox). From it and the patch's `Probes` (`changed_code`):

- `covering`: the tests that execute a changed line — the tests the task is about, whatever the
  task's text or plan names;
- `at_import`: a changed line runs outside any test (at import, in a session fixture's set-up), or
  the patch changes a statement that does: every test may be affected.

Exact and conservative (what the verifier relies on): a test that executes none of the changed
code on the starting tree runs the same code with the patch, so its outcome cannot change — the
verifier runs on the patched tree only the files of the tests that do (plus the tests the task
names and the test files the patch changes), and the whole suite when `at_import`, or when the
patch changes files coverage cannot follow. What this misses: code run in a subprocess, code
reached only through a module- or session-scoped fixture set up by another test (its files are
run whole, which covers module scope), and tests whose outcome depends on the order or timing of
others.

`CoverageCache` keeps a run per starting tree (git's tree hash: the same snapshot in a second task
has the same hash) under the verifier's cache directory, so a revision, or another task on the
same tree, measures it once; a later patch that changes other files adds their measurement.
"""

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.roles.verifier.changed_code import Probes
from agents.roles.verifier.exec_session import Crash

MAX_CACHED_TREES = 200
"""Starting trees kept in the cache; the least recently used beyond it are removed."""
OUTSIDE_TESTS = ""
"""The coverage context of code run outside any test."""


class StartingRun(BaseModel):
    """What the coverage run(s) of the suite on one starting tree found (cached as JSON)."""

    model_config = ConfigDict(extra="ignore")

    outcomes: dict[str, str] = Field(default_factory=dict)
    """Every test's outcome on the starting tree: passed, failed, error or skipped."""
    crashes: dict[str, Crash] = Field(default_factory=dict)
    """Where each failing test's exception was raised on the starting tree."""
    measured: dict[str, dict[str, list[int]]] = Field(default_factory=dict)
    """Per measured file (root-relative): context -> lines executed; a measured file that never
    ran maps to {}."""
    duration_s: float = 0.0
    """How long the first run of the whole suite took."""
    complete: bool = True
    """The run gave every test's outcome (it was not cut short)."""

    def missing(self, paths: list[str]) -> list[str]:
        return [p for p in paths if p not in self.measured]

    def merged(self, other: "StartingRun", paths: list[str]) -> "StartingRun":
        measured = dict(self.measured)
        for path in paths:
            measured[path] = other.measured.get(path, {})
        return StartingRun(
            outcomes=other.outcomes or self.outcomes,
            crashes=other.crashes if other.outcomes else self.crashes,
            measured=measured,
            duration_s=self.duration_s or other.duration_s,
            complete=other.complete if other.outcomes else self.complete,
        )


@dataclass(frozen=True)
class Reach:
    """Which tests execute a patch's changed code."""

    covering: frozenset[str] = frozenset()
    """Tests that executed a changed line on the starting tree."""
    at_import: bool = False
    """A changed line ran outside any test, or the patch changes code that does (see the module
    docstring): every test may be affected."""
    where: list[str] = field(default_factory=list)
    """`path:line` of changed lines executed, for reports (a few)."""


def reach(run: StartingRun, probes: Probes) -> Reach:
    """The tests that execute the changed code of `probes`, as `run` measured it."""
    covering: set[str] = set()
    at_import = any(p.at_import for p in probes.probes)
    where: list[str] = []
    for probe in probes.probes:
        for context, lines in run.measured.get(probe.path, {}).items():
            hit = probe.lines.intersection(lines)
            if not hit:
                continue
            if context == OUTSIDE_TESTS:
                at_import = at_import or not probe.module_wide
                continue
            covering.add(context)
            if len(where) < 5:
                where.append(f"{probe.path}:{min(hit)}")
    # A test id may carry a parametrization the outcomes spell alike; only real tests count.
    known = set(run.outcomes)
    return Reach(
        covering=frozenset(t for t in covering if not known or t in known), at_import=at_import, where=where
    )


class CoverageCache:
    """`StartingRun`s by starting tree, as JSON files in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _file(self, tree: str) -> Path:
        # The format's version in the name: a run kept before crashes were recorded is measured again.
        return self.directory / f"{tree}.v5.json"

    def load(self, tree: str) -> StartingRun | None:
        """The run kept for `tree`; None when there is none or it is unreadable."""
        path = self._file(tree)
        try:
            run = StartingRun.model_validate_json(path.read_bytes())
            os.utime(path)  # recently used
            return run
        except (OSError, ValidationError, ValueError):
            return None

    def store(self, tree: str, run: StartingRun) -> None:
        """Keep `run` for `tree` (written whole, then renamed: a reader never sees half a file)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                json.dump(run.model_dump(mode="json"), handle)
            os.replace(tmp, self._file(tree))
            self._trim()
        except OSError:
            pass  # the cache only saves time: a run not kept is measured again

    def _trim(self) -> None:
        files = sorted(self.directory.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in files[:-MAX_CACHED_TREES]:
            old.unlink(missing_ok=True)
        for stale in self.directory.glob("*.tmp"):
            if time.time() - stale.stat().st_mtime > 3600:  # a writer that died mid-way
                stale.unlink(missing_ok=True)
