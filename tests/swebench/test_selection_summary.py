"""What `--select` counts (`selection_summary.json`) and how it names its sources and reads their
official labels: plain data, no run needed."""

import json
from pathlib import Path

import pytest

from codeloop.swebench.candidates import load_sources, parse_source
from codeloop.swebench.errors import PredictionsError
from codeloop.swebench.selection_summary import selection_summary


def _row(chosen: str, *candidates: tuple[str, str, bool | None, str | None]) -> dict:
    return {
        "candidates": [
            {"source": s, "verdict": v, "resolved": r, "label": label} for s, v, r, label in candidates
        ],
        "chosen": next({"source": s, "resolved": r} for s, _, r, _ in candidates if s == chosen),
    }


def test_the_summary_counts_the_pick_the_oracle_a_random_pick_and_the_verdict_against_labels() -> None:
    """The issue's figures: `selected_resolved`, `oracle`, `random_expected`, precision and recall
    of `passed` (official label first, else this run's grade), verdicts by label."""
    rows = [
        # a resolved candidate chosen; the official label disagrees with this run's grade for b
        _row("a", ("a", "passed", True, None), ("b", "failed", False, "resolved")),
        # the wrong one chosen: unverified beats failed
        _row("b", ("a", "failed", True, None), ("b", "unverified", False, None)),
        # nothing resolves; one ungraded candidate
        _row("a", ("a", "passed", False, "unresolved"), ("b", "unverified", None, None)),
    ]
    summary = selection_summary(rows, ["a", "b"])
    assert summary["instances"] == 3 and summary["candidates"] == 6
    assert summary["per_source_resolved"] == {"a": 2, "b": 0}
    assert summary["selected_resolved"] == 1
    assert summary["oracle"] == 2
    assert summary["random_expected"] == 1.0  # 1/2 + 1/2 + 0
    # passed: a@1 (resolved), a@3 (unresolved by its label) -> precision 0.5
    assert summary["passed_precision"] == 0.5
    # resolved by label: a@1, b@1 (official), a@2 -> one of three passed
    assert summary["passed_recall"] == 0.333
    assert summary["verdicts_by_label"] == {
        "resolved": {"passed": 1, "failed": 2, "unverified": 0},
        "unresolved": {"passed": 1, "failed": 0, "unverified": 1},
    }
    assert summary["ungraded"] == 1


def test_no_passed_verdict_leaves_precision_undefined_not_zero() -> None:
    summary = selection_summary([_row("a", ("a", "unverified", True, None))], ["a"])
    assert summary["passed_precision"] is None and summary["passed_recall"] == 0.0


def test_sources_are_named_by_stem_or_name_and_read_their_official_labels(tmp_path: Path) -> None:
    """CONTRACTS: the source is the predictions file's stem, or NAME of NAME=PATH; a
    `<stem>.labels.json` beside it holds the official resolved ids."""
    lines = [
        {"instance_id": "x-1", "model_name_or_path": "m", "model_patch": "diff --git a/f b/f\n"},
        {"instance_id": "x-2", "model_name_or_path": "m", "model_patch": ""},
    ]
    path = tmp_path / "sys.v2.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "sys.v2.labels.json").write_text(json.dumps({"resolved": ["x-1"]}))
    assert parse_source(str(path)) == ("sys.v2", path)
    assert parse_source(f"mine={path}") == ("mine", path)
    [by_stem, by_name] = load_sources([str(path), f"mine={path}"], known_ids={"x-1", "x-2", "x-3"})
    assert by_stem.name == "sys.v2" and by_name.name == "mine"
    assert by_stem.label("x-1") == "resolved" and by_stem.label("x-2") == "unresolved"
    assert by_stem.label("x-3") is None  # not predicted by this source
    assert by_stem.candidate("x-1") is not None and by_stem.candidate("x-2") is None  # empty: no candidate
    with pytest.raises(PredictionsError, match="two sources named"):
        load_sources([str(path), f"sys.v2={path}"], known_ids={"x-1", "x-2"})
    (tmp_path / "sys.v2.labels.json").write_text("[1, 2]")
    with pytest.raises(PredictionsError, match="not a labels file"):
        load_sources([str(path)], known_ids={"x-1", "x-2"})


def test_an_instance_that_could_not_be_verified_names_the_cause_not_the_task_group() -> None:
    """A verification that failed inside a task group: the row's `verify_error` says what failed
    (the group's first leaf), not "unhandled errors in a TaskGroup"."""
    from codeloop.swebench.selection import _why

    try:
        raise ExceptionGroup("unhandled errors in a TaskGroup", [OSError("no space left on device")])
    except ExceptionGroup as exc:
        assert _why(exc) == "OSError: no space left on device"
