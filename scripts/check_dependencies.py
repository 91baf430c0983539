"""Every third-party package imported directly is declared in pyproject.toml.

Run by `make lint` (and the pre-commit hook). The packages codeloop ships (`[project] dependencies`)
may import only what those dependencies name; the tests, benchmarks, examples, infra checks and
scripts may also import the `dev` extra. An import inside `try: ... except ImportError` is optional
(`codeloop.testing` uses pytest when it is there) and is not counted. An import name is mapped to
the distribution that provides it through the installed metadata, so run this in the project's
virtualenv. Prints one line per undeclared import (`path:line: name (distribution)`), exits 1 if any.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("codeloop", "bus", "agents", "tool_servers", "sandbox", "redaction", "layout")
DEVELOPMENT = ("tests", "benchmarks", "examples", "infra", "scripts")
FIRST_PARTY = {*SHIPPED, *DEVELOPMENT}
SKIP_DIRS = {".venv", "node_modules", "__pycache__", ".codeloop", "build", "dist"}
# Import names no distribution's metadata lists (modules that install no top-level record).
KNOWN: dict[str, str] = {}
# Not codeloop's imports: a file the sandbox runs under the checked project's own interpreter.
FOREIGN = {"sandbox/_warm_pytest.py"}


def _requirement_name(requirement: str) -> str:
    """`pydantic-ai-slim[mcp]==2.68.*` -> `pydantic-ai-slim`, normalised as PEP 503 says."""
    name = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject: Path) -> tuple[set[str], set[str]]:
    """The normalised names of the runtime dependencies and of the `dev` extra."""
    project = tomllib.loads(pyproject.read_text())["project"]
    runtime = {_requirement_name(r) for r in project["dependencies"]}
    dev = {_requirement_name(r) for r in project.get("optional-dependencies", {}).get("dev", [])}
    return runtime, dev


def _optional_lines(tree: ast.AST) -> set[int]:
    """Line numbers of imports guarded by `except ImportError` (or `ModuleNotFoundError`)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
        if caught & {"ImportError", "ModuleNotFoundError"}:
            for statement in node.body:
                for inner in ast.walk(statement):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        lines.add(inner.lineno)
    return lines


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, top-level name) of every absolute import in `path` that is not optional."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    optional = _optional_lines(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and node.lineno not in optional:
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.lineno not in optional:
                yield node.lineno, node.module.split(".")[0]


def _local_modules(path: Path, top: Path) -> set[str]:
    """Modules beside `path` or beside one of its folders up to `top`: an example project's own
    package (`examples/bugfix/invoicing`) or a script's helpers, importable by their name."""
    names: set[str] = set()
    for folder in (path.parent, *path.parent.parents):
        names |= {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
        if folder == top:
            break
    return names


def undeclared(root: Path = ROOT) -> list[str]:
    """One line per direct import of a third-party package its part of the tree does not declare."""
    runtime, dev = declared(root / "pyproject.toml")
    providers = {
        name: {_requirement_name(d) for d in dists}
        for name, dists in importlib.metadata.packages_distributions().items()
    }
    problems: list[str] = []
    for top in (*SHIPPED, *DEVELOPMENT):
        allowed = runtime if top in SHIPPED else runtime | dev
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root)
            if SKIP_DIRS.intersection(rel.parts) or rel.as_posix() in FOREIGN:
                continue
            local = _local_modules(path, root / top)
            for line, name in imports(path):
                if name in FIRST_PARTY or name in sys.stdlib_module_names or name in local:
                    continue
                dists = providers.get(name) or ({KNOWN[name]} if name in KNOWN else set())
                if not dists:
                    problems.append(f"{rel}:{line}: {name} (no installed distribution provides it)")
                elif not dists & allowed:
                    problems.append(f"{rel}:{line}: {name} ({', '.join(sorted(dists))})")
    return problems


def main() -> int:
    problems = undeclared()
    for problem in problems:
        print(problem)
    if problems:
        print(
            f"{len(problems)} import(s) of packages pyproject.toml does not declare: add each "
            "distribution to [project] dependencies (or the dev extra, for tests and tools)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
