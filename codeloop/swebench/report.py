"""The run's report: `OUT/report.json` in the shape of the official `make_run_report` (swebench
4.1.0, `harness/reporting.py`), rewritten atomically after every instance, so an interrupted run
leaves a consistent partial report; codeloop's own figures under the extra key `codeloop`.

Where codeloop counts differently from that function, and why:
- A prediction whose patch does not apply is graded (unresolved, `patch_successfully_applied`
  false, from the apply failure in the log, as `get_eval_report` grades such a log); the official
  `run_instance` raises before grading and its report lists the instance under `error_ids`.
  Here `error_ids` are only instances this harness could not evaluate (an environment that did
  not build, a timeout, a sandbox failure); the apply failures are also listed apart
  (`codeloop.patch_apply_failed_ids`).
- With `--predictions empty` every instance is graded (its test patch alone); from a predictions
  file, an empty prediction is not run and counts under `empty_patch_ids`, as officially.
"""

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from pydantic import JsonValue

from codeloop.swebench.instances import Instance
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction


def run_report(
    instances: list[Instance],
    predictions: dict[str, Prediction],
    outcomes: dict[str, Outcome],
    *,
    extra: dict[str, JsonValue],
) -> dict[str, JsonValue]:
    """The summary of the instances run so far (see the module docstring for the keys)."""
    ids = [i.instance_id for i in instances]
    submitted = [i for i in ids if i in predictions]
    by_status: dict[str, list[str]] = defaultdict(list)
    for instance_id in submitted:
        outcome = outcomes.get(instance_id)
        by_status[outcome.status if outcome else "incomplete"].append(instance_id)
    incomplete = sorted(set(ids) - set(submitted)) + sorted(by_status["incomplete"])
    completed = sorted(by_status["resolved"] + by_status["unresolved"])
    report: dict[str, JsonValue] = {
        "total_instances": len(ids),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(by_status["resolved"]),
        "unresolved_instances": len(by_status["unresolved"]),
        "empty_patch_instances": len(by_status["empty"]),
        "error_instances": len(by_status["error"]),
        "completed_ids": _ids(completed),
        "incomplete_ids": _ids(incomplete),
        "empty_patch_ids": _ids(by_status["empty"]),
        "submitted_ids": _ids(submitted),
        "resolved_ids": _ids(by_status["resolved"]),
        "unresolved_ids": _ids(by_status["unresolved"]),
        "error_ids": _ids(by_status["error"]),
        "schema_version": 2,
        "unstopped_instances": 0,
        "unstopped_containers": [],
        "unremoved_images": [],
    }
    report["codeloop"] = {**extra, **_codeloop_figures(instances, outcomes)}
    return report


def _codeloop_figures(instances: list[Instance], outcomes: dict[str, Outcome]) -> dict[str, JsonValue]:
    errors = {i: o.failure_class for i, o in outcomes.items() if o.status == "error"}
    return {
        "error_classes": dict(sorted(errors.items())),
        # A class of None is keyed `null`, as json.dumps writes a None key.
        "errors_by_class": {"null" if c is None else c: n for c, n in Counter(errors.values()).items()},
        "patch_apply_failed_ids": _ids(i for i, o in outcomes.items() if o.patch_applied is False),
        "left_out_tests": {i: [*o.left_out] for i, o in sorted(outcomes.items()) if o.left_out},
        "not_passing_tests": {i: [*o.not_passing] for i, o in sorted(outcomes.items()) if o.not_passing},
        "by_repository": by_repository(instances, outcomes),
        "instance_wall_s": {i: o.wall_s for i, o in sorted(outcomes.items())},
        "gold": gold_figures(outcomes),
    }


@dataclass
class RepositoryFigures:
    """One repository's row of the report: instances, run, environments built (instances whose
    environment was ready), resolved, unresolved, errors, and the seconds its instances took."""

    instances: int = 0
    run: int = 0
    built: int = 0
    resolved: int = 0
    unresolved: int = 0
    errors: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, JsonValue]:
        """The figures by field name, in field order."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


def repository_figures(
    instances: list[Instance], outcomes: dict[str, Outcome]
) -> dict[str, RepositoryFigures]:
    """Per repository, by name: its figures (`RepositoryFigures`)."""
    table: dict[str, RepositoryFigures] = {}
    for instance in instances:
        row = table.setdefault(instance.repo, RepositoryFigures())
        row.instances += 1
        outcome = outcomes.get(instance.instance_id)
        if outcome is None or outcome.status == "empty":
            continue
        row.run += 1
        row.built += outcome.environment is not None
        row.resolved += outcome.status == "resolved"
        row.unresolved += outcome.status == "unresolved"
        row.errors += outcome.status == "error"
        row.seconds = round(row.seconds + outcome.wall_s, 1)
    return dict(sorted(table.items()))


def by_repository(instances: list[Instance], outcomes: dict[str, Outcome]) -> dict[str, JsonValue]:
    """`repository_figures` as the report writes them."""
    return {repo: row.as_json() for repo, row in repository_figures(instances, outcomes).items()}


def validation(outcomes: dict[str, Outcome]) -> dict[str, JsonValue]:
    """What a gold run found: per instance, the listed tests that do not pass with the gold
    patch here, so this environment cannot run them, and why (`network`, or another failure),
    for `--left-out` of later runs."""
    return {
        i: {"cannot_run": [*o.not_passing], "why": {**o.why_not_passing}}
        for i, o in sorted(outcomes.items())
        if o.status in ("resolved", "unresolved") and o.not_passing
    }


def gold_figures(outcomes: dict[str, Outcome]) -> dict[str, JsonValue]:
    """For a gold run: the instances that resolve once the listed tests that failed only for want
    of network are left out (nothing else), and those that still do not."""
    graded = [o for o in outcomes.values() if o.status in ("resolved", "unresolved")]
    network_only = sorted(
        o.instance_id
        for o in graded
        if o.status == "unresolved" and o.not_passing and set(o.why_not_passing.values()) == {"network"}
    )
    other = sorted(
        o.instance_id for o in graded if o.status == "unresolved" and o.instance_id not in network_only
    )
    return {
        "resolved_without_network_tests": len([o for o in graded if o.status == "resolved"])
        + len(network_only),
        "unresolved_only_for_network_ids": _ids(network_only),
        "unresolved_for_other_reasons_ids": _ids(other),
    }


def _ids(ids: Iterable[str]) -> list[JsonValue]:
    """`ids` sorted, as a JSON list."""
    return [*sorted(ids)]


def write_json(path: Path, data: JsonValue) -> None:
    """Write JSON atomically: a reader sees the old file or the new one, never half of one."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def load_outcomes(out: Path) -> dict[str, Outcome]:
    """The outcomes already written under `out/instances/` (for --resume and the report)."""
    outcomes = {}
    for path in sorted((out / "instances").glob("*/outcome.json")):
        try:
            outcome = Outcome.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # unreadable: that instance runs again
        outcomes[outcome.instance_id] = outcome
    return outcomes
