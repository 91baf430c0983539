"""`codeloop roles`: the installed roles (entry points `codeloop.roles`) and the live workers of each.

Installed roles come from this environment's entry points, broken plug-ins with the reason. Live
workers come from NATS micro discovery on the bus of the local serve (or `--nats`): every worker
of every role, in any process or language, answers `$SRV.STATS` with its role, stage kind,
version, schema version and request and error counts.
"""

import json
from typing import TYPE_CHECKING

import typer

from codeloop.cli.connection import Connection, JsonOpt, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.config.errors import ConfigError

if TYPE_CHECKING:
    from bus.discovery import WorkerInfo


@with_option_groups
def roles(
    *,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """List the installed roles and, when a serve (or --nats) is reachable, the live workers of each.

    A role is installed through the entry-point group codeloop.roles (the built-ins too); a
    plug-in that cannot load is listed as broken with the reason. Workers are found by NATS micro
    discovery ($SRV.STATS): role, stage kind, version, schema version, requests and errors.
    """
    from agents.runtime.plugins import load_roles
    from codeloop.config.serve_note import client_bus_config

    registry = load_roles()
    try:
        config = client_bus_config(**connection)
    except ConfigError as exc:
        config, bus_note = None, str(exc)
    else:
        bus_note = None

    async def main() -> "list[WorkerInfo]":
        from bus.connection import open_bus
        from bus.discovery import discover

        async with open_bus(config) as bus:  # pyright: ignore[reportArgumentType] - only reached with a config: the bus note above says why there is none
            return await discover(bus)

    workers = run_async(main) if config is not None else []
    installed = [
        {
            "name": name,
            "stage_kind": r.definition.kind,
            "version": r.definition.version,
            "builtin": r.builtin,
            "distribution": r.distribution,
            "entry_point": r.entry_point,
            "description": r.definition.description,
            "workers": [w.as_json() for w in workers if w.role == name],
        }
        for name, r in sorted(registry.roles.items(), key=lambda item: (not item[1].builtin, item[0]))
    ]
    from bus.discovery import ORCHESTRATOR_KIND

    orchestrators = [w.as_json() for w in workers if w.kind == ORCHESTRATOR_KIND]
    foreign = [w.as_json() for w in workers if w.role not in registry.roles and w.kind != ORCHESTRATOR_KIND]
    broken = [
        {"name": b.name, "entry_point": b.entry_point, "distribution": b.distribution, "reason": b.reason}
        for b in registry.broken
    ]
    if as_json:
        out = {
            "installed": installed,
            "broken": broken,
            "other_workers": foreign,
            "orchestrators": orchestrators,
            "bus": bus_note is None,
        }
        if bus_note:
            out["bus_note"] = bus_note
        typer.echo(json.dumps(out))
        return
    _show(installed, broken, foreign, bus_note)
    for o in orchestrators:
        typer.echo(
            f"orchestrator {o['id']} (schema {o['schema_version']}): {o['requests']} messages, {o['errors']} errors"
        )


def _show(installed: list[dict], broken: list[dict], foreign: list[dict], bus_note: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("role", "kind", "version", "from", "workers", "requests", "errors", title="installed roles")
    for role in installed:
        workers = role["workers"]
        source = "built-in" if role["builtin"] else role["distribution"]
        table.add_row(
            role["name"],
            role["stage_kind"],
            role["version"],
            source,
            _workers_cell(workers, bus_note),
            str(sum(w["requests"] for w in workers)),
            str(sum(w["errors"] for w in workers)),
        )
    console = Console()
    console.print(table)
    if foreign:
        others = Table(
            "role",
            "kind",
            "version",
            "schema",
            "worker id",
            "requests",
            "errors",
            title="live workers of roles not installed here (other processes or languages)",
        )
        for w in foreign:
            schema = str(w["schema_version"]) + ("" if w["compatible"] else " (incompatible: refused)")
            others.add_row(
                w["role"],
                w["stage_kind"],
                w["version"],
                schema,
                w["id"],
                str(w["requests"]),
                str(w["errors"]),
            )
        console.print(others)
    for b in broken:
        typer.echo(f"broken: {b['name']} ({b['distribution']}, {b['entry_point']}): {b['reason']}")
    if bus_note:
        typer.echo(f"live workers unknown: {bus_note}", err=True)


def _workers_cell(workers: list[dict], bus_note: str | None) -> str:
    if bus_note:
        return "?"
    bad = [w for w in workers if not w["compatible"]]
    return str(len(workers) - len(bad)) + (f" (+{len(bad)} refused: other schema)" if bad else "")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command()(roles)
