"""The verifier's wire models: its report on a patch or answer, and the baseline of a task's tree.

`VerificationReport.model_dump(mode="json")` is a superset of the `verification` object of the
result (`{verdict, checks: [{name, ok, summary}], failures: [{failure_class, test_id, path, line,
message}]}`). `Baseline` lives on the task record in the KV store between revisions, so its lists
are capped (`MAX_BASELINE_TESTS`, `MAX_BASELINE_FINDINGS`): a few tens of kilobytes at most.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from agents.failures import FailureClass

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
MESSAGE_CHARS = 300
STACK_CHARS = 1500
MAX_FAILURES = 100
MAX_BASELINE_TESTS = 1000
MAX_BASELINE_FINDINGS = 200
MAX_TEST_ID_CHARS = 400
MAX_COVERING = 200


def _one_line(value: object) -> object:
    if not isinstance(value, str):
        return value
    lines = [line.strip() for line in value.strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(lines) > 1:
        text += " ..."
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def _tail(value: object) -> object:
    if not isinstance(value, str) or len(value) <= STACK_CHARS:
        return value
    return "[...]" + value[-(STACK_CHARS - 5) :]


OneLine = Annotated[str, BeforeValidator(_one_line)]
"""Text kept to its first line and `MESSAGE_CHARS` characters (longer input is trimmed, not refused)."""
StackTail = Annotated[str, BeforeValidator(_tail)]

Verdict = Literal["passed", "failed", "unverified"]
EvidenceKind = Literal["flip", "reproduction", "example", "none"]
"""What a `passed` verdict rests on: a target test's confirmed flip (it failed on the starting tree
and passes with the patch, in the same company and order), a reproduction test the patch adds
(failing on the reproduction tree, passing with the fix), the task's own example (it showed the
problem on the starting tree and no longer does), or nothing (`none`: any other verdict)."""
MAX_BEHAVIOUR = 300
Severity = Literal["error", "warning"]
TestOutcome = Literal["passed", "failed", "error"]


class Failure(BaseModel):
    """One thing wrong with a patch or answer, with where it is."""

    model_config = _CONFIG

    failure_class: FailureClass
    """What kind of failure (the system's one taxonomy, `agents.failures`)."""
    test_id: str | None = None
    """pytest node id of the failing test, when a test failed."""
    path: str | None = None
    """File relative to the repository root where the failure is."""
    line: int | None = None
    """1-based line in `path`, when known."""
    message: OneLine
    """One line: what is wrong (never the text of a secret)."""
    stack_summary: StackTail = ""
    """The end of the traceback, trimmed; empty for findings that are not test failures."""
    severity: Severity = "error"
    """`error` decides the verdict; `warning` is reported but lets a patch pass."""


class Check(BaseModel):
    """One step of verification and how it went."""

    model_config = _CONFIG

    name: str
    """`patch`, `diff_review`, `static`, `targeted_tests`, `full_suite`, `baseline`,
    `reproduction`, `evidence`, `answer` or (diagnose mode) `tests`."""
    ok: bool
    """True when the step found nothing wrong; a failed step's findings are in the report's `failures`."""
    summary: OneLine
    """One line, e.g. `12 passed, 1 failed in 3.2 s`."""
    duration_s: float = 0.0
    """Wall time of this step (the MCP call and the tree switching around it)."""


class StaticFinding(BaseModel):
    """A static finding of the starting tree, kept to tell new findings from old ones."""

    model_config = _CONFIG

    path: str
    """File relative to the repository root."""
    line: int
    """1-based line of the finding."""
    code: str
    """Ruff rule code or `syntax-error`."""
    message: OneLine
    """The checker's message, one line."""


class TestOutcomes(BaseModel):
    """Per-test outcomes on the starting tree, for the tests the verifier has run there."""

    __test__ = False  # not a pytest test class, despite the name
    model_config = _CONFIG

    outcomes: dict[str, TestOutcome] = Field(default_factory=dict, max_length=MAX_BASELINE_TESTS)
    """pytest node id → outcome. Only tests in files the patches left unchanged: what a test the
    patch edits does on the old code depends on the patch, so it is re-run every time."""
    complete_files: list[str] = Field(default_factory=list, max_length=MAX_BASELINE_TESTS)
    """Test files run whole on the starting tree: a test of theirs not in `outcomes` passed there."""
    truncated: bool = False
    """True when outcomes were dropped to stay under the cap (those tests are re-run when needed)."""


class Baseline(BaseModel):
    """What the verifier knows of the tree a task started from; reused across revisions."""

    model_config = _CONFIG

    kind: Literal["verification_baseline"] = "verification_baseline"
    """Always `verification_baseline`; it travels inside other payloads, never as an envelope's kind."""
    commit: str
    """The starting tree's commit (the workspace's HEAD); a baseline of another commit is ignored."""
    tests: TestOutcomes = TestOutcomes()
    """What the tests run on the starting tree did there."""
    static_checked: list[str] = Field(default_factory=list, max_length=MAX_BASELINE_FINDINGS)
    """Files whose static findings on the starting tree are known (possibly none)."""
    static_findings: list[StaticFinding] = Field(default_factory=list, max_length=MAX_BASELINE_FINDINGS)
    """Findings in `static_checked` files on the starting tree."""
    suite_duration_s: float | None = None
    """How long the whole suite took with the first patch: decides whether the next run fits
    before the deadline."""


class EnvironmentUse(BaseModel):
    """The project environment the verification's tests ran in (the exec server's `run_tests`
    result's `environment`): which one, from what, which Python, whether it had to be built."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    key: str
    """The environment's cache key (`codeloop env show` prints it)."""
    kind: str
    """Where its recipe came from: `configured`, `venv`, `uv`, `requirements`, ..."""
    source: str
    """What the recipe was made from (`requirements/tests.txt, pyproject.toml`, `[environment] in codeloop.toml`)."""
    python_version: str
    """The environment's Python, e.g. `3.11.9`."""
    built: bool
    """True when this task's test runs had to build it; False when it came from the cache."""
    build_s: float
    """How long its build took (whenever it was built)."""


class VerificationReport(BaseModel):
    """The verifier's judgement of one patch (or one read-mode answer)."""

    model_config = _CONFIG

    kind: Literal["verification_report"] = "verification_report"
    """Always `verification_report`."""
    verdict: Verdict
    """`passed`: checks ran, nothing is wrong, and `evidence` shows the task's problem gone;
    `failed`: `failures` says what (fed back to the coder); `unverified`: nothing could judge the
    work (no tests, infrastructure failure, no evidence either way). An unverified patch is never
    reported as verified."""
    checks: list[Check] = Field(default_factory=list)
    """The verification steps in the order they ran."""
    failures: list[Failure] = Field(default_factory=list, max_length=MAX_FAILURES)
    """Errors first, then warnings; test failures lead within each."""
    fixed: list[str] = Field(default_factory=list)
    """Tests that fail without the patch's source changes and pass with them."""
    regressions: list[str] = Field(default_factory=list)
    """Tests that passed on the starting tree and fail with the patch."""
    still_failing: list[str] = Field(default_factory=list)
    """Tests the task is about (plan targets, tests the task names, tests of the test files the
    patch changes, tests failing in the code it changed) that still fail."""
    evidence: list[str] = Field(default_factory=list)
    """Tests the task is about that failed before the patch and pass with it: what a `passed`
    verdict of a patch rests on."""
    preexisting: list[str] = Field(default_factory=list)
    """Tests that failed on the starting tree and still fail, unrelated to the task: not blamed."""
    covering: list[str] = Field(default_factory=list, max_length=MAX_COVERING)
    """Tests that execute the code the patch changes, as coverage measured them on the starting
    tree (the first `MAX_COVERING`); empty when it was not measured."""
    files_changed: list[str] = Field(default_factory=list)
    """Repository-relative paths the judged patch touches; empty for an answer or diagnose mode."""
    tests_run: int = 0
    """Test outcomes observed on the patched tree, over all runs."""
    duration_s: float = 0.0
    """Wall time of the whole verification, in seconds."""
    summary: OneLine = ""
    """One line for people: the verdict and its main reason."""
    environment: EnvironmentUse | None = None
    """The project environment the tests ran in; None when they ran with codeloop's own
    interpreter, or ran not at all."""
    evidence_kind: EvidenceKind = "none"
    """What decided a `passed` verdict (see `EvidenceKind`); `none` for any other verdict."""
    order_dependent: list[str] = Field(default_factory=list)
    """Targets that failed in the whole-suite run on the starting tree but pass there when run in
    the company and order they ran in with the patch: their flip shows nothing, so they are not
    evidence."""
    behaviour: dict[str, str] = Field(default_factory=dict, max_length=MAX_BEHAVIOUR)
    """What the patched tree observably did: per covering or target test its outcome with the
    patch (`passed`, or `failed:` and its crash), and `example` the task's example's outcome
    (what it printed and raised). Candidates for one task are clustered by it
    (`agents.roles.selector.rank`)."""
    starting_behaviour: dict[str, str] = Field(default_factory=dict, max_length=MAX_BEHAVIOUR)
    """The same observations on the starting tree where known (`example`, and the tests that
    passed there): a candidate matching them everywhere changed nothing observable."""

    @property
    def errors(self) -> list[Failure]:
        """The failures that decide the verdict."""
        return [f for f in self.failures if f.severity == "error"]
