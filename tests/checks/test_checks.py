"""The checks of `make lint` fail on what they exist to catch, run on a temporary copy or a
temporary file, never on the real tree: a planted upward import breaks the import contracts, a
planted type error fails the type check, and each check passes the same input without the plant
(so the failure is the plant's)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PACKAGES = ("codeloop", "agents", "bus", "tool_servers", "sandbox", "redaction", "layout")

pytestmark = pytest.mark.slow


def _copy_of_the_packages(into: Path) -> Path:
    """The packages and pyproject.toml (which holds the contracts) under `into`."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__", "node_modules")
        )
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    # The copy first on the path: its packages are the ones the contracts are checked on.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_each_planted_breach_of_the_import_contracts_is_reported_naming_it(tmp_path: Path) -> None:
    """One copy, checked clean, then with three plants (each breaks another contract, so each is
    reported): an upward import into bus, a tool server importing another, and a stage kind
    importing a role beside a module under agents/ that no layer names (docs/architecture.md,
    "Inside agents": stage kinds and roles meet only in `agents.messages`)."""
    tree = _copy_of_the_packages(tmp_path / "tree")
    clean = _lint_imports(tree)
    assert clean.returncode == 0, clean.stdout[-2000:] + clean.stderr[-2000:]

    # bus may import only the leaves: an import of the CLI's configuration is upward.
    (tree / "bus" / "planted.py").write_text(
        '"""Planted by the test."""\n\nfrom codeloop.config import errors\n'
    )
    (tree / "tool_servers" / "tasks" / "planted.py").write_text(
        '"""Planted."""\n\nimport tool_servers.fs.server\n'
    )
    (tree / "agents" / "orchestrator" / "stages" / "planted.py").write_text(
        '"""Planted."""\n\nimport agents.roles.coder\n'
    )
    (tree / "agents" / "planted.py").write_text('"""Planted: no layer names it."""\n')
    broken = _lint_imports(tree)
    assert broken.returncode != 0
    report = broken.stdout
    assert "BROKEN" in report and "bus.planted -> codeloop.config" in report, report[-3000:]
    assert "no tool server imports another BROKEN" in report, report[-3000:]
    assert "agents.orchestrator.stages.planted -> agents.roles.coder" in report, report[-3000:]
    assert "not listed as layers:\n\n- agents.planted" in report, report[-3000:]


def _make(target: str, pyright_files: Path, *, dry_run: bool = False) -> subprocess.CompletedProcess[str]:
    """`make TARGET` with the type check narrowed to one file (`-n`: only print the commands)."""
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            *(["-n"] if dry_run else []),
            target,
            f"PYRIGHT_FILES={pyright_files}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_type_error_fails_the_type_check_of_make_lint_and_the_same_file_without_it_passes(
    tmp_path: Path,
) -> None:
    """`make lint` runs the type check (`make typecheck`, after the rules: its commands are among
    lint's), and the type check fails on a planted type error and passes the same file without it.
    The rules themselves run on the real tree in every `make test`."""
    checked = tmp_path / "planted.py"
    planned = _make("lint", checked, dry_run=True)
    assert planned.returncode == 0, planned.stderr
    assert f"basedpyright {checked}" in planned.stdout and "lint-imports" in planned.stdout, planned.stdout

    checked.write_text("def half(n: int) -> float:\n    return n / 2\n\n\nhalf(3)\n")
    clean = _make("typecheck", checked)
    assert clean.returncode == 0, clean.stdout[-2000:] + clean.stderr[-2000:]

    checked.write_text('def half(n: int) -> float:\n    return n / 2\n\n\nhalf("three")\n')
    broken = _make("typecheck", checked)
    assert broken.returncode != 0
    assert "planted.py:5" in broken.stdout and "reportArgumentType" in broken.stdout, broken.stdout[-2000:]
