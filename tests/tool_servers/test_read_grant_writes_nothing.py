"""Under a `read` grant a tool server changes nothing under its root, whatever a client sends.

Each server runs as a real `codeloop mcp` process, over stdio and over streamable HTTP, on a
repository whose every file and directory (`.git/` included) is hashed before and after a session
of valid, invalid, malformed and escaping calls. The audit log is in the codeloop home, 0600, and
its chain verifies.
"""

import hashlib
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from codeloop.config.environment import root_home
from tests.tool_servers.ts_helpers import git, http_server, stdio_params
from tool_servers.protocol.audit import verify_log

pytestmark = pytest.mark.anyio
TOKEN = "read-grant-token-5d2c8e1f"

CALLS: dict[str, list[tuple[str, Any]]] = {
    "fs": [
        ("list_files", {}),
        ("list_files", {"include_ignored": True, "pattern": "**/*"}),
        ("read_file", {"path": "README.md"}),
        ("read_file", {"path": "missing.txt"}),
        ("read_file", {"path": ".env"}),
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "link-out/secret.txt"}),
        ("read_file", {"path": 42}),
        ("write_file", {"path": "README.md", "content": "overwritten"}),
        ("write_file", {"path": ".codeloop/audit.jsonl", "content": "forged"}),
        ("apply_patch", {"patch": "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# pwned\n"}),
        ("no_such_tool", {}),
    ],
    "git": [
        ("git_status", {}),
        ("git_log", {}),
        ("git_diff", {}),
        ("git_show", {"rev": "HEAD"}),
        ("git_show", {"rev": "HEAD", "path": ".env"}),
        ("git_show", {"rev": "--output=/tmp/pwned"}),
        ("git_blame", {"path": "src/app.py"}),
        ("git_blame", {"path": "../outside.txt"}),
        ("git_log", {"max_count": "many"}),
        ("git_commit", {"branch": "codeloop/x", "message": "m"}),
        ("git_commit", {"branch": "main", "message": "m"}),
    ],
    "search": [
        ("search_code", {"query": "add two numbers"}),
        ("find_symbol", {"name": "add"}),
        ("repo_map", {}),
        ("index_status", {}),
        ("search_code", {"query": "x", "k": 0}),
        ("search_code", {"query": "the of and"}),
        ("find_symbol", {"name": ""}),
    ],
    "exec": [
        ("run_command", {"argv": ["touch", "pwned"]}),
        ("run_tests", {}),
        ("run_static_checks", {"paths": ["."]}),
        ("run_command", {"argv": []}),
    ],
}


def tree_digest(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under `root`, not following links: kind, mode, mtime and content hash (files),
    target (links), mtime and entries (directories, so a created-and-removed file shows)."""
    found: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        st = here.lstat()
        found[str(here.relative_to(root))] = ("d", st.st_mode, st.st_mtime_ns, sorted(dirnames + filenames))
        for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            path = here / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("l", os.readlink(path))
            else:
                found[rel] = ("f", st.st_mode, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


@pytest.fixture
def guarded_repo(tmp_path: Path) -> Path:
    """A repository with history, an uncommitted change, an ignored file, a secrets file and a
    symlink leading out of it."""
    root = tmp_path / "guarded"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / "README.md").write_text("# demo\n")
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text(
        "from src.app import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    (root / "src" / "app.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    (root / "debug.log").write_text("ignored\n")
    (root / ".env").write_text("OPENAI_API_KEY=sk-test-123456\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET\n")
    (root / "link-out").symlink_to(tmp_path / "outside")
    (tmp_path / "outside.txt").write_text("outside\n")
    return root


@asynccontextmanager
async def session(server: str, transport: str, root: Path, tmp_path: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client(stdio_params(server, root, "--scopes", "read")) as client:
            yield client
        return
    token_file = tmp_path / "tokens"
    token_file.write_text(f"{TOKEN} reader read,write,execute\n")
    token_file.chmod(0o600)
    async with http_server(server, root, token_file, "--scopes", "read") as url:
        # A long read timeout: the first search call loads the model before it answers.
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0)) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield client


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("server", ["fs", "git", "search", "exec"])
@pytest.mark.slow
async def test_a_read_grant_changes_nothing_under_the_root(
    guarded_repo: Path, tmp_path: Path, server: str, transport: str
) -> None:
    """Nothing under the root changes (no audit log, no index, no .gitignore, no git index
    refresh); the audit log is in the home, 0600, one record per call, chain intact."""
    before = tree_digest(guarded_repo)
    outcomes = []
    with anyio.fail_after(240):
        async with session(server, transport, guarded_repo, tmp_path) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            for name, args in CALLS[server]:
                result = await client.call_tool(name, args)
                outcomes.append((name, result.is_error))
    assert tree_digest(guarded_repo) == before
    assert not (tmp_path / "pwned").exists()
    assert all(name not in listed for name in ("write_file", "apply_patch", "git_commit", "run_command"))
    # The valid calls ran; every exec tool needs the execute scope, so under a read grant all are refused.
    ran = [name for name, failed in outcomes if not failed]
    assert bool(ran) == (server != "exec"), outcomes
    log = root_home(guarded_repo) / "audit.jsonl"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    report = verify_log(log)
    assert report.ok, report.problems
    assert report.records >= len(CALLS[server])
