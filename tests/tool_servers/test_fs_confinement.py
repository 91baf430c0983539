"""Confinement: every escape from the root is refused with nothing read or written."""

import os
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tool_servers.fs.server import build_fs_server

pytestmark = pytest.mark.anyio


def _escapes(repo: Path, outside: Path) -> list[tuple[str, dict]]:
    (repo / "link_out").symlink_to(outside)
    (repo / "dir_out").symlink_to(outside.parent, target_is_directory=True)
    rel_up = os.path.relpath(outside, repo)
    new_patch = "--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+pwned\n"
    return [
        ("read_file", {"path": rel_up}),
        ("read_file", {"path": str(outside)}),
        ("read_file", {"path": "link_out"}),
        ("read_file", {"path": f"dir_out/{outside.name}"}),
        ("read_file", {"path": "src/../../secret.txt"}),
        ("list_files", {"path": "dir_out"}),
        ("list_files", {"path": ".."}),
        ("write_file", {"path": rel_up, "content": "pwned"}),
        ("write_file", {"path": str(outside), "content": "pwned"}),
        ("write_file", {"path": "link_out", "content": "pwned"}),
        ("write_file", {"path": "dir_out/planted.txt", "content": "pwned"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "pwned"}),
        ("write_file", {"path": ".git/config", "content": "pwned"}),
        ("write_file", {"path": ".codeloop/audit.jsonl", "content": "pwned"}),
        ("write_file", {"path": "vendor/lib/.git/hooks/post-merge", "content": "pwned"}),
        ("apply_patch", {"patch": new_patch.format(p=rel_up.replace("secret", "planted"))}),
        ("apply_patch", {"patch": new_patch.format(p="dir_out/planted.txt")}),
        ("apply_patch", {"patch": new_patch.format(p=".git/hooks/post-checkout")}),
    ]


def _snapshot(*dirs: Path) -> dict[str, bytes]:
    files = {}
    for base in dirs:
        for path in base.rglob("*"):
            if path.is_file() and not path.is_symlink() and ".codeloop" not in path.parts:
                files[str(path)] = path.read_bytes()
    return files


async def test_every_confinement_escape_is_refused_with_nothing_read_or_written(
    repo: Path, outside: Path
) -> None:
    """No `..`, no absolute path outside, no symlink escape, no writes in .git/."""
    escapes = _escapes(repo, outside)
    before = _snapshot(outside.parent)
    with anyio.fail_after(20):
        async with Client(build_fs_server(repo)) as client:
            results = [(tool, args, await client.call_tool(tool, args)) for tool, args in escapes]
            listing = await client.call_tool("list_files", {"include_ignored": True})
    for tool, args, result in results:
        assert result.is_error, (tool, args)
        assert result.structured_content["type"] == "permission_denied", (
            tool,
            args,
            result.structured_content,
        )
        assert "TOP SECRET" not in result.model_dump_json(), (tool, args)
    assert _snapshot(outside.parent) == before
    assert not {"link_out", "dir_out/secret.txt"} & {f["path"] for f in listing.structured_content["files"]}
    assert not (outside.parent / "planted.txt").exists()
    assert not (repo / "vendor").exists()


async def test_symlinks_inside_the_root_still_work(repo: Path) -> None:
    """Our choice: a symlink that stays inside the root is followed like any path."""
    (repo / "alias.py").symlink_to(repo / "src" / "app.py")
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo)) as client:
            result = await client.call_tool("read_file", {"path": "alias.py"})
            absolute = await client.call_tool("read_file", {"path": str(repo / "README.md")})
    assert result.structured_content["content"].startswith("def add")
    assert absolute.structured_content["content"] == "# demo\n"
