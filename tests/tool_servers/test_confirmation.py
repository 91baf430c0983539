"""Human confirmation: high-risk calls elicit; a client that cannot gets needs_confirmation."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.tool_servers.ts_helpers import Elicitor, stdio_params
from tool_servers.fs.server import build_fs_server

pytestmark = pytest.mark.anyio

DELETE_README = "--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# demo\n"
MODES = ["auto", "legacy"]  # 2026-07-28 (input_required round-trip) and the 2025-11-25 handshake


@pytest.mark.parametrize("mode", MODES)
async def test_an_approved_protected_write_asks_once_and_happens(repo: Path, mode: str) -> None:
    """A write to a protected path asks the user through MCP elicitation; approval lets it run."""
    elicitor = Elicitor("accept", approve=True)
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo), mode=mode, elicitation_callback=elicitor) as client:
            result = await client.call_tool(
                "write_file", {"path": ".github/workflows/ci.yml", "content": "on: push\n"}
            )
    assert not result.is_error, result.content
    assert len(elicitor.questions) == 1 and ".github/workflows/ci.yml" in elicitor.questions[0]
    assert (repo / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"


@pytest.mark.parametrize(("action", "approve"), [("decline", False), ("cancel", False), ("accept", False)])
@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_deletion_does_nothing(repo: Path, mode: str, action: str, approve: bool) -> None:
    """Deleting files asks first; decline, cancel or an unticked box leaves the file and is permission_denied."""
    elicitor = Elicitor(action, approve=approve)
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo), mode=mode, elicitation_callback=elicitor) as client:
            result = await client.call_tool("apply_patch", {"patch": DELETE_README})
    assert result.structured_content["type"] == "permission_denied"
    assert "delete README.md" in elicitor.questions[0]
    assert (repo / "README.md").read_text() == "# demo\n"


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_elicit_gets_needs_confirmation_describing_the_action(
    repo: Path, mode: str
) -> None:
    """A client without elicitation gets needs_confirmation describing what would happen; nothing happens."""
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo), mode=mode) as client:
            result = await client.call_tool("apply_patch", {"patch": DELETE_README})
    body = result.structured_content
    assert body["type"] == "needs_confirmation"
    assert body["details"]["action"] == "delete README.md" and body["details"]["tool"] == "apply_patch"
    assert (repo / "README.md").exists()


async def test_ordinary_calls_of_confirmable_tools_ask_nobody(repo: Path) -> None:
    """Our choice: only high-risk calls are confirmed; a normal write or a dry-run deletion runs directly."""
    elicitor = Elicitor("decline")
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo), elicitation_callback=elicitor) as client:
            write = await client.call_tool("write_file", {"path": "notes.md", "content": "x"})
            dry = await client.call_tool("apply_patch", {"patch": DELETE_README, "dry_run": True})
    assert not write.is_error and dry.structured_content["files"][0]["action"] == "delete"
    assert elicitor.questions == []


@pytest.mark.slow
async def test_elicitation_works_through_a_real_stdio_server_process(repo: Path) -> None:
    """The accepted path writes, the declined path does not."""
    for action, expect_written in (("decline", False), ("accept", True)):
        with anyio.fail_after(30):
            async with Client(
                stdio_params("fs", repo, "--scopes", "read,write"), elicitation_callback=Elicitor(action)
            ) as client:
                result = await client.call_tool("write_file", {"path": ".env", "content": "DEBUG=1\n"})
        assert result.is_error is (not expect_written), result.content
        assert (repo / ".env").exists() is expect_written


async def test_a_rename_asks_only_when_it_moves_a_protected_file(repo: Path) -> None:
    """A rename keeps the content, so it is not a deletion; moving a protected file away (here a
    CI workflow, which would stop it running) is asked like any change to it."""
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (repo / "notes.txt").write_text("n\n")

    def rename(source: str, target: str) -> str:
        return f"diff --git a/{source} b/{target}\nsimilarity index 100%\nrename from {source}\nrename to {target}\n"

    with anyio.fail_after(10):
        async with Client(build_fs_server(repo)) as client:
            plain = await client.call_tool("apply_patch", {"patch": rename("notes.txt", "docs/notes.txt")})
            protected = await client.call_tool(
                "apply_patch", {"patch": rename(".github/workflows/ci.yml", "ci.yml")}
            )
    assert plain.structured_content["applied"] is True and (repo / "docs" / "notes.txt").exists()
    body = protected.structured_content
    assert body["type"] == "needs_confirmation" and ".github/workflows/ci.yml" in body["details"]["action"]
    assert (repo / ".github" / "workflows" / "ci.yml").exists() and not (repo / "ci.yml").exists()
