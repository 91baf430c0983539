"""`codeloop config push | history | diff | rollback` and `config show --center`: the fleet's
configuration center on the bus (`bus.center`, `codeloop.config.center`).

A push is checked as `config check` checks files (exit 2, nothing written), then written as a new
revision carrying who pushed it, when, why and the keys it changed; `--expect-revision N` makes
it compare-and-set. Every push and rollback, written or refused by the bus, is also a record in
the hash-chained audit log of this machine's codeloop home (`$CODELOOP_HOME/audit.jsonl`,
checked by `codeloop audit verify`). Who may write is NATS's decision: a user without publish
permission on `$KV.codeloop-config.>` gets a permission error (exit 1).
"""

import difflib
import getpass
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bus.errors import BusNotFound, PermissionDenied, RecordConflict
from codeloop.cli.common import EXIT_FAILURE, EXIT_USAGE, fail, usage_error
from codeloop.cli.connection import Connection, JsonOpt, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.config.connection_options import ConnectionOptions
from codeloop.config.errors import ConfigError
from layout import ROOT_AUDIT

if TYPE_CHECKING:
    from bus.center import CenterEntry
    from bus.config import BusConfig
    from codeloop.config.center import CenterConfig

MessageOpt = Annotated[str, typer.Option("--message", "-m", help="Why, for the history.")]


def pushed_by() -> str:
    """Who is pushing: `CODELOOP_OPERATOR`, else `user@host`."""

    return os.environ.get("CODELOOP_OPERATOR") or f"{getpass.getuser()}@{socket.gethostname()}"


