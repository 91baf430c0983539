"""`codeloop usage [--principal P] [--days N] [--json]`: the quota ledger (`agents.quotas`), with
each principal's quota from the configuration center beside what it used."""

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from bus.errors import BusNotFound
from codeloop.cli.connection import Connection, JsonOpt, run_async
from codeloop.cli.option_groups import with_option_groups

if TYPE_CHECKING:
    from agents.quotas import DayUsage
    from bus.center import CenterEntry


@with_option_groups
def usage(
    *,
    principal: Annotated[
        str | None,
        typer.Option("--principal", help="Only this principal (`local`: the command line's tasks)."),
    ] = None,
    days: Annotated[int, typer.Option("--days", min=1, help="UTC days back from today.")] = 7,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Show what each principal used per UTC day (tasks, tokens, cost, running) against its quota."""
    from agents.quotas import Ledger, quota_for, resets_at
    from bus.center import center_bucket, latest
    from bus.connection import open_bus
    from codeloop.config.center import parsed_revision
    from codeloop.config.serve_note import client_bus_config

    since = (datetime.now(UTC) - timedelta(days=days - 1)).date().isoformat()

    async def main() -> "tuple[list[DayUsage], CenterEntry | None]":
        async with open_bus(client_bus_config(**connection)) as bus:
            try:
                entry = await latest(await center_bucket(bus))
            except BusNotFound:
                entry = None
            return await (await Ledger.open(bus)).days(principal), entry

    records, entry = run_async(main)
    config = parsed_revision(entry.record.document, entry.record.base_dir) if entry else None
    rows = []
    for day in (d for d in records if d.day >= since):
        found = quota_for(config.quotas, day.principal) if config is not None else None
        rows.append(
            {
                "principal": day.principal,
                "day": day.day,
                "tasks": len(day.tasks),
                "running": len(day.running),
                "tokens": day.tokens,
                "cost_usd": day.cost_usd,
                "quota": found[0].model_dump(mode="json", exclude_none=True) if found else None,
                "quota_key": found[1] if found else None,
                "resets_at": resets_at(day.day).isoformat(),
            }
        )
    if as_json:
        typer.echo(json.dumps({"config_revision": entry.revision if entry else None, "days": rows}))
        return
    if not rows:
        typer.echo("no usage recorded" + (f" for {principal}" if principal else "") + f" since {since}")
    for row in rows:
        quota = row["quota"] or {}
        limits = ", ".join(f"{k} {v}" for k, v in quota.items()) or "no quota"
        typer.echo(
            f"{row['day']}  {row['principal']}: {row['tasks']} task(s), {row['running']} running, "
            f"{row['tokens']:,} tokens, ${row['cost_usd']:.4f}  ({row['quota_key'] or 'quota'}: {limits})"
        )


def register(app: typer.Typer) -> None:
    app.command()(usage)
