"""The dependency direction (docs/architecture.md), checked on the import statements of every module."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codeloop", "bus", "agents", "tool_servers", "sandbox", "redaction")
# What each top-level package may import from the others (docs/architecture.md, "Dependency direction").
# `redaction` is a leaf every package may use: what a secret looks like is decided in one place.
ALLOWED = {
    "codeloop": {"bus", "agents", "tool_servers", "sandbox", "redaction"},
    "agents": {"bus", "redaction"},
    "tool_servers": {"sandbox", "redaction"},
    "bus": {"redaction"},
    "sandbox": {"redaction"},
    "redaction": set(),
}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_what_the_design_allows(package: str) -> None:
    """codeloop -> agents -> bus, tool_servers -> sandbox; bus and sandbox import no sibling but redaction."""
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imported_packages(path) - ALLOWED[package] - {package}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_nothing_imports_codeloop() -> None:
    """Only the composition root knows every package; no package imports it back."""
    for package in PACKAGES[1:]:
        for path in (ROOT / package).rglob("*.py"):
            assert "codeloop" not in _imported_packages(path), path
