"""Summary statistics over the rows of a run (fields: docs/evaluation.md)."""

import hashlib
import json
import random
from collections import Counter
from typing import Literal, NotRequired, TypedDict

from pydantic import JsonValue

from codeloop.evaluation.rows import EvalRow, Localisation

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0
"""Seeded, so the same rows always give the same interval."""
COMPLETED = ("done", "diagnosed")
KINDS = ("localize", "explain", "fix", "add_test")


class Spread(TypedDict):
    p50: float | None
    p90: float | None
    total: float | None


class KindFigures(TypedDict):
    tasks: int
    resolved: int
    resolved_rate: float


class LocalisationRates(TypedDict):
    """Over the tasks with gold files: the share whose context (or answer) hits at each k."""

    tasks: int
    context_hits: dict[str, float]
    answer_hits: dict[str, float]


class RunConfig(TypedDict):
    """What the run was configured with (`codeloop eval`); its fingerprints are digests of it."""

    models: dict[str, JsonValue]
    """The `ModelNames` of the run, as JSON."""
    diagnose: bool
    budgets: dict[str, JsonValue]
    jobs: int
    localize_k: int
    sandbox: str
    codeloop: str
    task_ids: list[str]
    configuration: dict[str, dict[str, JsonValue]]
    """`Settings.values()`: every effective value and where it came from."""
    pipeline: NotRequired[dict[str, JsonValue]]
    """The `--pipeline` choice; absent without one."""


class Summary(TypedDict):
    """`summary.json` (fields: docs/evaluation.md)."""

    tasks: int
    resolved: int
    resolved_rate: float
    resolved_ci95: list[float]
    completed: int
    completion_rate: float
    average_steps: float
    tests_passed: int
    tests_checked: int
    test_pass_rate: float
    handed_off: int
    resolved_handed_off: int
    human_takeover_rate: float
    environment_failures: int
    failure_classes: dict[str, int]
    failures_by_blame: dict[str, int]
    by_kind: dict[str, KindFigures]
    localisation: LocalisationRates
    cost_usd: Spread
    tokens: Spread
    wall_s: Spread
    fingerprints: dict[str, str]
    config: RunConfig
    run_wall_s: NotRequired[float]
    finished_at: NotRequired[str]


def bootstrap_interval(
    values: list[bool], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[float]:
    """Percentile bootstrap 95% interval of the mean of `values` (resampled with replacement)."""
    if not values:
        return [0.0, 0.0]
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(samples))
    return [round(means[int(0.025 * samples)], 4), round(means[min(samples - 1, int(0.975 * samples))], 4)]


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between the closest ranks; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (rank - low), 6)


def _spread(values: list[float]) -> Spread:
    return {"p50": percentile(values, 50), "p90": percentile(values, 90), "total": round(sum(values), 6)}


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def summarise(rows: list[EvalRow], *, fingerprints: dict[str, str], config: RunConfig) -> Summary:
    """The run's `summary.json` object."""
    n = len(rows)
    resolved = [bool(r["resolved"]) for r in rows]
    tested = [t for r in rows if (t := r.get("tests"))]
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    classes = Counter(r["failure_class"] or "unresolved" for r in rows if not r["resolved"])
    blames = Counter(r["blame"] for r in rows if r["blame"] and not r["resolved"])
    by_kind: dict[str, KindFigures] = {}
    for kind in KINDS:
        of_kind = [r for r in rows if r["kind"] == kind]
        if of_kind:
            solved = sum(bool(r["resolved"]) for r in of_kind)
            by_kind[kind] = {
                "tasks": len(of_kind),
                "resolved": solved,
                "resolved_rate": _rate(solved, len(of_kind)),
            }
    return {
        "tasks": n,
        "resolved": sum(resolved),
        "resolved_rate": _rate(sum(resolved), n),
        "resolved_ci95": bootstrap_interval(resolved),
        "completed": sum(r["status"] in COMPLETED for r in rows),
        "completion_rate": _rate(sum(r["status"] in COMPLETED for r in rows), n),
        "average_steps": round(sum(r["steps"] for r in rows) / n, 3) if n else 0.0,
        "tests_passed": sum(t["passed"] for t in tested),
        "tests_checked": sum(t["total"] for t in tested),
        "test_pass_rate": _rate(sum(t["passed"] for t in tested), sum(t["total"] for t in tested)),
        "handed_off": sum(r["status"] == "handed_off" for r in rows),
        # Resolved is judged on the patch alone; these the pipeline itself handed to a person.
        "resolved_handed_off": sum(bool(r["resolved"]) and r["status"] == "handed_off" for r in rows),
        "human_takeover_rate": _rate(sum(r["status"] == "handed_off" for r in rows), n),
        "environment_failures": sum(r["blame"] == "environment" for r in rows),
        "failure_classes": dict(sorted(classes.items(), key=lambda item: (-item[1], item[0]))),
        "failures_by_blame": {b: blames.get(b, 0) for b in ("model", "environment", "ambiguous")},
        "by_kind": by_kind,
        "localisation": _localisation(rows),
        "cost_usd": _spread(costs) if costs else {"p50": None, "p90": None, "total": None},
        "tokens": _spread([float(r["tokens"]) for r in rows]),
        "wall_s": _spread([float(r["wall_s"]) for r in rows]),
        "fingerprints": fingerprints,
        "config": config,
    }


def _localisation(rows: list[EvalRow]) -> LocalisationRates:
    """Share of the rows with gold files whose retriever context (or answer) hits at k."""
    located = [loc for r in rows if (loc := r.get("localisation"))]
    return {
        "tasks": len(located),
        "context_hits": _hit_rates(located, "context_hits"),
        "answer_hits": _hit_rates(located, "answer_hits"),
    }


def _hit_rates(
    located: list[Localisation], source: Literal["context_hits", "answer_hits"]
) -> dict[str, float]:
    keys = located[0][source] if located else {}
    return {k: _rate(sum(loc[source][k] for loc in located), len(located)) for k in keys}


def digest(value: object) -> str:
    """sha256 of a JSON-able value, keys sorted: the model and config fingerprints."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
