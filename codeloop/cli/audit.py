"""`codeloop audit verify FILE`: check the hash chain of a tool server's audit log."""

from pathlib import Path
from typing import Annotated

import typer

from codeloop.cli.common import fail, usage_error

audit_app = typer.Typer(no_args_is_help=True, help="Inspect the tool servers' hash-chained audit log.")


@audit_app.command("verify")
def verify(
    file: Annotated[Path, typer.Argument(help="Audit log (JSONL) to check.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check the hash chain of an audit log: exits 1 if a record was edited, removed or reordered."""
    from tool_servers.protocol.audit import verify_log

    if not file.is_file():
        raise usage_error(f"{file} is not a file: pass the audit log (JSONL) of a tool server")
    try:
        report = verify_log(file)
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    if json_output:
        typer.echo(report.model_dump_json())
    elif report.ok:
        typer.echo(f"ok: {report.records} records, chain intact")
    else:
        typer.echo(f"TAMPERED: chain broken after {report.records} good records", err=True)
        for problem in report.problems:
            typer.echo(f"  {problem}", err=True)
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    """Add `codeloop audit ...` to the root app."""
    app.add_typer(audit_app, name="audit")
