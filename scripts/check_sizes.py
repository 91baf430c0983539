"""Functions that fit a screen: none over 120 lines, none with more than 10 parameters.

Run by `make lint` (and the pre-commit hook) on every Python file of the repository; prints one
line per offender (`path:line: name: what`) and exits 1 if there is any.

Exempt, because their size or their parameters are declarations rather than logic:

- the parameter limit does not apply to a typer command or callback (a function decorated with
  `<app>.command(...)` or `<app>.callback(...)`, or with `with_option_groups`, which makes a
  function a command registered later by `app.command()(fn)`): each of its parameters is one
  command-line option, declared with its help text, and the CLI's `--help` is the list;
- `EXEMPT` below names any other function, with the reason. Keep it short: a function that grew
  past the limits is split, not listed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 120
MAX_PARAMETERS = 10
# Not ours or not Python we maintain: virtualenvs, caches, installed node packages.
SKIP_DIRS = {".venv", "node_modules", "__pycache__", ".codeloop", "build", "dist", ".git"}
# "path::qualified.name" -> why it is exempt from both limits.
EXEMPT: dict[str, str] = {}
TYPER_DECORATORS = {"command", "callback"}
# A decorator by name that marks a typer command (codeloop.cli.option_groups).
COMMAND_DECORATORS = {"with_option_groups"}


@dataclass(frozen=True)
class Offence:
    path: str
    line: int
    name: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}: {self.what}"


def _parameter_count(args: ast.arguments) -> int:
    """Parameters a caller passes: `self`/`cls` of a method do not count, `*args`/`**kwargs` do."""
    positional = [*args.posonlyargs, *args.args]
    count = len(positional) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)
    if positional and positional[0].arg in ("self", "cls"):
        count -= 1
    return count


def _is_typer_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in TYPER_DECORATORS:
            return True
        if isinstance(target, ast.Name) and target.id in COMMAND_DECORATORS:
            return True
    return False


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            yield name, child
            yield from _functions(child, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, prefix + child.name + ".")
        else:
            yield from _functions(child, prefix)


def check_file(path: Path, root: Path = ROOT) -> list[Offence]:
    """The functions of `path` over the limits that are not exempt."""
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Offence] = []
    for name, node in _functions(tree):
        if f"{rel}::{name}" in EXEMPT:
            continue
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if lines > MAX_LINES:
            found.append(Offence(rel, node.lineno, name, f"{lines} lines (at most {MAX_LINES})"))
        parameters = _parameter_count(node.args)
        if parameters > MAX_PARAMETERS and not _is_typer_command(node):
            found.append(
                Offence(rel, node.lineno, name, f"{parameters} parameters (at most {MAX_PARAMETERS})")
            )
    return found


def python_files(root: Path) -> Iterator[Path]:
    """Every Python file under `root`, outside virtualenvs, caches and installed packages."""
    for path in sorted(root.rglob("*.py")):
        if not SKIP_DIRS.intersection(path.relative_to(root).parts):
            yield path


def main(argv: list[str]) -> int:
    """Check the files named in `argv` (default: the whole repository); 1 if any is over."""
    paths = [Path(a).resolve() for a in argv] if argv else list(python_files(ROOT))
    stale = [key for key in EXEMPT if not (ROOT / key.split("::")[0]).is_file()]
    offences = [o for path in paths if path.suffix == ".py" for o in check_file(path)]
    for offence in offences:
        print(offence)
    for key in stale:
        print(f"scripts/check_sizes.py: EXEMPT names a file that is gone: {key}")
    if offences or stale:
        print(
            f"{len(offences)} function(s) over the limits: split them (a function fits a screen: "
            f"at most {MAX_LINES} lines and {MAX_PARAMETERS} parameters)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
