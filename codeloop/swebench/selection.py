"""`codeloop swebench --select`: several systems' predictions as candidates, one chosen per instance.

Per instance: every source's non-empty patch is a candidate; each is verified as a coder's patch
(`judging`: the problem statement as the task, no test patch), the selector
(`agents.roles.selector.rank.choose`) picks one from the reports, and every candidate is graded
by the harness (`run.run_instance`) under `OUT/candidates/<source>/`. The pick's graded
directory is copied to `OUT/instances/<id>`, and `OUT/report.json` is the usual report of the
picks. `OUT/selection.jsonl` (one row per instance, rewritten as instances finish) and
`OUT/selection_summary.json` (`selection_summary`) say what was verified and chosen, and why.
"""

import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from pydantic import JsonValue

from agents.roles.selector.rank import Candidate, choose
from codeloop.swebench.candidates import Source
from codeloop.swebench.harness import RunPlan, write_outputs
from codeloop.swebench.instances import Instance
from codeloop.swebench.judging import InstanceJudge, Judged, judge_candidates
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction
from codeloop.swebench.recipe import make_recipe
from codeloop.swebench.report import write_json
from codeloop.swebench.repositories import RepoSource
from codeloop.swebench.run import RunSettings, run_instance
from codeloop.swebench.selection_summary import CandidateRow, SelectionRow, selection_summary
from codeloop.swebench.specs import spec_for


@dataclass
class SelectPlan:
    """What a `--select` run verifies, grades and where it writes."""

    instances: list[Instance]
    sources: list[Source]
    repos: dict[str, RepoSource]
    settings: RunSettings
    out: Path
    jobs: int = 1
    extra: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    grade_by_labels: bool = False
    """A candidate whose source has official labels is graded by its label, not by a harness run."""
    resume: bool = False
    """`out` holds an earlier run of this plan: its instances in `selection.jsonl` are not run again."""

    def candidates(self, instance: Instance) -> dict[str, Prediction]:
        """The instance's candidates by source name, in the order the sources were given."""
        found = {s.name: s.candidate(instance.instance_id) for s in self.sources}
        return {name: p for name, p in found.items() if p is not None}


async def run_selection(plan: SelectPlan) -> dict[str, JsonValue]:
    """Verify, choose and grade every instance that has a candidate; returns the summary."""
    todo = [i for i in plan.instances if plan.candidates(i)]
    (plan.out / "instances").mkdir(parents=True, exist_ok=True)
    rows, picks, chosen = _earlier(plan, todo) if plan.resume else ({}, {}, {})
    limiter = anyio.CapacityLimiter(max(plan.jobs, 1))
    lock = anyio.Lock()
    started = time.monotonic()

    async def one(instance: Instance) -> None:
        async with limiter:
            row, pick, prediction = await select_instance(plan, instance)
        async with lock:
            rows[instance.instance_id] = row
            if pick is not None and prediction is not None:
                picks[instance.instance_id], chosen[instance.instance_id] = pick, prediction
            _write(plan, todo, rows, picks, chosen, finished=False, wall_s=time.monotonic() - started)
            _progress(row, done=len(rows), total=len(todo))

    _write(plan, todo, rows, picks, chosen, finished=not todo)
    async with anyio.create_task_group() as tg:
        for instance in todo:
            if instance.instance_id not in rows:
                tg.start_soon(one, instance)
    return _write(plan, todo, rows, picks, chosen, finished=True, wall_s=time.monotonic() - started)


async def select_instance(
    plan: SelectPlan, instance: Instance
) -> tuple[SelectionRow, Outcome | None, Prediction | None]:
    """One instance's selection row, the pick's graded outcome and its prediction."""
    predictions = plan.candidates(instance)
    judged, problem = await _judge(plan, instance, predictions)
    choice = choose([_candidate(name, p, judged.get(name)) for name, p in predictions.items()])
    labels = {s.name: s.label(instance.instance_id) for s in plan.sources}
    outcomes: dict[str, Outcome] = {}
    for name, prediction in predictions.items():
        label = labels[name] if plan.grade_by_labels else None
        outcomes[name] = (
            _labelled(instance, prediction, label)
            if label is not None
            else await run_instance(
                instance,
                prediction,
                source=plan.repos[instance.repo],
                settings=plan.settings,
                out=plan.out / "candidates" / name,
            )
        )
    graded = plan.out / "candidates" / choice.chosen / "instances" / instance.instance_id
    final = plan.out / "instances" / instance.instance_id
    await anyio.to_thread.run_sync(lambda: _replace_tree(graded, final))
    row: SelectionRow = {
        "instance_id": instance.instance_id,
        "candidates": [
            _candidate_row(name, p, judged.get(name), outcomes[name], choice.clusters.get(name), labels[name])
            for name, p in predictions.items()
        ],
        "chosen": {
            "source": choice.chosen,
            "model_name_or_path": predictions[choice.chosen].model_name_or_path,
            "reason": choice.reason,
            "resolved": _resolved(outcomes[choice.chosen]),
            "label": labels[choice.chosen],
        },
        "order": choice.order,
        "verify_error": problem,
    }
    return row, outcomes[choice.chosen], predictions[choice.chosen]


