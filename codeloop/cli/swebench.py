"""`codeloop swebench`: run and grade SWE-bench instances in the gVisor sandbox, without Docker.

Everything is checked before anything runs (the instances file, the ids, the predictions, the
specs, the repositories, the interpreters, the output directory): a bad input is one line on
stderr and exit 2, with nothing written. Then each instance is run and graded as it finishes
(`codeloop.swebench`), the report rewritten each time. Exit 0 when every instance was graded,
1 when some could not be (an environment that did not build, a timeout), 2 usage errors.
"""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail, usage_error
from codeloop.cli.connection import Connection, run_async
from codeloop.cli.option_groups import with_option_groups

if TYPE_CHECKING:  # the run's modules load when a run starts, not for `--help`
    from collections.abc import AsyncIterator

    from bus.config import BusConfig
    from codeloop.swebench.cli_support import Options, Serving
    from codeloop.swebench.run import Machine

DEFAULT_TIMEOUT_S = 1800.0
"""The official harness's per-instance timeout: a slower suite under gVisor must not be cut
where Docker would have let it finish."""


Select = Annotated[
    bool,
    typer.Option(
        "--select",
        help="Verify each source's patch as a coder's patch, choose one per instance, grade them "
        "all (OUT/selection.jsonl, OUT/selection_summary.json, report.json of the picks).",
    ),
]
GradeByLabels = Annotated[
    bool,
    typer.Option(
        "--grade-by-labels",
        help="With --select: a candidate whose source has official labels (<stem>.labels.json "
        "beside it) is graded by its label instead of a harness run (about half the run's time).",
    ),
]


@with_option_groups
def swebench(
    instances: Annotated[
        Path, typer.Argument(help="SWE-bench instances: a JSON list, JSON lines or a Parquet file.")
    ],
    predictions: Annotated[
        list[str] | None,
        typer.Option(
            "--predictions",
            help="A predictions file (instance_id, model_name_or_path, model_patch; JSON list/dict or "
            "JSON lines), `gold` (each instance's own patch: validates the environments) or `empty` "
            "(no change: the test patch alone must resolve nothing). With --select, repeat it: each "
            "file (PATH, or NAME=PATH) is a source of candidates.",
        ),
    ] = None,
    select: Select = False,
    grade_by_labels: GradeByLabels = False,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Solve each instance with this model first (writes predictions.jsonl)."),
    ] = None,
    instance_ids: Annotated[
        str | None, typer.Option("--instance-ids", help="Only these instances (comma-separated ids).")
    ] = None,
    repo: Annotated[str | None, typer.Option("--repo", help="Only instances of OWNER/NAME.")] = None,
    sample: Annotated[
        int | None,
        typer.Option("--sample", min=1, help="A random (seeded, repeatable) sample of N instances."),
    ] = None,
    repos: Annotated[
        Path | None,
        typer.Option(
            "--repos",
            help="Directory of repositories: per OWNER/NAME a clone, bare mirror or bundle named NAME, "
            "OWNER+NAME or NAME.bundle. Default: clone from GitHub into the cache.",
        ),
    ] = None,
    specs: Annotated[
        Path | None,
        typer.Option(
            "--specs",
            help="JSON or TOML file of specs (OWNER/NAME -> version -> spec) for repositories SWE-bench lacks.",
        ),
    ] = None,
    left_out: Annotated[
        Path | None,
        typer.Option(
            "--left-out",
            help="validation.json of a gold run: leave the listed tests it found unrunnable here out of grading.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output directory (default swebench-runs/<UTC time>).")
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", min=0, help="Instances run at once here (0: only remote workers, with --nats)."
        ),
    ] = 1,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=1.0, help="Seconds the tests of one instance may take (official: 1800)."
        ),
    ] = DEFAULT_TIMEOUT_S,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", min=256, help="Memory of one instance's sandbox.")
    ] = 6144,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume", help="Continue the run in this directory: graded instances are not run again."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary (report.json) on stdout.")
    ] = False,
    *,
    connection: Connection,
) -> None:
    """Run SWE-bench INSTANCES in the gVisor sandbox and grade them as the official harness does.

    Writes OUT/report.json (the official summary's shape), OUT/instances/<id>/ (report.json,
    test_output.txt, run_instance.log, patch.diff, outcome.json), OUT/report.html, and with
    `gold` OUT/validation.json. Environments are built once per (repository, version) and cached.

    With --nats URL (or a running `codeloop serve`) the instances go on the bus: this process runs
    --jobs of them (0: none) and `codeloop serve --role swebench` processes on any machine run the rest.
    --select with several --predictions: verify each instance's candidates, choose one, grade all.
    """
    from codeloop.swebench.cli_support import Options

    given = _given(predictions, select=select)
    _check_select_only(grade_by_labels, select=select)
    options = Options(
        instances=instances,
        predictions=given[0] if given else None,
        model=model,
        instance_ids=[i.strip() for i in instance_ids.split(",") if i.strip()] if instance_ids else None,
        repo=repo,
        sample=sample,
        repos=repos,
        specs=specs,
        left_out=left_out,
        out=out,
        jobs=jobs,
        timeout_s=timeout,
        memory_mb=memory_mb,
        resume=resume,
        select=select,
        sources=tuple(given),
        grade_by_labels=grade_by_labels,
    )
    if select:
        return _select_and_report(options, as_json=as_json)
    _run_and_report(options, as_json=as_json, connection=connection)


