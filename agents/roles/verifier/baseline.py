"""What the verifier knows of the starting tree, learnt bit by bit and kept between revisions.

Nothing is run on the starting tree up front (see `agents.roles.verifier.verify` for why): each outcome
here was observed when a failure needed comparing. A whole test file run there is recorded as
complete, so any test of it not listed failing passed. `Knowledge` is the working copy during one
verification; `to_baseline()` caps it into the `Baseline` kept on the task record.
"""

from dataclasses import dataclass, field

from agents.messages.verification import (
    MAX_BASELINE_FINDINGS,
    MAX_BASELINE_TESTS,
    MAX_TEST_ID_CHARS,
    Baseline,
    StaticFinding,
    TestOutcome,
    TestOutcomes,
)
from agents.roles.verifier.exec_session import StaticFinding as Found
from agents.roles.verifier.exec_session import TestFailure


@dataclass
class Knowledge:
    """The starting tree's test outcomes and static findings known so far."""

    commit: str
    outcomes: dict[str, TestOutcome] = field(default_factory=dict)
    complete_files: set[str] = field(default_factory=set)
    static_checked: list[str] = field(default_factory=list)
    static_findings: list[StaticFinding] = field(default_factory=list)
    suite_duration_s: float | None = None
    truncated: bool = False

    @classmethod
    def of(cls, baseline: Baseline | None, commit: str) -> "Knowledge":
        """From a kept baseline, or empty when there is none or it is of another commit."""
        if baseline is None or baseline.commit != commit:
            return cls(commit=commit)
        return cls(
            commit=commit,
            outcomes=dict(baseline.tests.outcomes),
            complete_files=set(baseline.tests.complete_files),
            static_checked=list(baseline.static_checked),
            static_findings=list(baseline.static_findings),
            suite_duration_s=baseline.suite_duration_s,
            truncated=baseline.tests.truncated,
        )

    def starting_outcome(self, test_id: str, *, changed_paths: set[str]) -> TestOutcome | None:
        """What `test_id` did on the starting tree; None when unknown, or when the patch changed
        its file (the old outcome says nothing about the edited test)."""
        file = test_id.split("::")[0]
        if file in changed_paths:
            return None
        if test_id in self.outcomes:
            return self.outcomes[test_id]
        return "passed" if file in self.complete_files else None

    def remember_tests(
        self, files: list[str], failures: dict[str, TestFailure], *, changed_paths: set[str]
    ) -> None:
        """`files` ran whole on the starting tree's code and `failures` failed there."""
        for file in files:
            if file in changed_paths:
                continue
            self.complete_files.add(file)
            for test_id, failure in failures.items():
                if test_id.split("::")[0] == file and len(test_id) <= MAX_TEST_ID_CHARS:
                    self.outcomes[test_id] = "error" if failure.outcome == "error" else "failed"

    def static_unknown(self, paths: set[str]) -> list[str]:
        return sorted(paths - set(self.static_checked))

    def remember_static(self, paths: list[str], findings: list[Found]) -> None:
        self.static_checked += paths
        self.static_findings += [
            StaticFinding(path=f.path, line=f.line, code=f.code, message=f.message) for f in findings
        ]

    def static_before(self, paths: list[str]) -> list[StaticFinding]:
        return [f for f in self.static_findings if f.path in paths]

    def to_baseline(self) -> Baseline:
        outcomes = dict(list(self.outcomes.items())[:MAX_BASELINE_TESTS])
        complete = sorted(self.complete_files)
        return Baseline(
            commit=self.commit,
            tests=TestOutcomes(
                outcomes=outcomes,
                complete_files=complete[:MAX_BASELINE_TESTS],
                truncated=self.truncated
                or len(outcomes) < len(self.outcomes)
                or len(complete) > MAX_BASELINE_TESTS,
            ),
            static_checked=self.static_checked[:MAX_BASELINE_FINDINGS],
            static_findings=self.static_findings[:MAX_BASELINE_FINDINGS],
            suite_duration_s=self.suite_duration_s,
        )
