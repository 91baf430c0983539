"""The dependency direction (docs/architecture.md), checked on the import statements of every module."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codeloop", "bus", "agents", "tool_servers", "sandbox", "redaction", "layout")
# What each top-level package may import from the others (docs/architecture.md, "Dependency direction").
# `redaction` and `layout` are leaves every package may use: what a secret looks like, and what
# codeloop's directories are called, are each decided in one place.
ALLOWED = {
    "codeloop": {"bus", "agents", "tool_servers", "sandbox", "redaction", "layout"},
    "agents": {"bus", "redaction", "layout"},
    "tool_servers": {"sandbox", "redaction", "layout"},
    "bus": {"redaction", "layout"},
    "sandbox": {"redaction", "layout"},
    "redaction": set(),
    "layout": set(),
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


def _imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, by full dotted name (`from a import b` counts `a` and `a.b`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _imports_under(module: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules `module` imports that are one of `prefixes` or inside one."""
    return sorted(
        m for m in _imported_modules(ROOT / module) if any(m == p or m.startswith(p + ".") for p in prefixes)
    )


def _modules(package: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py"))


SERVERS = ("tool_servers.fs", "tool_servers.git", "tool_servers.exec", "tool_servers.search")
MCP = ("mcp", "mcp_types")


def test_only_the_search_server_speaks_mcp() -> None:
    """The code index and the embeddings are a library: only `search/server.py` knows MCP and the tool
    protocol, so `codeloop index`/`codeloop search` and the benchmarks use them without either."""
    offenders = {}
    for module in _modules("tool_servers/search"):
        if module == "tool_servers/search/server.py":
            continue
        bad = _imports_under(module, (*MCP, "tool_servers.protocol", "tool_servers.serve", *SERVERS[:3]))
        if bad:
            offenders[module] = bad
    assert offenders == {}


def test_the_embeddings_do_not_know_the_index() -> None:
    """Dependencies run index -> embedding: an encoder and its cache know nothing of chunks, stores
    or queries (nor of the server), so they load and test on their own."""
    offenders = {}
    for module in _modules("tool_servers/search/embedding"):
        bad = _imports_under(module, ("tool_servers.search.index", "tool_servers.search.server"))
        if bad:
            offenders[module] = bad
    assert offenders == {}


@pytest.mark.parametrize("server", SERVERS)
def test_a_server_does_not_import_another(server: str) -> None:
    """fs, git, exec and search share the protocol and the shared helpers (`confinement`,
    `secret_files`), never each other's code: each one is served, and can change, on its own."""
    others = tuple(s for s in SERVERS if s != server)
    offenders = {}
    for module in _modules(server.replace(".", "/")):
        bad = _imports_under(module, others)
        if bad:
            offenders[module] = bad
    assert offenders == {}


def test_the_protocol_imports_no_server() -> None:
    """The shared protocol is below every server: it imports none of them (nor `serve`, which names them)."""
    offenders = {}
    for module in _modules("tool_servers/protocol"):
        bad = _imports_under(module, (*SERVERS, "tool_servers.serve"))
        if bad:
            offenders[module] = bad
    assert offenders == {}