def _given(predictions: list[str] | None, *, select: bool) -> list[str]:
    """The `--predictions` given, checked against `--select`."""
    given = predictions or []
    if len(given) > 1 and not select:
        raise usage_error("several --predictions are candidates to choose from: add --select")
    if select and not given:
        raise usage_error("--select needs --predictions FILE (repeated: one per source of candidates)")
    return given


def _check_select_only(grade_by_labels: bool, *, select: bool) -> None:
    if grade_by_labels and not select:
        raise usage_error("--grade-by-labels grades --select's candidates: add --select")


def _select_and_report(options: "Options", *, as_json: bool) -> None:
    """`--select`: check the inputs (exit 2 on a bad one), verify, choose and grade here, print
    the selection's summary; exit 1 when some candidate could not be graded."""
    from codeloop.swebench.cli_support import prepare_select, run_select
    from codeloop.swebench.errors import SwebenchError

    try:
        plan = prepare_select(options, this_machine())
    except SwebenchError as exc:
        raise usage_error(str(exc)) from None
    summary = run_select(plan)
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        typer.echo(
            f"selected {summary['selected_resolved']} resolved of {summary['instances']} instances (oracle "
            f"{summary['oracle']}, random {summary['random_expected']}); passed precision "
            f"{summary['passed_precision']}, recall {summary['passed_recall']}; in {plan.out}",
            err=True,
        )
    if summary["ungraded"]:
        raise fail(f"{summary['ungraded']} candidates could not be graded (see {plan.out}/report.html)")


def _run_and_report(options: "Options", *, as_json: bool, connection: Connection) -> None:
    """Check the inputs (exit 2 on a bad one), run, print the summary, exit 1 if some instance
    could not be evaluated or the run was interrupted."""
    from codeloop.config.errors import ConfigError
    from codeloop.swebench.cli_support import prepare, run
    from codeloop.swebench.errors import SwebenchError

    machine = this_machine()
    try:
        plan = prepare(options, machine)
    except SwebenchError as exc:
        raise usage_error(str(exc)) from None
    try:
        bus = _shared_bus(connection)
        report = run(plan, machine=machine, bus=bus, serving=_serving(connection))
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        typer.echo(
            f"resolved {report['resolved_instances']}/{report['submitted_instances']}, unresolved "
            f"{report['unresolved_instances']}, errors {report['error_instances']}; report in {plan.out}",
            err=True,
        )
    figures = report["codeloop"]
    if report["error_instances"] or (isinstance(figures, dict) and figures.get("interrupted")):
        raise fail(
            f"{report['error_instances']} instances could not be evaluated (see {plan.out}/report.html)"
        )


