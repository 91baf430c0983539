"""Task sets load from a directory, a file or a git bundle without being changed
(docs/eval-taskset.md), and the summary's statistics are deterministic and correct
(docs/evaluation.md: `resolved_ci95`, p50/p90)."""

import json
import subprocess
from pathlib import Path

import pytest

from codeloop.evaluation.errors import TaskSetError
from codeloop.evaluation.summary import bootstrap_interval, percentile
from codeloop.evaluation.taskset import fingerprint, load_tasks, materialise
from tests.evaluation.conftest import STARTER


def test_the_starter_set_loads_from_its_directory_and_a_copy_changes_nothing(tmp_path: Path) -> None:
    """TASKSET may be the directory; each task runs on a git copy, the set stays as it was."""
    tasks = load_tasks(STARTER)
    assert len(tasks) == 16 and tasks[0].repo_path.is_dir()
    before = fingerprint(tasks)
    copy = materialise(tasks[0], tmp_path / "copy")
    (copy / "scratch.txt").write_text("an agent's change")
    assert (copy / ".git").is_dir() and fingerprint(load_tasks(STARTER / "tasks.jsonl")) == before


def test_a_task_on_a_git_bundle_is_cloned_for_the_run(tmp_path: Path) -> None:
    """A repository may ship as a git bundle; the run gets a clone of it."""
    source = materialise(load_tasks(STARTER)[0], tmp_path / "source")
    subprocess.run(
        ["git", "bundle", "create", str(tmp_path / "repo.bundle"), "--all"],
        cwd=source,
        check=True,
        capture_output=True,
    )
    line = {
        "id": "b",
        "repo": "repo.bundle",
        "kind": "localize",
        "mode": "read",
        "text": "where?",
        "checks": {"gold_files": ["inventory/report.py"]},
    }
    (tmp_path / "tasks.jsonl").write_text(json.dumps(line) + "\n")
    clone = materialise(load_tasks(tmp_path)[0], tmp_path / "clone")
    assert (clone / "inventory" / "report.py").read_text() == (source / "inventory" / "report.py").read_text()


def test_a_malformed_or_duplicate_task_is_refused_with_its_line(tmp_path: Path) -> None:
    """A task set with a broken line never half-runs."""
    good = json.dumps({"id": "a", "repo": ".", "kind": "fix", "mode": "execute", "text": "t"})
    (tmp_path / "tasks.jsonl").write_text(good + "\n" + good + "\n")
    with pytest.raises(TaskSetError, match="duplicate task ids: a"):
        load_tasks(tmp_path)
    (tmp_path / "tasks.jsonl").write_text(good + '\n{"id": "b", "kind": "dance"}\n')
    with pytest.raises(TaskSetError, match="tasks.jsonl:2"):
        load_tasks(tmp_path)


def test_the_bootstrap_interval_is_seeded_and_brackets_the_rate() -> None:
    """The same rows give the same interval every time; it holds the observed rate, is
    degenerate when every task agrees, and narrows as tasks are added."""
    values = [True] * 6 + [False] * 4
    low, high = bootstrap_interval(values)
    assert bootstrap_interval(values) == [low, high] and low < 0.6 < high
    assert bootstrap_interval([True] * 5) == [1.0, 1.0]
    wide = high - low
    low, high = bootstrap_interval(values * 10)
    assert low < 0.6 < high and high - low < wide


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 90) == 5
    assert percentile(list(range(11)), 90) == 9.0 and percentile([], 50) is None
