"""The `git` server: read views, and commits only onto codeloop/<name> branches."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.tool_servers.ts_helpers import git
from tool_servers.git.server import build_git_server
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions

pytestmark = pytest.mark.anyio


async def _calls(root: Path, *calls: tuple[str, dict]) -> list[dict]:
    with anyio.fail_after(20):
        async with Client(build_git_server(root)) as client:
            return [(await client.call_tool(tool, args)).structured_content for tool, args in calls]


async def test_read_tools_describe_the_repository(repo: Path) -> None:
    """Git_status, git_diff, git_log, git_show, git_blame."""
    status, diff, log, show, blame = await _calls(
        repo,
        ("git_status", {}),
        ("git_diff", {}),
        ("git_log", {}),
        ("git_show", {"rev": "HEAD", "path": "src/app.py"}),
        ("git_blame", {"path": "src/app.py", "start_line": 1, "end_line": 2}),
    )
    assert status["branch"] == "main"
    assert {(e["path"], e["worktree"]) for e in status["entries"]} == {("src/app.py", "M")}
    assert diff["files"] == ["src/app.py"] and "+def sub(a, b):" in diff["diff"]
    assert [c["subject"] for c in log["commits"]] == ["initial commit"]
    assert show["content"] == "def add(a, b):\n    return a + b\n"
    assert [(line["line"], line["summary"]) for line in blame["lines"]] == [
        (1, "initial commit"),
        (2, "initial commit"),
    ]


async def test_revisions_that_look_like_options_or_do_not_exist_are_refused(repo: Path) -> None:
    """Our choice: a revision is checked before git sees it, so `--output=...` cannot become an option."""
    injected, missing = await _calls(
        repo, ("git_show", {"rev": "--output=/tmp/x"}), ("git_log", {"rev": "no-such-branch"})
    )
    assert injected["type"] == "invalid_arguments"
    assert missing["type"] == "not_found"


async def test_commit_goes_to_a_codeloop_branch_without_touching_head_or_the_index(repo: Path) -> None:
    """Under write scope, git_commit only onto a codeloop/<name> branch; the user's checkout stays as it was."""
    head = git(repo, "rev-parse", "HEAD")
    status = git(repo, "status", "--porcelain")
    refused, committed, again = await _calls(
        repo,
        ("git_commit", {"branch": "main", "message": "sneaky"}),
        ("git_commit", {"branch": "codeloop/add-sub", "message": "Add sub()"}),
        ("git_commit", {"branch": "codeloop/add-sub", "message": "nothing new"}),
    )
    assert refused["type"] == "permission_denied"
    assert committed["created_branch"] is True and committed["files"] == ["src/app.py"]
    assert git(repo, "rev-parse", "codeloop/add-sub").strip() == committed["sha"]
    assert git(repo, "log", "-1", "--format=%s%n%an", "codeloop/add-sub") == "Add sub()\ncodeloop (local)\n"
    assert again["type"] == "conflict"
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "branch", "--show-current") == "main\n"
    assert git(repo, "status", "--porcelain") == status


async def test_commit_of_selected_paths_builds_on_the_branch_tip(repo: Path) -> None:
    """Our contract: `paths` commits only those files; a second commit's parent is the branch tip."""
    (repo / "extra.txt").write_text("extra\n")
    first, second = await _calls(
        repo,
        ("git_commit", {"branch": "codeloop/x", "message": "one", "paths": ["extra.txt"]}),
        ("git_commit", {"branch": "codeloop/x", "message": "two", "paths": ["src/app.py"]}),
    )
    assert first["files"] == ["extra.txt"]
    assert second["parent"] == first["sha"] and second["files"] == ["src/app.py"]


async def test_a_read_only_git_server_hides_and_refuses_commit(repo: Path) -> None:
    """Git_commit needs the write scope."""
    with anyio.fail_after(10):
        async with Client(build_git_server(repo, ServerOptions(scopes=frozenset({Scope.READ})))) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("git_commit", {"branch": "codeloop/x", "message": "m"})
    assert "git_commit" not in names
    assert result.structured_content["details"]["missing_scope"] == "write"
    assert git(repo, "branch", "--list", "codeloop/*") == ""


async def test_git_tools_outside_a_repository_report_not_found(tmp_path: Path) -> None:
    """Our error contract: a root that is not in a git repository is `not_found`."""
    (tmp_path / "plain").mkdir()
    (result,) = await _calls(tmp_path / "plain", ("git_status", {}))
    assert result["type"] == "not_found"


async def test_a_root_below_the_repository_top_sees_paths_relative_to_itself(repo: Path) -> None:
    """Our contract: every path in and out is relative to the root, even when the root is a subdirectory."""
    (repo / "README.md").write_text("# changed outside the root\n")
    git(repo, "commit", "-qam", "touch both")
    (repo / "src" / "app.py").write_text("changed = True\n")
    (repo / "README.md").write_text("# changed again, outside the root\n")
    status, diff, show, commit = await _calls(
        repo / "src",
        ("git_status", {}),
        ("git_diff", {}),
        ("git_show", {"path": "app.py", "rev": "HEAD~1"}),
        ("git_show", {"rev": "HEAD"}),
    )
    assert [e["path"] for e in status["entries"]] == ["app.py"]
    assert diff["files"] == ["app.py"] and "README" not in diff["diff"]
    assert show["content"].startswith("def add")
    assert "diff --git a/app.py b/app.py" in commit["diff"] and "README" not in commit["diff"]