def this_machine() -> "Machine":
    """What a SWE-bench run takes from this machine (`codeloop.swebench.run.Machine`), read from
    the environment here, once: the cache directory (`CODELOOP_CACHE_DIR`), the sandbox
    (`CODELOOP_SANDBOX`, default gvisor) and the variables environment builds see."""
    from codeloop.config.environment import build_environment, cache_dir, sandbox_named
    from codeloop.swebench.run import Machine

    return Machine(
        cache_dir=cache_dir(), sandbox_policy=sandbox_named() or "gvisor", build_env=build_environment()
    )


def _shared_bus(connection: Connection) -> "BusConfig | None":
    """The bus to share the run on: `--nats`/`CODELOOP_NATS_URL`, else a running local serve;
    None: run on this machine alone.

    Raises:
        ConfigError: a bad `--nats` URL or credentials.
    """
    from codeloop.config.environment import bus_config
    from codeloop.config.errors import ConfigError
    from codeloop.config.serve_note import client_bus_config

    if connection.get("nats_url"):
        return bus_config(**connection)
    try:
        return client_bus_config(**connection)
    except ConfigError:
        return None


def _serving(connection: Connection) -> "Serving":
    """Opens the serve a `--model` run solves its instances on (`cli_support.Serving`): the one
    `connection` names or the local one, else one started here with every role, as `codeloop
    eval` does."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def serving() -> "AsyncIterator[BusConfig]":
        from codeloop.config.environment import bus_config, tool_server_config
        from codeloop.wiring.embedded import embedded_serve
        from codeloop.wiring.process import RoleSetup, Workers
        from codeloop.wiring.roles import every_role

        async with embedded_serve(
            bus_config(**connection),
            store="temporary",
            workers=lambda: Workers(roles=every_role()),
            setup=RoleSetup(tool_config=tool_server_config()),
        ) as serve:
            yield serve.config

    return serving


@with_option_groups
def swebench_worker(
    repos: Annotated[
        Path | None,
        typer.Option("--repos", help="This machine's repositories (as for `codeloop swebench --repos`)."),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Instances run at once.")] = 1,
    idle_exit: Annotated[
        float | None,
        typer.Option(
            "--idle-exit", min=1.0, help="Exit after this many seconds without work (a batch Job's pods)."
        ),
    ] = None,
    *,
    connection: Connection,
) -> None:
    """Run SWE-bench instances of any run on the bus (`codeloop swebench --nats URL`), here.

    The same workers as `codeloop serve --role swebench` (once per --jobs) without the rest of a
    serve, and with --idle-exit for batch pods. Takes instances from the shared durable consumer,
    builds their environments where needed (cached on this machine), runs and grades them in
    gVisor, and publishes each outcome with its files. A worker killed mid-instance loses
    nothing: the instance is run again elsewhere.
    """

    from bus.connection import open_bus
    from codeloop.config.environment import bus_config
    from codeloop.config.errors import ConfigError
    from codeloop.swebench.worker import SwebenchWorkers

    try:
        config = bus_config(**connection)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    if not config.servers:
        raise usage_error("no NATS URL: pass --nats URL or set CODELOOP_NATS_URL")
    workers = SwebenchWorkers(this_machine(), jobs=jobs, repos_dir=repos, idle_exit_s=idle_exit)

    async def main() -> None:
        async with open_bus(config) as bus:
            await workers.run(bus)

    run_async(main)


def register(app: typer.Typer) -> None:
    app.command(name="swebench")(swebench)
    app.command(name="swebench-worker")(swebench_worker)
