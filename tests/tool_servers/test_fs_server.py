"""The `fs` server: listing, reading, writing, patching under a root."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.tool_servers.ts_helpers import git
from tool_servers.fs.server import build_fs_server

pytestmark = pytest.mark.anyio


async def _call(root: Path, tool: str, args: dict) -> dict:
    with anyio.fail_after(10):
        async with Client(build_fs_server(root)) as client:
            result = await client.call_tool(tool, args)
    return result.structured_content


async def test_list_files_skips_what_gitignore_ignores_and_the_git_dir(repo: Path) -> None:
    """List_files skips what .gitignore ignores (and never lists .git/)."""
    listed = {f["path"] for f in (await _call(repo, "list_files", {}))["files"]}
    assert listed == {".gitignore", "README.md", "src/app.py"}
    everything = {f["path"] for f in (await _call(repo, "list_files", {"include_ignored": True}))["files"]}
    assert {"build/out.txt", "debug.log"} <= everything
    assert not any(p.startswith(".git/") for p in everything)


async def test_list_files_applies_nested_gitignores_and_globs(repo: Path) -> None:
    """Glob patterns; a .gitignore in a subdirectory applies below it."""
    (repo / "src" / ".gitignore").write_text("generated_*.py\ncache/\n")
    (repo / "src" / "generated_x.py").write_text("x = 1\n")
    (repo / "src" / "cache").mkdir()
    (repo / "src" / "cache" / "c.py").write_text("c = 0\n")
    (repo / "src" / "pkg").mkdir()
    (repo / "src" / "pkg" / "mod.py").write_text("y = 2\n")
    (repo / "src" / "pkg" / "generated_y.py").write_text("y = 3\n")
    deep = {f["path"] for f in (await _call(repo, "list_files", {"pattern": "**/*.py"}))["files"]}
    top = {f["path"] for f in (await _call(repo, "list_files", {"pattern": "*.py", "path": "src"}))["files"]}
    below = {f["path"] for f in (await _call(repo, "list_files", {"path": "src/pkg"}))["files"]}
    assert deep == {"src/app.py", "src/pkg/mod.py"}
    assert top == {"src/app.py"}
    assert below == {"src/pkg/mod.py"}


async def test_list_files_lists_what_git_lists_where_a_deeper_gitignore_re_includes(repo: Path) -> None:
    """Git's rule order: a nested `!keep.log` re-includes a file the root's `*.log` ignores, and
    `!*/` re-includes directories an outer `*` ignored; nothing inside an ignored directory comes back."""
    (repo / "src" / ".gitignore").write_text("!keep.log\n")
    (repo / "src" / "keep.log").write_text("kept\n")
    (repo / "src" / "drop.log").write_text("ignored\n")
    (repo / "build" / ".gitignore").write_text("!out.txt\n")  # in an ignored directory: never read
    (repo / "only_py").mkdir()
    (repo / "only_py" / ".gitignore").write_text("*\n!*/\n!*.py\n")
    (repo / "only_py" / "pkg").mkdir()
    (repo / "only_py" / "pkg" / "m.py").write_text("m = 1\n")
    (repo / "only_py" / "pkg" / "notes.txt").write_text("ignored\n")
    listed = {f["path"] for f in (await _call(repo, "list_files", {}))["files"]}
    git_lists = git(repo, "ls-files", "--cached", "--others", "--exclude-standard").split()
    assert {"src/keep.log", "only_py/pkg/m.py"} <= listed
    assert not {"src/drop.log", "build/out.txt", "only_py/pkg/notes.txt"} & listed
    assert listed == set(git_lists)


async def test_list_files_reports_truncation_at_the_limit(repo: Path) -> None:
    """Our contract: `limit` caps the listing and says so."""
    result = await _call(repo, "list_files", {"limit": 2})
    assert len(result["files"]) == 2 and result["truncated"] is True


async def test_read_file_returns_the_requested_line_range(repo: Path) -> None:
    """Read_file with line ranges."""
    result = await _call(repo, "read_file", {"path": "src/app.py", "start_line": 5, "end_line": 6})
    assert result["content"] == "def sub(a, b):\n    return a - b\n"
    assert (result["start_line"], result["end_line"], result["total_lines"]) == (5, 6, 6)


async def test_read_file_cuts_at_the_size_cap_on_a_line_boundary(repo: Path) -> None:
    """Size caps; the result says it was truncated."""
    (repo / "big.txt").write_text("".join(f"line {i}\n" for i in range(1000)))
    result = await _call(repo, "read_file", {"path": "big.txt", "max_bytes": 20})
    assert result["content"] == "line 0\nline 1\n"
    assert result["truncated"] is True and result["end_line"] == 2


async def test_read_file_reports_undecodable_content_instead_of_garbage(repo: Path) -> None:
    """Undecodable content is reported."""
    (repo / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    result = await _call(repo, "read_file", {"path": "blob.bin"})
    assert result["decodable"] is False and result["content"] == "" and result["size"] == 11


async def test_read_file_of_a_missing_file_is_not_found(repo: Path) -> None:
    """Our error contract: a missing file is `not_found` with the path in details."""
    result = await _call(repo, "read_file", {"path": "nope.txt"})
    assert result["type"] == "not_found" and result["details"]["path"] == "nope.txt"


async def test_write_file_creates_parents_and_replaces_atomically(repo: Path) -> None:
    """Write_file; the file is replaced whole, with no temp files left behind."""
    created = await _call(repo, "write_file", {"path": "docs/new.md", "content": "hello\n"})
    replaced = await _call(repo, "write_file", {"path": "docs/new.md", "content": "bye\n"})
    assert created == {"path": "docs/new.md", "bytes_written": 6, "created": True}
    assert replaced["created"] is False
    assert (repo / "docs" / "new.md").read_text() == "bye\n"
    assert [p.name for p in (repo / "docs").iterdir()] == ["new.md"]
