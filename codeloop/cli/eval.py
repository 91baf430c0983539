"""`codeloop eval`: run a task set through the real pipeline and write what it measured.

`--out DIR` gets `results.jsonl` (one row per task), `summary.json`, `report.md` and
`report.html` (fields: docs/evaluation.md). The files are written together at the end, so a
run that breaks leaves no half-written report.
"""

import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop import __version__
from codeloop.cli.common import fail, usage_error
from codeloop.cli.connection import Connection, local_or_embedded_serve, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.task_options import TaskFlags
from codeloop.config.errors import ConfigError
from codeloop.config.task_options import TaskOptions
from codeloop.evaluation.errors import EvalError, PreviousRunError
from codeloop.evaluation.report_md import handed_off_note, markdown_report

if TYPE_CHECKING:
    from agents.messages import PipelineChoice
    from codeloop.config.settings import Settings
    from codeloop.evaluation.rows import EvalRow
    from codeloop.evaluation.summary import RunConfig, Summary
    from codeloop.evaluation.taskset import EvalTask


EVAL_HELP = {
    "model": "Model of every LLM role (env CODELOOP_MODEL); none: diagnose mode.",
    "planner_model": "The planner's model.",
    "coder_model": "The coder's model.",
    "cost_budget": "US dollars each task may spend on models; every model must be priced.",
    "pipeline": "Run every task through this named pipeline: a built-in one or one the codeloop.toml "
    "here declares under [pipelines] (KIND:ROLE stages).",
}
"""Help of the task options eval takes: they apply to every task of the set."""


@with_option_groups
def eval(  # the command's name is the contract's
    taskset: Annotated[Path, typer.Argument(help="A directory holding tasks.jsonl, or a task file.")],
    *,
    # the task options eval takes, with its own help; --pipeline after --save-failures, as always
    options: Annotated[
        TaskOptions,
        TaskFlags(
            only=("model", "planner_model", "coder_model", "cost_budget", "pipeline"),
            help=EVAL_HELP,
            after={"pipeline": "save_failures"},
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where to write the results (default: codeloop-eval/<UTC time>)."),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Tasks run at once.")] = 1,
    rerun_failed: Annotated[
        Path | None,
        typer.Option("--rerun-failed", help="Run only the tasks unresolved in this earlier out dir."),
    ] = None,
    min_resolved: Annotated[
        float | None,
        typer.Option(
            "--min-resolved", min=0.0, max=1.0, help="Exit 1 when the resolved rate is below this (0..1)."
        ),
    ] = None,
    save_failures: Annotated[
        Path | None, typer.Option("--save-failures", help="Append the unresolved tasks to this task file.")
    ] = None,
    connection: Connection,
) -> None:
    """Run every task of TASKSET (each on a copy of its repository) and measure the outcome.

    Models and budgets not given here come from the configuration (the environment, the current
    directory's codeloop.toml, the user's config.toml), the same for every task; summary.json
    records them with where each came from.

    Exit codes: 0 when no task failed for environment reasons and the resolved rate is at least
    --min-resolved; 1 otherwise; 2 usage errors.
    """
    from codeloop.config.checks import check_submission
    from codeloop.config.task_builder import make_task, task_settings
    from codeloop.evaluation.taskset import load_tasks

    try:
        settings = task_settings(options)
        # Every task of the run names the same models and budgets: one check covers them all.
        check_submission(make_task("eval", Path.cwd(), settings=settings), settings=settings)
        tasks = load_tasks(taskset)
        if rerun_failed is not None:
            tasks = _failed_only(tasks, rerun_failed)
    except (EvalError, ConfigError) as exc:
        raise usage_error(str(exc)) from None
    chosen = _pipeline(options.pipeline, settings)
    out = out or Path("codeloop-eval") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if rerun_failed is not None and out.resolve() == rerun_failed.resolve():
        raise usage_error("--out must differ from --rerun-failed (the earlier results are kept)")
    if out.exists() and any(out.iterdir()):
        raise usage_error(f"--out {out} is not empty; name a new directory")

    started = time.monotonic()
    rows = run_async(lambda: _evaluate(tasks, settings, connection, jobs=jobs, pipeline=chosen))
    summary = _summary(tasks, rows, settings, jobs=jobs, wall_s=time.monotonic() - started, pipeline=chosen)
    _write(out, rows, summary)
    if save_failures is not None:
        added = _save_failures(tasks, rows, save_failures)
        typer.echo(f"appended {added} unresolved tasks to {save_failures}", err=True)
    low, high = summary["resolved_ci95"]
    typer.echo(
        f"resolved {summary['resolved']}/{summary['tasks']} ({100 * summary['resolved_rate']:.1f}%,"
        f" 95% CI {100 * low:.1f}-{100 * high:.1f}%){handed_off_note(summary)}, environment failures"
        f" {summary['environment_failures']}; reports in {out}"
    )
    problems = []
    if summary["environment_failures"]:
        problems.append(
            f"{summary['environment_failures']} tasks failed for environment reasons (see `blame` in {out}/results.jsonl)"
        )
    if min_resolved is not None and summary["resolved_rate"] < min_resolved:
        problems.append(
            f"resolved rate {summary['resolved_rate']:.3f} is under --min-resolved {min_resolved}"
        )
    if problems:
        raise fail("; ".join(problems))


