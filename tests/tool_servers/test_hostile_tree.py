"""Hostile trees never break whole operations: fs, git and search over a repository holding a
non-UTF-8 name, a symlink loop, a FIFO, a socket and an unreadable file, through real MCP sessions."""

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.hostile import GOOD, LOOP, SPECIAL, UNREADABLE, make_hostile_repo
from tool_servers.fs.server import build_fs_server
from tool_servers.git.server import build_git_server
from tool_servers.search.embedding.embed import CachedEmbedder, load_embedder
from tool_servers.search.server import build_search_server

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> CachedEmbedder:
    return load_embedder(cache_dir=tmp_path_factory.mktemp("embedding-cache"))


async def _call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(60):
        return await client.call_tool(tool, args)


async def test_fs_lists_around_hostile_entries_and_reads_of_them_are_not_found(tmp_path: Path) -> None:
    """One bad entry used to fail list_files for the whole root (a symlink loop: 150 lines of
    traceback); now it lists what can be read, and reading a loop, FIFO or socket is not_found
    (a FIFO read would have blocked forever)."""
    repo = make_hostile_repo(tmp_path / "repo")
    async with Client(build_fs_server(repo)) as client:
        listing = await _call(client, "list_files", {"include_ignored": True})
        reads = {name: await _call(client, "read_file", {"path": name}) for name in [LOOP, *SPECIAL]}
        good = await _call(client, "read_file", {"path": GOOD})
    assert not listing.is_error, listing
    listed = {entry["path"] for entry in listing.structured_content["files"]}
    # As root the mode-000 file is readable, so it is listed; an unprivileged run is tested below.
    assert listed - {UNREADABLE} == {GOOD}
    for name, result in reads.items():
        assert result.is_error and result.structured_content["type"] == "not_found", (name, result)
    assert "find_the_good_function" in good.structured_content["content"]


async def test_git_status_and_commit_work_in_a_hostile_repository(tmp_path: Path) -> None:
    """git keeps working: status lists the untracked entries, a commit takes what git can store
    (FIFOs and sockets are not content) and reports its files."""
    repo = make_hostile_repo(tmp_path / "repo")
    async with Client(build_git_server(repo)) as client:
        status = await _call(client, "git_status", {})
        commit = await _call(client, "git_commit", {"branch": "codeloop/hostile", "message": "all of it"})
    assert not status.is_error, status
    untracked = {entry["path"] for entry in status.structured_content["entries"]}
    assert {LOOP, UNREADABLE} <= untracked and not set(SPECIAL) & untracked
    assert not commit.is_error, commit
    assert LOOP in commit.structured_content["files"] and not set(SPECIAL) & set(
        commit.structured_content["files"]
    )


async def test_a_hostile_repository_is_indexed_and_searched_with_each_skip_explained(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A non-UTF-8 name used to crash `index` and every `search_code` of the repository; now it
    is skipped with a reason, as are the FIFO and the socket, and the rest is searchable."""
    repo = make_hostile_repo(tmp_path / "repo")
    async with Client(build_search_server(repo, embedder=embedder)) as client:
        found = await _call(client, "search_code", {"query": "find the good function", "k": 3})
        status = await _call(client, "index_status", {})
    assert not status.is_error, status
    report = status.structured_content["last_update"]
    skipped = {entry["path"]: entry["reason"] for entry in report["skipped_files"]}
    assert skipped["bad\\xff.py"] == "name is not UTF-8"
    assert skipped["dir\\xfe/"] == "name is not UTF-8"
    for name, kind in SPECIAL.items():
        assert skipped[name] == f"not a regular file ({kind})"
    assert not found.is_error, found
    assert found.structured_content["hits"][0]["path"] == GOOD


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A directory an unprivileged user can reach (pytest's tmp dirs are root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="codeloop-hostile-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


UNPRIVILEGED_CHECK = """
import json, sys, anyio
from pathlib import Path
from mcp import Client
from tool_servers.fs.server import build_fs_server
from tool_servers.search.index.files import walk_repo

async def main(repo):
    async with Client(build_fs_server(repo)) as client:
        listing = await client.call_tool("list_files", {"include_ignored": True})
        read = await client.call_tool("read_file", {"path": "secret.py"})
    walked = {entry.path: getattr(entry, "reason", "indexed") for entry in walk_repo(repo)}
    print(json.dumps({
        "listed": [f["path"] for f in listing.structured_content["files"]],
        "read_error": read.structured_content.get("type") if read.is_error else None,
        "walked": walked,
    }))

anyio.run(main, Path(sys.argv[1]))
"""


async def test_an_unreadable_file_is_left_out_for_an_unprivileged_user(world_readable_dir: Path) -> None:
    """Where the mode-000 file really is unreadable (not as root), fs does not list it, reading it
    is permission_denied, and the index walker skips it with the reason."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the check as another user")
    repo = make_hostile_repo(world_readable_dir / "repo")
    done = await anyio.run_process(
        [
            setpriv,
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-c",
            UNPRIVILEGED_CHECK,
            str(repo),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(world_readable_dir)},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["listed"] == [GOOD]
    assert seen["read_error"] == "permission_denied"
    assert seen["walked"][UNREADABLE] == "unreadable (Permission denied)"
    assert seen["walked"][GOOD] == "indexed"
