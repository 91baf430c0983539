"""One verification in progress: the patch, the deadline, what has been found so far."""

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agents.messages.verification import Check, Failure, TestOutcome
from agents.roles.verifier.baseline import Knowledge
from agents.roles.verifier.exec_session import Crash, EnvironmentUsed, TestFailure
from agents.roles.verifier.execution import Reach
from agents.roles.verifier.patchset import FileChange
from agents.roles.verifier.scope import MeasuredScope
from agents.roles.verifier.test_modules import DEFAULT_PATTERNS, is_test_module

DEADLINE_MARGIN_S = 3.0
"""Kept back from each call's timeout for the sandbox's kill and the report to arrive in time."""


def seconds_left(deadline: datetime) -> float:
    return (deadline - datetime.now(UTC)).total_seconds()


@dataclass
class Verification:
    """What one verification has learnt so far; the steps add to it, the report is made from it."""

    workspace: Path
    deadline: datetime
    known: Knowledge
    changes: list[FileChange] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    failing: dict[str, TestFailure] = field(default_factory=dict)
    """Tests failing on the patched tree, by id."""
    tests_run: int = 0
    ran_files: set[str] = field(default_factory=set)
    """Test files run whole on the patched tree (the targeted run)."""
    suite_ran: bool = False
    """The whole suite ran on the patched tree: every test not failing there passed (or skipped)."""
    evidence: list[str] = field(default_factory=list)
    """What shows the task's problem gone: tests that failed on the starting tree (or on the
    reproduction tree) and pass with the patch, or the task's example no longer raising."""
    evidence_kind: str = "none"
    """What the evidence is: `flip`, `reproduction` or `example` (`VerificationReport.evidence_kind`)."""
    order_dependent: list[str] = field(default_factory=list)
    """Targets whose flip the starting tree did not confirm in the same company and order."""
    example_behaviour: str | None = None
    """What the task's example did with the patch (`example.behaviour_of`); None when it did not run."""
    example_before: str | None = None
    """What it did on the starting tree."""
    fixed: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    preexisting: list[str] = field(default_factory=list)
    reproduction: dict[str, TestFailure] = field(default_factory=dict)
    """Tests failing on the reproduction tree (see `agents.roles.verifier.verify`), by id."""
    reproduced_files: set[str] = field(default_factory=set)
    """Test files run on the reproduction tree."""
    started: dict[str, TestOutcome] = field(default_factory=dict)
    """Outcomes on the starting tree itself of failing tests the patch left alone in test files
    it edited (see `agents.roles.verifier.testing`)."""
    reproduction_resolved: bool = True
    """False when a reproduction run timed out or listed fewer failures than it had."""
    starting_crashes: dict[str, Crash] = field(default_factory=dict)
    """Where each test failing on the starting tree crashed (from the coverage run)."""
    environmental: dict[str, str] = field(default_factory=dict)
    """Targets failing before and after the patch the way the environment makes them fail
    (`agents.roles.verifier.environment_failures`), by id: what they share."""
    reach: Reach | None = None
    """Which tests execute the changed code, from the coverage run on the starting tree (None:
    not measured; the tests the task is about are then found by name and traceback)."""
    green_suite: bool = False
    """The task's words ask for the whole suite to pass: every failing test is the task's."""
    patched_since: float | None = None
    """When (monotonic) the runs with the patch began, after the starting tree's coverage run;
    None: still on the starting tree's work."""
    measured_scope: MeasuredScope | None = None
    """What "the suite" is for this verification (`scope`): the whole suite, or in one too large to
    run whole the changed packages' tests; None: not decided (no measurement asked for)."""
    run_all: bool = False
    """The patch may affect every test (a change that runs at import, a file coverage cannot
    follow): the whole suite runs with the patch, and any test it fixes is evidence."""
    environment: EnvironmentUsed | None = None
    """The project environment the tests ran in (None: codeloop's interpreter)."""
    test_patterns: tuple[str, ...] = DEFAULT_PATTERNS
    """The repository's test module names (`test_modules.python_files`)."""
    mark: float = field(default_factory=time.monotonic)
    """When the last check ended: each step's time is the time since the previous check."""

    def add_check(self, check: Check) -> None:
        now = time.monotonic()
        self.checks.append(check.model_copy(update={"duration_s": round(now - self.mark, 3)}))
        self.mark = now

    def timeout_s(self) -> float:
        """The time a call may take: what is left before the deadline, less a margin."""
        return seconds_left(self.deadline) - DEADLINE_MARGIN_S

    @property
    def src_changes(self) -> list[FileChange]:
        """The changes the reproduction tree takes back: all but those of test code (a test
        directory's, or a module the repository's `python_files` collects)."""
        return [c for c in self.changes if not c.is_test and not is_test_module(c.path, self.test_patterns)]

    @property
    def changed_paths(self) -> set[str]:
        return {p for c in self.changes for p in (c.path, c.old_path) if p}

    def passes_now(self, test_id: str) -> bool:
        """`test_id` ran on the patched tree and did not fail there."""
        ran = self.suite_ran or test_id.split("::")[0] in self.ran_files
        return ran and test_id not in self.failing

    def starting_outcome(self, test_id: str) -> TestOutcome | None:
        return self.known.starting_outcome(test_id, changed_paths=self.changed_paths)