def _pipeline(name: str | None, settings: "Settings") -> "PipelineChoice | None":
    """The `PipelineChoice` of `--pipeline` (checked: its kinds, order and installed roles), or None."""
    if name is None:
        return None
    from agents.orchestrator.pipeline import PipelineError, choice_of
    from agents.runtime.plugins import load_roles
    from codeloop.config.pipelines import PipelineConfigError, resolve_pipeline, role_problems

    try:
        chosen = resolve_pipeline(name, Path.cwd(), settings=settings)
    except (PipelineError, PipelineConfigError) as exc:
        raise usage_error(f"--pipeline: {exc}") from None
    missing = role_problems(chosen, load_roles())
    if missing:  # a worker elsewhere may serve it; the tasks say so while they wait
        typer.echo(f"note: {'; '.join(missing)}", err=True)
    return choice_of(chosen)


async def _evaluate(
    tasks: "list[EvalTask]",
    settings: "Settings",
    connection: Connection,
    *,
    jobs: int,
    pipeline: "PipelineChoice | None" = None,
) -> "list[EvalRow]":
    import anyio

    from agents.messages import TaskSubmitted
    from codeloop.config.task_builder import make_task
    from codeloop.evaluation.checks import judge
    from codeloop.evaluation.runner import Outcome, run_tasks

    rows: dict[str, EvalRow] = {}

    def submit(task: "EvalTask", repo: Path) -> TaskSubmitted:
        return make_task(task.text, repo, settings=settings, mode=task.mode, pipeline=pipeline)

    with tempfile.TemporaryDirectory(prefix="codeloop-eval-") as scratch:

        async def on_done(outcome: Outcome) -> None:
            row = await anyio.to_thread.run_sync(judge, outcome, Path(scratch))
            rows[row["id"]] = row
            mark = "resolved" if row["resolved"] else (row["failure_class"] or "unresolved")
            sys.stderr.write(
                f"[{len(rows)}/{len(tasks)}] {row['id']}: {row['status']}, {mark} ({row['wall_s']:.1f} s)\n"
            )

        from codeloop.wiring.roles import roles_for_choice

        # One bus for the whole run: the local serve's, else one started here for all tasks.
        async with local_or_embedded_serve(connection, roles=lambda: roles_for_choice(pipeline)) as config:
            await run_tasks(
                tasks, config=config, submit=submit, scratch=Path(scratch), jobs=jobs, on_done=on_done
            )
    return [rows[task.id] for task in tasks]


def _summary(
    tasks: "list[EvalTask]",
    rows: "list[EvalRow]",
    settings: "Settings",
    *,
    jobs: int,
    wall_s: float,
    pipeline: "PipelineChoice | None" = None,
) -> "Summary":
    from codeloop.config.environment import tool_server_config
    from codeloop.evaluation.checks import LOCALIZE_K
    from codeloop.evaluation.summary import digest, summarise
    from codeloop.evaluation.taskset import fingerprint

    models = settings.models
    config: RunConfig = {
        "models": models.model_dump(),
        "diagnose": not models.any,
        "budgets": settings.budgets.model_dump(),
        "jobs": jobs,
        "localize_k": LOCALIZE_K,
        "sandbox": tool_server_config().sandbox_policy,
        "codeloop": __version__,
        "task_ids": [t.id for t in tasks],
        # Every effective value and its source, so two reports can be compared knowing what differed.
        "configuration": settings.values(),
    }
    if pipeline is not None:  # only then: the configuration's fingerprint of a standard run stays as it was
        config["pipeline"] = pipeline.model_dump()
    fingerprints = {
        "taskset": fingerprint(tasks),
        "models": digest(config["models"]),
        "config": digest(
            {k: v for k, v in config.items() if k not in ("models", "task_ids", "configuration")}
        ),
    }
    summary = summarise(rows, fingerprints=fingerprints, config=config)
    summary["run_wall_s"] = round(wall_s, 3)
    summary["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return summary


def _write(out: Path, rows: "list[EvalRow]", summary: "Summary") -> None:
    from codeloop.evaluation.report_html import html_report

    out.mkdir(parents=True, exist_ok=True)
    files = {
        "results.jsonl": "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows),
        "summary.json": json.dumps(summary, indent=2, sort_keys=True) + "\n",
        "report.md": markdown_report(summary, rows),
        "report.html": html_report(summary, rows),
    }
    for name, text in files.items():
        partial = out / f".{name}.partial"
        partial.write_text(text, encoding="utf-8")
        partial.replace(out / name)


def _failed_only(tasks: "list[EvalTask]", previous: Path) -> "list[EvalTask]":

    path = previous / "results.jsonl"
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise PreviousRunError(f"--rerun-failed: cannot read {path}: {exc}") from None
    failed = {row["id"] for row in rows if not row.get("resolved")}
    chosen = [t for t in tasks if t.id in failed]
    if not chosen:
        raise PreviousRunError(f"--rerun-failed: no unresolved task of {path} is in this task set")
    return chosen


def _save_failures(tasks: "list[EvalTask]", rows: "list[EvalRow]", path: Path) -> int:
    """Append each unresolved task (paths made relative to `path`'s directory) not already there."""
    from codeloop.evaluation.taskset import load_tasks

    known = {t.id for t in load_tasks(path)} if path.is_file() and path.stat().st_size else set()
    failed = {row["id"] for row in rows if not row["resolved"]}
    new = [t for t in tasks if t.id in failed and t.id not in known]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        for task in new:
            file.write(json.dumps(task.line(relative_to=path.parent.resolve())) + "\n")
    return len(new)


def register(app: typer.Typer) -> None:
    app.command(name="eval")(eval)
