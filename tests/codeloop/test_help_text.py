"""`--help` as a person reads it, piped or at 80 columns: plain text, no type label beside a flag."""

import os
import subprocess
import sys

from typer.testing import CliRunner

from codeloop.cli import app


def _subcommands(page: str) -> list[str]:
    """The names a help page lists under `Commands:`."""
    _, found, rest = page.partition("\nCommands:\n")
    if not found:
        return []
    return [
        line.split()[0] for line in rest.splitlines() if line.startswith("  ") and not line.startswith("   ")
    ]


def _help_pages() -> dict[str, str]:
    """Every command's and group's help page, found the way a user does: from `codeloop --help` down."""
    runner, pages, todo = CliRunner(), {}, [()]
    while todo:
        path = todo.pop()
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert shown.exit_code == 0, (path, shown.output)
        pages[" ".join(path)] = shown.output
        todo += [(*path, name) for name in _subcommands(shown.output)]
    return pages


def test_no_help_page_shows_a_type_beside_a_flag_or_runs_past_80_columns() -> None:
    """Our choice, as git and cargo do: `--apply  Apply ...`, not `--apply <bool>`; a help page
    fits the terminal it is read in."""
    pages = _help_pages()
    assert len(pages) > 30 and {"run", "mcp", "config show", "sandbox exec"} <= set(pages)
    with_bool = [name for name, page in pages.items() if "<bool>" in page]
    too_wide = [name for name, page in pages.items() if max(map(len, page.splitlines())) > 80]
    assert with_bool == [] and too_wide == []


def test_run_help_piped_is_plain_text_naming_its_flags() -> None:
    """A page piped into `less` or `grep` has no box drawing and no colour codes."""
    env = {**os.environ, "COLUMNS": "80"}
    shown = subprocess.run(
        [sys.executable, "-m", "codeloop", "run", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "\x1b[" not in shown and "│" not in shown and "╭" not in shown
    assert "\n  --apply                Apply the finished patch" in shown
