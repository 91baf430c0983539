"""`codeloop console [--open] [--json]`: the address of the local serve's web console, with its token."""

import json
from pathlib import Path
from typing import Annotated

import typer

from codeloop.cli.common import fail
from codeloop.cli.connection import JsonOpt, StateOpt
from layout import SERVE_NOTE


def console(
    open_browser: Annotated[
        bool, typer.Option("--open", help="Also open it in the default web browser.")
    ] = False,
    state_dir: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the web console's address with its access token (the running `codeloop serve`'s).

    The address signs the browser in once (a session cookie) and drops the token from the address
    bar. Keep it to yourself: whoever has it acts as you. Exit codes: 0 printed; 1 no serve runs
    here, or it runs without its console (--no-console).
    """
    import webbrowser

    from codeloop.config.environment import bus_config
    from codeloop.config.serve_note import read_serve_note, serve_is_alive
    from codeloop.console.links import console_link, generated_token

    where = bus_config(state_dir=state_dir).state_dir
    note = read_serve_note(where)
    if note is None or not serve_is_alive(note):
        raise fail(f"no running `codeloop serve` noted in {Path(where) / SERVE_NOTE}: start one first")
    if note.console is None:
        raise fail("the running `codeloop serve` has no console (started with --no-console)")
    link = console_link(note.console)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "url": note.console.url,
                    "open_url": link,
                    "token": generated_token(note.console),
                    "token_file": note.console.token_file,
                    "generated": note.console.generated,
                }
            )
        )
    else:
        typer.echo(link)
        if not note.console.generated:
            typer.echo(
                f"sign in with ?token=YOUR_TOKEN; the tokens are in {note.console.token_file}", err=True
            )
    if open_browser and not webbrowser.open(link):
        raise fail(f"no web browser could be opened here; open {note.console.url} yourself")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command()(console)
