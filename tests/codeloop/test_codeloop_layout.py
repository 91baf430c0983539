"""codeloop's own layering (codeloop/cli/__init__.py, codeloop/wiring/__init__.py): the command line
on top, the composition root below it, the services and the configuration under both; and the
size rules every module keeps (functions that fit a screen, few parameters)."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "codeloop"
# What each part of codeloop may import of the others (anything else of codeloop is a leaf:
# errors, observe, evaluation, testing).
MAY_NOT_IMPORT = {
    "config": ("codeloop.cli", "codeloop.services", "codeloop.wiring"),
    "services": ("codeloop.cli", "codeloop.wiring"),
    "wiring": ("codeloop.cli",),
    "evaluation": ("codeloop.cli",),
    "observe": ("codeloop.cli",),
    "console": ("codeloop.cli", "codeloop.wiring"),
    # A feature, not a second composition root: the command line starts what it runs on.
    "swebench": ("codeloop.cli", "codeloop.wiring"),
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("part", sorted(MAY_NOT_IMPORT))
def test_a_part_of_codeloop_imports_nothing_above_it(part: str) -> None:
    """Our layering: nothing below the command line imports it; the services and the
    configuration know nothing of the composition root that puts them together."""
    forbidden = MAY_NOT_IMPORT[part]
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in _imports(path) if m.startswith(forbidden))
        for path in sorted((PACKAGE / part).rglob("*.py"))
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}


def test_the_composition_root_names_no_feature() -> None:
    """Our layering (codeloop/wiring/process.py): `serve` runs the services the command line gives
    it; a feature (SWE-bench) brings its own and is never named by the wiring."""
    naming = [
        str(path.relative_to(ROOT))
        for path in sorted((PACKAGE / "wiring").rglob("*.py"))
        if "swebench" in path.read_text().lower().replace("-", "")
    ]
    assert naming == []


def test_the_command_line_loads_no_heavy_package_before_a_command_runs() -> None:
    """Our choice (codeloop/cli/__init__.py): `codeloop --help` builds every command without
    importing the agents, the bus, nats, mcp, torch or lancedb. The bus's error types are the one
    exception: `bus/errors.py` imports nothing, and the commands name them in `except` clauses."""
    heavy = ("agents", "bus", "nats", "mcp", "torch", "lancedb", "pydantic_ai", "codeloop.wiring")
    light = {"bus", "bus.errors"}
    code = "import sys, codeloop.cli; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    modules = [m for m in loaded.split() if m not in light]
    assert [m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)] == []


def test_functions_fit_a_screen_and_take_few_parameters() -> None:
    """The project's rule, as `make lint` applies it (scripts/check_sizes.py): no function over
    120 lines, none with more than 10 parameters but a command whose parameters are its options."""
    spec = importlib.util.spec_from_file_location("check_sizes", ROOT / "scripts" / "check_sizes.py")
    assert spec is not None and spec.loader is not None
    sizes = importlib.util.module_from_spec(spec)
    sys.modules["check_sizes"] = sizes  # dataclasses look their module up while the class is made
    spec.loader.exec_module(sizes)
    too_big = [str(o) for path in sorted(PACKAGE.rglob("*.py")) for o in sizes.check_file(path, ROOT)]
    assert too_big == []
