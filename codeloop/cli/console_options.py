"""`codeloop serve`'s web console options, checked once into a `ConsoleHosting`.

The console submits under the same root and grant as the hosted tasks server (`--mcp-root`,
`--mcp-scopes`), so it is built from those too. The console package is imported inside the
method: `codeloop --help` builds these classes and should stay fast.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail
from codeloop.cli.option_groups import OptionGroup

if TYPE_CHECKING:
    from codeloop.console.hosting import ConsoleHosting


@dataclass(frozen=True)
class ConsoleOptions(OptionGroup):
    """The web console (on unless --no-console)."""

    console: Annotated[
        bool,
        typer.Option(
            "--console/--no-console",
            help="Serve the web console at / of its own HTTP port: follow, inspect, approve, cancel "
            "and submit tasks in a browser. `codeloop console` prints its address with the token.",
        ),
    ] = True
    console_host: Annotated[
        str,
        typer.Option(
            "--console-host",
            help="Address the console listens on. Keep 127.0.0.1 unless others must reach it, then "
            "give them tokens of their own (--console-token-file) and put TLS in front.",
        ),
    ] = "127.0.0.1"
    console_port: Annotated[
        int, typer.Option("--console-port", min=0, max=65535, help="Port of the console (0: a free one).")
    ] = 0
    console_token_file: Annotated[
        Path | None,
        typer.Option(
            "--console-token-file",
            help="Access tokens, one 'TOKEN PRINCIPAL SCOPES' line per person (mode 0600; SCOPES as "
            "--mcp-scopes, plus `operator` to see every principal's tasks). Default: a fresh token "
            "for principal `serve` (an operator) at every start, in STATE_DIR/console-token.",
        ),
    ] = None
    console_reports: Annotated[
        list[Path] | None,
        typer.Option(
            "--console-reports",
            metavar="DIR",
            help="A directory of `codeloop eval --out` or `codeloop swebench --out` runs (or one run) "
            "the console lists under Reports (repeatable).",
        ),
    ] = None

    def hosting(
        self, *, root: Path | None, scopes: str, workspace_service_only: bool
    ) -> "ConsoleHosting | None":
        """The checked `ConsoleHosting`, or None with `--no-console` (or a workspace service).

        Raises:
            typer.Exit: (2) a token file or report directory that is not there, or bad scopes.
        """
        if not self.console or workspace_service_only:
            return None
        from codeloop.console.access import AccessFileError, AccessTable
        from codeloop.console.hosting import ConsoleHosting
        from tool_servers.protocol.scopes import parse_scopes

        if self.console_token_file is not None:
            try:
                AccessTable.from_file(self.console_token_file)
            except AccessFileError as exc:
                raise fail(f"--console-token-file: {exc}", 2) from None
        for directory in self.console_reports or []:
            if not directory.is_dir():
                raise fail(f"--console-reports {directory} is not a directory", 2)
        try:
            granted = parse_scopes(scopes)
        except ValueError as exc:
            raise fail(f"--mcp-scopes: {exc}", 2) from None
        return ConsoleHosting(
            root=(root or Path.cwd()).expanduser().resolve(),
            scopes=granted,
            host=self.console_host,
            port=self.console_port,
            token_file=self.console_token_file,
            reports=tuple(d.resolve() for d in self.console_reports or []),
        )
