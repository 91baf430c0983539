"""The row `results.jsonl` holds for one task of an evaluation (fields: docs/evaluation.md):
the pipeline's own figures (`PipelineFields`) and what `codeloop.evaluation.checks` found."""

from typing import TypedDict


class Localisation(TypedDict):
    """Where the task's gold files were among the files the retriever packed and the answer named."""

    gold_files: list[str]
    context_files: list[str]
    answer_files: list[str]
    context_hits: dict[str, bool]
    """`@1`, `@3`, `@5` -> a gold file among the first k context files."""
    answer_hits: dict[str, bool]


class Facts(TypedDict):
    """An explain task's facts: those the answer states and those it misses."""

    stated: list[str]
    missing: list[str]


class CheckedTests(TypedDict):
    """The task's checked tests on the patched tree: node id -> PASSED, FAILED, ERROR, SKIPPED,
    missing or timeout, per check."""

    fail_to_pass: dict[str, str]
    pass_to_pass: dict[str, str]
    patched: bool
    patch_applied: bool | None
    """None: there was no patch to apply."""
    passed: int
    total: int


class PipelineFields(TypedDict):
    """What the pipeline's result says about the task."""

    id: str
    kind: str
    mode: str
    task_id: str | None
    status: str
    failure_class: str | None
    blame: str | None
    error: str | None
    patch: str | None
    answer: str | None
    report: str | None
    files_changed: list[str]
    verdict: str | None
    steps: int
    revisions: int
    requests: int
    input_tokens: int
    output_tokens: int
    tokens: int
    tool_calls: int
    cost_usd: float | None
    wall_s: float
    trace_id: str | None


class EvalRow(PipelineFields):
    """One line of `results.jsonl`: the pipeline's figures, the checks, and the verdict."""

    localisation: Localisation | None
    """None: the task names no gold files."""
    facts: Facts | None
    """None: the task lists no facts."""
    tests: CheckedTests | None
    """None: no tests were checked (not a fix or add_test task, or no repository)."""
    resolved: bool
