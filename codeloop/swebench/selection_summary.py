"""`OUT/selection_summary.json` of a `codeloop swebench --select` run, from its selection rows.

Each candidate carries `resolved` (this run's grade by the harness: true, false, or null when it
could not be graded) and `label` (the official label when its source has one, else null). The
verdict's precision and recall are counted against the label, falling back to this run's grade:
what the summary's `labels` says. The selector's figures (`selected_resolved`, `oracle`,
`random_expected`, `per_source_resolved`) are this run's grades, so every source is counted alike.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from pydantic import JsonValue

VERDICTS = ("passed", "failed", "unverified")


class CandidateRow(TypedDict):
    """One candidate of a selection row: its verification, its grade and its label."""

    source: str
    model_name_or_path: str
    verdict: str
    evidence_kind: str
    evidence: list[str]
    cluster: int | None
    resolved: bool | None
    label: str | None
    summary: str
    verify_s: float | None
    grade_error: str | None


class ChosenRow(TypedDict):
    """The candidate the selector chose, and why."""

    source: str
    model_name_or_path: str
    reason: str
    resolved: bool | None
    label: str | None


class SelectionRow(TypedDict):
    """One line of `OUT/selection.jsonl`: an instance's candidates and the one chosen."""

    instance_id: str
    candidates: list[CandidateRow]
    chosen: ChosenRow
    order: list[str]
    verify_error: str | None


def truth(candidate: Mapping[str, Any]) -> str | None:
    """`resolved` / `unresolved`: the official label, else this run's grade; None: neither known."""
    if candidate.get("label") is not None:
        return str(candidate["label"])
    if candidate.get("resolved") is None:
        return None
    return "resolved" if candidate["resolved"] else "unresolved"


def selection_summary(rows: Sequence[Mapping[str, Any]], sources: list[str]) -> dict[str, JsonValue]:
    """The summary of `rows` (one per instance with at least one candidate): `SelectionRow`s, of
    which it reads each candidate's `source`, `verdict`, `resolved`, `label` and `verify_s` and
    the chosen one's `resolved`, so rows holding only those count alike."""
    candidates = [c for row in rows for c in row["candidates"]]
    by_label: dict[str, Counter[str]] = {"resolved": Counter(), "unresolved": Counter()}
    for c in candidates:
        label = truth(c)
        if label is not None:
            by_label[label][c["verdict"]] += 1
    passed = sum(by_label[label]["passed"] for label in by_label)
    resolved = sum(by_label["resolved"].values())
    random_expected = sum(
        sum(1 for c in row["candidates"] if c.get("resolved")) / len(row["candidates"]) for row in rows
    )
    chosen = [row["chosen"] for row in rows if row.get("chosen")]
    return {
        "instances": len(rows),
        "candidates": len(candidates),
        "sources": [*sources],
        "per_source_resolved": {
            s: sum(1 for c in candidates if c["source"] == s and c.get("resolved")) for s in sources
        },
        "per_source_candidates": {s: sum(1 for c in candidates if c["source"] == s) for s in sources},
        "selected_resolved": sum(1 for c in chosen if c.get("resolved")),
        "oracle": sum(1 for row in rows if any(c.get("resolved") for c in row["candidates"])),
        "random_expected": round(random_expected, 2),
        "passed_precision": round(by_label["resolved"]["passed"] / passed, 3) if passed else None,
        "passed_recall": round(by_label["resolved"]["passed"] / resolved, 3) if resolved else None,
        "verdicts_by_label": {label: {v: counts[v] for v in VERDICTS} for label, counts in by_label.items()},
        "labels": "official where the source has a labels file, else this run's grade",
        "ungraded": sum(1 for c in candidates if c.get("resolved") is None),
        "verify_s": round(sum(c.get("verify_s") or 0.0 for c in candidates), 1),
    }