def checked_document(file: Path) -> "tuple[str, CenterConfig]":
    """The file's text and its checked document, checked as `config check` checks files.

    Raises:
        typer.Exit: (2) the file is unreadable or the document has a problem (each one said).
    """
    from agents.messages import TaskSubmitted
    from codeloop.cli.config import pipeline_problems
    from codeloop.config.center import center_settings, parse_document
    from codeloop.config.checks import submission_problems
    from redaction import redact_text

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise usage_error(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        config = parse_document(text, label=str(file), base=file.resolve().parent)
        settings = center_settings(config, label=str(file))
    except ConfigError as exc:
        raise usage_error(f"{exc}; nothing was pushed") from None
    probe = TaskSubmitted(
        text="config push", repo=str(Path.cwd()), models=settings.models, budgets=settings.budgets
    )
    problems = submission_problems(probe, settings=settings) + pipeline_problems(settings)
    if problems:
        for problem in problems:
            typer.echo(f"error: {redact_text(problem)}", err=True)
        typer.echo("error: nothing was pushed", err=True)
        raise typer.Exit(EXIT_USAGE)
    return text, config


async def _audit(
    bus_config: "BusConfig", *, tool: str, arguments: dict[str, object], outcome: str, started: datetime
) -> None:
    """One record in the home's hash-chained audit log (who, what, the revision, the keys changed)."""
    from tool_servers.protocol.audit import AuditLog

    log = AuditLog(Path(bus_config.state_dir) / ROOT_AUDIT)
    elapsed = (datetime.now(UTC) - started).total_seconds() * 1000
    await log.append(
        principal=pushed_by(),
        server="config-center",
        tool=tool,
        arguments=arguments,
        outcome=outcome,
        duration_ms=elapsed,
        trace_id="",
        started=started,
    )


async def _write(
    connection: ConnectionOptions,
    text: str,
    config: "CenterConfig",
    *,
    base_dir: str,
    message: str,
    expect_revision: int | None,
    action: str = "push",
    rollback_of: int | None = None,
) -> tuple[int, list[str]]:
    """Write a revision; (its number, the keys it changed).

    Raises:
        typer.Exit: (1) a conflict with `expect_revision` or a permission refusal, said.
    """
    from bus.center import CenterRecord, center_bucket, ensure_center, latest, write
    from bus.connection import open_bus
    from codeloop.config.center import changed_keys, parsed_revision
    from codeloop.config.serve_note import client_bus_config

    started = datetime.now(UTC)
    bus_config = client_bus_config(**connection)
    async with open_bus(bus_config) as bus:
        try:
            kv = await center_bucket(bus)
        except BusNotFound:
            kv = await ensure_center(bus)
        current = await latest(kv)
        before = parsed_revision(current.record.document, current.record.base_dir) if current else None
        keys = changed_keys(before, config)
        record = CenterRecord(
            document=text,
            base_dir=base_dir,
            pushed_by=pushed_by(),
            pushed_at=started,
            message=message,
            action=action,  # pyright: ignore[reportArgumentType] - "push" or "rollback", from this module
            rollback_of=rollback_of,
            keys_changed=keys,
        )
        audit: dict[str, object] = {
            "keys_changed": keys,
            "message": message,
            "expect_revision": expect_revision,
        }
        if rollback_of is not None:
            audit["rollback_of"] = rollback_of
        try:
            revision = await write(bus, kv, record, expect_revision=expect_revision)
        except RecordConflict:
            now = await latest(kv)
            await _audit(bus_config, tool=action, arguments=audit, outcome="conflict", started=started)
            raise fail(_conflict(expect_revision, now), EXIT_FAILURE) from None
        except PermissionDenied as exc:
            await _audit(
                bus_config, tool=action, arguments=audit, outcome="permission_denied", started=started
            )
            raise fail(f"permission denied: {exc}; nothing was written", EXIT_FAILURE) from None
        await _audit(
            bus_config, tool=action, arguments={**audit, "revision": revision}, outcome="ok", started=started
        )
    return revision, keys


def _conflict(expected: int | None, now: "CenterEntry | None") -> str:
    if now is None:
        return f"conflict: --expect-revision {expected}, but the center has no revision yet; push with --expect-revision 0"
    by = f" (pushed by {now.record.pushed_by} at {now.record.pushed_at:%Y-%m-%dT%H:%M:%SZ}: {now.record.message!r})"
    return (
        f"conflict: --expect-revision {expected}, but the center is at revision {now.revision}{by}; "
        f"nothing was written. See what changed with `codeloop config diff {expected} {now.revision}`, "
        f"then push again with --expect-revision {now.revision}"
    )


@with_option_groups
def push(
    file: Annotated[Path, typer.Argument(help="The configuration document (TOML) to push.")],
    *,
    message: MessageOpt = "",
    expect_revision: Annotated[
        int | None,
        typer.Option(
            "--expect-revision",
            min=0,
            help="Write only if the center is still at this revision (0: no revision yet); else exit 1.",
        ),
    ] = None,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Check FILE as `config check` does and push it to the configuration center as a new revision.

    Exit codes: 0 pushed; 2 the document has a problem (nothing written); 1 a conflict with
    --expect-revision, a permission refusal or an unreachable bus (nothing written).
    """
    text, config = checked_document(file)

    async def main() -> tuple[int, list[str]]:
        return await _write(
            connection,
            text,
            config,
            base_dir=str(file.resolve().parent),
            message=message,
            expect_revision=expect_revision,
        )

    revision, keys = run_async(main)
    if as_json:
        typer.echo(json.dumps({"revision": revision, "keys_changed": keys}))
    else:
        typer.echo(f"pushed revision {revision} ({len(keys)} key(s) changed: {', '.join(keys) or 'none'})")


@with_option_groups
def rollback(
    revision: Annotated[int, typer.Argument(min=1, help="The revision whose document to restore.")],
    *,
    message: MessageOpt = "",
    expect_revision: Annotated[
        int | None, typer.Option("--expect-revision", min=0, help="As for push: compare-and-set.")
    ] = None,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Write a new revision equal to REVISION (the history keeps every revision in between)."""
    from bus.center import at_revision, center_bucket
    from bus.connection import open_bus
    from codeloop.config.center import parsed_revision
    from codeloop.config.serve_note import client_bus_config

    async def main() -> tuple[int, list[str]]:
        async with open_bus(client_bus_config(**connection)) as bus:
            old = await at_revision(await center_bucket(bus), revision)
        config = parsed_revision(old.record.document, old.record.base_dir)
        if config is None:
            raise fail(f"revision {revision} does not read as a configuration document; nothing was written")
        return await _write(
            connection,
            old.record.document,
            config,
            base_dir=old.record.base_dir,
            message=message or f"rollback to revision {revision}",
            expect_revision=expect_revision,
            action="rollback",
            rollback_of=revision,
        )

    new, keys = run_async(main)
    if as_json:
        typer.echo(json.dumps({"revision": new, "rollback_of": revision, "keys_changed": keys}))
    else:
        typer.echo(
            f"revision {new} restores revision {revision} ({len(keys)} key(s) changed: {', '.join(keys) or 'none'})"
        )


@with_option_groups
def history(*, connection: Connection, as_json: JsonOpt = False) -> None:
    """List the center's revisions, oldest first: who pushed each, when, why, the keys it changed."""
    from bus.center import center_bucket
    from bus.center import history as read_history
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_bus_config

    async def main() -> "list[CenterEntry]":
        async with open_bus(client_bus_config(**connection)) as bus:
            return await read_history(await center_bucket(bus))

    entries = run_async(main)
    if as_json:
        rows = [
            {"revision": e.revision, **e.record.model_dump(mode="json", exclude={"document", "kind"})}
            for e in entries
        ]
        typer.echo(json.dumps({"revisions": rows}))
        return
    if not entries:
        typer.echo("the configuration center has no revision yet (codeloop config push FILE)")
    for entry in entries:
        record = entry.record
        what = f"rollback to {record.rollback_of}" if record.action == "rollback" else "push"
        keys = ", ".join(record.keys_changed) or "no keys changed"
        typer.echo(
            f"{entry.revision:>4}  {record.pushed_at:%Y-%m-%dT%H:%M:%SZ}  {record.pushed_by}  {what}: "
            f"{record.message or '(no message)'}  [{keys}]"
        )


@with_option_groups
def diff(
    a: Annotated[int, typer.Argument(min=1, help="A revision.")],
    b: Annotated[int, typer.Argument(min=1, help="Another revision.")],
    *,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Show what changed from revision A to revision B: each key's old and new value, and the text diff."""

    from bus.center import at_revision, center_bucket
    from bus.connection import open_bus
    from codeloop.config.center import flat_values, parsed_revision
    from codeloop.config.serve_note import client_bus_config

    async def main() -> "tuple[CenterEntry, CenterEntry]":
        async with open_bus(client_bus_config(**connection)) as bus:
            kv = await center_bucket(bus)
            return await at_revision(kv, a), await at_revision(kv, b)

    old, new = run_async(main)
    values = [parsed_revision(e.record.document, e.record.base_dir) for e in (old, new)]
    before, after = (flat_values(v) if v is not None else {} for v in values)
    changes = {
        key: {"from": before.get(key), "to": after.get(key)}
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    }
    if as_json:
        typer.echo(json.dumps({"from": a, "to": b, "changes": changes}))
        return
    for key, change in changes.items():
        typer.echo(f"{key}: {json.dumps(change['from'])} -> {json.dumps(change['to'])}")
    lines = difflib.unified_diff(
        old.record.document.splitlines(keepends=True),
        new.record.document.splitlines(keepends=True),
        fromfile=f"revision {a}",
        tofile=f"revision {b}",
    )
    typer.echo("".join(lines), nl=False)


def show_center(connection: ConnectionOptions, *, as_json: bool) -> None:
    """`config show --center`: the current revision, who pushed it, and its document."""
    from bus.center import center_bucket, latest
    from bus.connection import open_bus
    from codeloop.config.center import flat_values, parsed_revision
    from codeloop.config.serve_note import client_bus_config

    async def main() -> "CenterEntry | None":
        async with open_bus(client_bus_config(**connection)) as bus:
            return await latest(await center_bucket(bus))

    entry = run_async(main)
    if entry is None:
        if as_json:
            typer.echo(json.dumps({"revision": None, "values": {}}))
        else:
            typer.echo("the configuration center has no revision yet (codeloop config push FILE)")
        return
    config = parsed_revision(entry.record.document, entry.record.base_dir)
    values = flat_values(config) if config is not None else {}
    if as_json:
        meta = entry.record.model_dump(mode="json", exclude={"kind"})
        typer.echo(json.dumps({"revision": entry.revision, **meta, "values": values}))
        return
    record = entry.record
    typer.echo(
        f"revision {entry.revision}, pushed by {record.pushed_by} at {record.pushed_at:%Y-%m-%dT%H:%M:%SZ}: {record.message or '(no message)'}"
    )
    for key, value in values.items():
        typer.echo(f"{key} = {json.dumps(value)}")


def register(app: typer.Typer) -> None:
    """Add the center's commands to `codeloop config`."""
    app.command()(push)
    app.command()(history)
    app.command()(diff)
    app.command()(rollback)
