"""Does a `codeloop` command line still parse? The CLI's own click commands decide.

A manifest or the Containerfile names subcommands and flags as plain strings; nothing else notices
when the CLI renames one. Here the command line is walked down typer's click tree from
`codeloop.cli.app` (group options, then the subcommand, ...) and the leaf command parses the rest
exactly as `codeloop` would: unknown options, bad values (`--replicas 9`) and missing required
parameters are problems. Only callbacks are not run for `--help` and `--version`, which print and exit.
"""

import shlex
from collections.abc import Sequence
from functools import cache
from typing import Any

import typer
import typer.main

_PRINT_AND_EXIT = ("--help", "--version")


@cache
def root_command() -> Any:
    """The click command behind the `codeloop` entry point."""
    from codeloop.cli import app

    return typer.main.get_command(app)


def command_problems(argv: Sequence[str], root: Any = None) -> list[str]:
    """What is wrong with `codeloop ARGV` (argv without the program name); [] when it parses."""
    cmd = root if root is not None else root_command()
    path = ["codeloop"]
    rest = list(argv)
    while hasattr(cmd, "commands"):  # a group: its own options, then a subcommand
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            name = rest[i].split("=", 1)[0]
            if name in _PRINT_AND_EXIT:
                return _names_problems(cmd, path, rest[i:])
            option = _option(cmd, name)
            if option is None:
                return [f"{' '.join(path)}: no such option {name}"]
            i += 1 if option.is_flag or "=" in rest[i] else 2
        if i >= len(rest):
            return [f"{' '.join(path)}: no subcommand given (one of {', '.join(sorted(cmd.commands))})"]
        name = rest[i]
        if name not in cmd.commands:
            return [f"{' '.join(path)}: no such command {name!r} (one of {', '.join(sorted(cmd.commands))})"]
        path.append(name)
        cmd = cmd.commands[name]
        rest = rest[i + 1 :]
    if any(arg.split("=", 1)[0] in _PRINT_AND_EXIT for arg in rest):
        return _names_problems(cmd, path, rest)
    try:
        cmd.make_context(" ".join(path), rest, resilient_parsing=False)
    except typer.Exit:
        return []
    except typer.TyperException as exc:
        return [f"{' '.join(path)}: {exc.format_message()}"]
    return []


def _option(cmd: Any, name: str) -> Any:
    for param in cmd.params:
        if name in getattr(param, "opts", ()) or name in getattr(param, "secondary_opts", ()):
            return param
    return None


def _names_problems(cmd: object, path: list[str], args: list[str]) -> list[str]:
    """For a line that only prints (--help, --version): every option it names must exist."""
    unknown = [
        arg.split("=", 1)[0]
        for arg in args
        if arg.startswith("--")
        and arg.split("=", 1)[0] not in _PRINT_AND_EXIT
        and _option(cmd, arg.split("=", 1)[0]) is None
    ]
    return [f"{' '.join(path)}: no such option {name}" for name in unknown]


def shell_invocations(script: str, program: str = "codeloop") -> list[list[str]]:
    """The argument lists `program` is run with in a simple shell script (`a && b; c | d`).

    Enough for RUN lines and `sh -c` strings: words split as the shell would, commands split at
    `&&`, `||`, `;` and `|`, leading `VAR=value` assignments, `exec` and `env` skipped.
    """
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word and set(word) <= set(";&|"):
            commands.append([])
        else:
            commands[-1].append(word)
    found = []
    for words in commands:
        while words and (words[0] in ("exec", "env") or ("=" in words[0] and not words[0].startswith("-"))):
            words = words[1:]
        if words and words[0].rsplit("/", 1)[-1] == program:
            found.append(words[1:])
    return found
