"""The evaluation and SWE-bench runs the console shows: directories `codeloop eval --out` and
`codeloop swebench --out` wrote, found under the directories `serve --console-reports` names.

A run is a directory holding `summary.json` (an eval run, with `results.jsonl`) or `report.json`
in the SWE-bench summary's shape (`total_instances`, `resolved_ids`, ...). The console renders
their figures and rows itself, in its own templates, and offers the run's `report.html` as a
download: a report's own page is not served inside the console, whose policy forbids the inline
styles those pages carry. Runs are read when asked for; the console keeps no copy.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

MAX_ROWS = 2000
ROW_COLUMNS = ("task_id", "instance_id", "id", "kind", "status", "resolved", "failure_class", "cost_usd")


@dataclass(frozen=True)
class Run:
    run_id: str
    """Its place in the list (`0`, `1`, ...): the page's address, never a path from the request."""
    kind: Literal["eval", "swebench"]
    path: Path
    modified: datetime
    headline: str
    """The figure a reader looks for first: resolved out of how many."""


@dataclass(frozen=True)
class RunDetail:
    run: Run
    figures: list[tuple[str, str]]
    columns: list[str]
    rows: list[dict[str, str]]
    html_report: Path | None


def find_runs(roots: list[Path]) -> list[Run]:
    """Every run under `roots` (a root that is a run itself, or holds runs one level down), newest first."""
    found: list[tuple[Literal["eval", "swebench"], Path]] = []
    for root in roots:
        for candidate in [root, *_subdirs(root)]:
            kind = _kind(candidate)
            if kind is not None:
                found.append((kind, candidate))
    runs = [_run(kind, path) for kind, path in found]
    runs.sort(key=lambda r: r.modified, reverse=True)
    return [Run(str(i), r.kind, r.path, r.modified, r.headline) for i, r in enumerate(runs)]


def run_detail(run: Run) -> RunDetail:
    if run.kind == "eval":
        summary = _json(run.path / "summary.json")
        rows = _jsonl(run.path / "results.jsonl")
    else:
        summary = _json(run.path / "report.json")
        resolved, errors = set(_ids(summary, "resolved_ids")), set(_ids(summary, "error_ids"))
        ids = _ids(summary, "submitted_ids") or sorted({*resolved, *_ids(summary, "unresolved_ids"), *errors})
        rows = [
            {"instance_id": i, "resolved": i in resolved, "status": "error" if i in errors else ""}
            for i in ids
        ]
    figures = [(k, _text(v)) for k, v in summary.items() if not isinstance(v, (dict, list))]
    columns = [c for c in ROW_COLUMNS if any(c in r for r in rows)]
    shown = [{c: _text(r.get(c)) for c in columns} for r in rows[:MAX_ROWS]]
    html = next((p for p in (run.path / "report.html",) if p.is_file()), None)
    return RunDetail(run=run, figures=figures, columns=columns, rows=shown, html_report=html)


def _subdirs(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def _kind(path: Path) -> Literal["eval", "swebench"] | None:
    if (path / "summary.json").is_file() and (path / "results.jsonl").is_file():
        return "eval"
    if (path / "report.json").is_file() and "total_instances" in _json(path / "report.json"):
        return "swebench"
    return None


def _run(kind: Literal["eval", "swebench"], path: Path) -> Run:
    marker = path / ("summary.json" if kind == "eval" else "report.json")
    modified = datetime.fromtimestamp(marker.stat().st_mtime, UTC)
    data = _json(marker)
    if kind == "eval":
        rows = _jsonl(path / "results.jsonl")
        resolved = sum(1 for r in rows if r.get("resolved"))
        headline = f"{resolved} of {len(rows)} tasks resolved"
    else:
        headline = (
            f"{data.get('resolved_instances', 0)} of {data.get('total_instances', 0)} instances resolved"
        )
    return Run("", kind, path, modified, headline)


def _ids(report: dict[str, JsonValue], key: str) -> list[str]:
    """The instance ids a report lists under `key` (none when it lists none)."""
    ids = report.get(key)
    return [str(i) for i in ids] if isinstance(ids, list) else []


def _json(path: Path) -> dict[str, JsonValue]:
    try:
        data: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _jsonl(path: Path) -> list[dict[str, JsonValue]]:
    rows: list[dict[str, JsonValue]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            row: JsonValue = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