async def _judge(
    plan: SelectPlan, instance: Instance, predictions: dict[str, Prediction]
) -> tuple[dict[str, Judged], str | None]:
    """The candidates' verifications; none, and why, when the instance could not be verified
    (its spec, environment or tree): every candidate is then `unverified`."""
    scratch = plan.settings.scratch_dir / f"select-{instance.instance_id}"
    try:
        recipe = make_recipe(instance, spec_for(instance), plan.repos[instance.repo])
        judge = InstanceJudge(
            instance=instance,
            recipe=recipe,
            source=plan.repos[instance.repo],
            cache_dir=plan.settings.cache_dir,
            limits=plan.settings.limits,
            backend=plan.settings.policy,
            timeout_s=plan.settings.timeout_s,
            build_env=plan.settings.store.settings.build_env,
        )
        patches = {name: p.model_patch or "" for name, p in predictions.items()}
        return await judge_candidates(judge, patches, scratch), None
    except Exception as exc:  # one instance's trouble must not end the run: its candidates are unverified
        return {}, _why(exc)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))


def _why(exc: BaseException) -> str:
    """One line for the row: the first leaf of an exception group (a task group's "unhandled
    errors" says nothing), its type and message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:500]


def _labelled(instance: Instance, prediction: Prediction, label: str) -> Outcome:
    """A candidate graded by its source's official label (`--grade-by-labels`): no harness run."""
    return Outcome(
        instance_id=instance.instance_id,
        repo=instance.repo,
        version=instance.version,
        status="resolved" if label == "resolved" else "unresolved",
        message="graded by its source's official label (not run here)",
        model_name_or_path=prediction.model_name_or_path,
    )


def _earlier(
    plan: SelectPlan, todo: list[Instance]
) -> tuple[dict[str, SelectionRow], dict[str, Outcome], dict[str, Prediction]]:
    """What an earlier run of the plan in `out` finished: its rows, the picks' outcomes and
    predictions (an instance whose pick has no outcome on disk is run again)."""
    lines = plan.out / "selection.jsonl"
    known = {i.instance_id: i for i in todo}
    rows: dict[str, SelectionRow] = {}
    picks: dict[str, Outcome] = {}
    chosen: dict[str, Prediction] = {}
    text = lines.read_text(encoding="utf-8") if lines.is_file() else ""
    for line in filter(None, text.splitlines()):
        row: SelectionRow = json.loads(line)
        instance = known.get(row["instance_id"])
        if instance is None:
            continue
        source = row["chosen"]["source"]
        prediction = plan.candidates(instance).get(source)
        stored = plan.out / "instances" / instance.instance_id / "outcome.json"
        if prediction is None:
            continue
        if stored.is_file():
            picks[instance.instance_id] = Outcome.model_validate_json(stored.read_text(encoding="utf-8"))
        elif plan.grade_by_labels and (label := row["chosen"].get("label")) is not None:
            picks[instance.instance_id] = _labelled(instance, prediction, label)
        else:
            continue
        rows[instance.instance_id], chosen[instance.instance_id] = row, prediction
    return rows, picks, chosen


def _candidate(name: str, prediction: Prediction, judged: Judged | None) -> Candidate:
    """The selector's view of a candidate: built from its verification report."""
    patch = prediction.model_patch or ""
    if judged is None:
        return Candidate(key=name, patch=patch, verdict="unverified")
    report = judged.report
    return Candidate(
        key=name,
        patch=patch,
        verdict=report.verdict,
        evidence_kind=report.evidence_kind,
        regressions=len(report.regressions),
        errors=len(report.errors),
        behaviour=dict(report.behaviour),
        starting=dict(report.starting_behaviour),
    )


def _resolved(outcome: Outcome) -> bool | None:
    return {"resolved": True, "unresolved": False}.get(outcome.status)


def _candidate_row(
    name: str,
    prediction: Prediction,
    judged: Judged | None,
    outcome: Outcome,
    cluster: int | None,
    label: str | None,
) -> CandidateRow:
    report = judged.report if judged is not None else None
    return {
        "source": name,
        "model_name_or_path": prediction.model_name_or_path,
        "verdict": report.verdict if report is not None else "unverified",
        "evidence_kind": report.evidence_kind if report is not None else "none",
        "evidence": list(report.evidence) if report is not None else [],
        "cluster": cluster,
        "resolved": _resolved(outcome),
        "label": label,
        "summary": report.summary if report is not None else "not verified",
        "verify_s": judged.seconds if judged is not None else None,
        "grade_error": outcome.failure_class if outcome.status == "error" else None,
    }


def _replace_tree(source: Path, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    if source.is_dir():
        shutil.copytree(source, dest)


def _write(
    plan: SelectPlan,
    todo: list[Instance],
    rows: dict[str, SelectionRow],
    picks: dict[str, Outcome],
    chosen: dict[str, Prediction],
    *,
    finished: bool,
    wall_s: float = 0.0,
) -> dict[str, JsonValue]:
    """selection.jsonl, selection_summary.json and the picks' report.json, atomically each."""
    ordered = [rows[i.instance_id] for i in todo if i.instance_id in rows]
    lines = plan.out / "selection.jsonl"
    partial = lines.with_name(f".{lines.name}.partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in ordered), encoding="utf-8")
    partial.replace(lines)
    summary = selection_summary(ordered, [s.name for s in plan.sources])
    write_json(plan.out / "selection_summary.json", {**summary, "finished": finished})
    picked = RunPlan(
        instances=todo,
        predictions=chosen,
        sources=plan.repos,
        settings=plan.settings,
        out=plan.out,
        extra={**plan.extra, "selection": "selection_summary.json"},
    )
    write_outputs(picked, picks, wall_s=wall_s, finished=finished)
    return summary


def _progress(row: SelectionRow, *, done: int, total: int) -> None:
    verdicts = ", ".join(
        f"{c['source']} {c['verdict']}{' (resolved)' if c['resolved'] else ''}" for c in row["candidates"]
    )
    sys.stderr.write(f"[{done}/{total}] {row['instance_id']}: {verdicts}; chose {row['chosen']['source']}\n")
