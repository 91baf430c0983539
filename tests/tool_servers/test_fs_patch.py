"""apply_patch: a unified diff validated and applied atomically, with a dry run."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tool_servers.fs.server import build_fs_server

pytestmark = pytest.mark.anyio

GOOD_README = "--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n # demo\n+more text\n"
BAD_APP = "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a * b\n+    return b + a\n"


async def _patch(root: Path, patch: str, **kwargs: object) -> dict:
    with anyio.fail_after(10):
        async with Client(build_fs_server(root)) as client:
            result = await client.call_tool("apply_patch", {"patch": patch, **kwargs})
    return result.structured_content


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.parts and ".codeloop" not in p.parts
    }


async def test_a_patch_applies_every_hunk_across_files(repo: Path) -> None:
    """Modify, create and multi-hunk changes in one diff."""
    patch = (
        GOOD_README
        + "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+X = 1\n+Y = 2\n"
        + "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n-def add(a, b):\n+def add(a: int, b: int) -> int:\n"
        "     return a + b\n@@ -5,2 +5,2 @@\n def sub(a, b):\n-    return a - b\n+    return a + -b\n"
    )
    result = await _patch(repo, patch)
    assert result["applied"] is True
    assert {(f["path"], f["action"], f["hunks"]) for f in result["files"]} == {
        ("README.md", "modify", 1),
        ("src/new.py", "create", 1),
        ("src/app.py", "modify", 2),
    }
    assert (repo / "README.md").read_text() == "# demo\nmore text\n"
    assert (repo / "src" / "new.py").read_text() == "X = 1\nY = 2\n"
    assert (repo / "src" / "app.py").read_text().splitlines()[0] == "def add(a: int, b: int) -> int:"
    assert (repo / "src" / "app.py").read_text().splitlines()[-1] == "    return a + -b"


async def test_a_failing_hunk_leaves_every_file_untouched_and_is_named(repo: Path) -> None:
    """All hunks or none; the error names the hunk that does not apply and why."""
    before = _tree(repo)
    body = await _patch(repo, GOOD_README + BAD_APP)
    assert body["type"] == "conflict"
    assert body["details"]["path"] == "src/app.py" and body["details"]["hunk"] == 1
    assert "expected '    return a * b'" in body["details"]["reason"]
    assert "found '    return a + b'" in body["details"]["reason"]
    assert _tree(repo) == before


@pytest.mark.parametrize(
    "patch",
    [
        "",
        "this is not a diff\n",
        "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n # demo\n",
        GOOD_README + "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# x\n",
    ],
    ids=["empty", "prose", "short-hunk", "same-file-twice"],
)
async def test_a_malformed_patch_is_invalid_arguments_and_changes_nothing(repo: Path, patch: str) -> None:
    """A malformed patch leaves every file untouched."""
    before = _tree(repo)
    body = await _patch(repo, patch)
    assert body["type"] == "invalid_arguments", body
    assert _tree(repo) == before


async def test_a_dry_run_validates_without_writing(repo: Path) -> None:
    """Apply_patch has a dry run."""
    before = _tree(repo)
    ok = await _patch(repo, GOOD_README, dry_run=True)
    bad = await _patch(repo, BAD_APP, dry_run=True)
    assert ok["applied"] is False and ok["files"][0]["added"] == 1
    assert bad["type"] == "conflict"
    assert _tree(repo) == before


async def test_hunks_apply_at_an_offset_and_respect_missing_final_newlines(repo: Path) -> None:
    """Our choice, like `git apply`: exact context found near the stated line still applies; no fuzz."""
    (repo / "notes.txt").write_text("a\nb\nc\nlast")
    patch = (
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n c\n-last\n\\ No newline at end of file\n+final\n"
    )
    body = await _patch(repo, patch)
    assert body["applied"] is True
    assert (repo / "notes.txt").read_text() == "a\nb\nc\nfinal\n"


async def test_creating_an_existing_file_is_a_conflict(repo: Path) -> None:
    """Our contract: a diff from /dev/null must not overwrite a file."""
    body = await _patch(repo, "--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+new\n")
    assert body["type"] == "conflict"
    assert (repo / "README.md").read_text() == "# demo\n"


RENAME_APP = (
    "diff --git a/src/app.py b/src/calc.py\nsimilarity index 80%\nrename from src/app.py\nrename to src/calc.py\n"
    "--- a/src/app.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n-def add(a, b):\n+def add(a: int, b: int) -> int:\n"
    "     return a + b\n"
)


async def test_a_git_rename_moves_the_file_with_its_hunks_applied(repo: Path) -> None:
    """`git diff -M` output, as agents copy it: the file moves, the hunks apply to its content."""
    old = (repo / "src" / "app.py").read_text()
    result = await _patch(repo, RENAME_APP)
    assert result["files"] == [
        {
            "path": "src/calc.py",
            "action": "rename",
            "hunks": 1,
            "added": 1,
            "removed": 1,
            "renamed_from": "src/app.py",
        }
    ]
    assert not (repo / "src" / "app.py").exists()
    assert (repo / "src" / "calc.py").read_text() == old.replace(
        "def add(a, b):", "def add(a: int, b: int) -> int:"
    )


async def test_a_pure_rename_keeps_the_bytes(repo: Path) -> None:
    (repo / "data.bin").write_bytes(b"\x00\xff\r\nbinary-ish\x80")
    pure = "diff --git a/data.bin b/moved/data.bin\nsimilarity index 100%\nrename from data.bin\nrename to moved/data.bin\n"
    result = await _patch(repo, pure)
    assert result["applied"] is True and result["files"][0]["action"] == "rename"
    assert (repo / "moved" / "data.bin").read_bytes() == b"\x00\xff\r\nbinary-ish\x80"
    assert not (repo / "data.bin").exists()


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        (RENAME_APP.replace("src/calc.py", "README.md"), "conflict"),  # the target exists
        (RENAME_APP.replace("src/app.py", "src/gone.py"), "not_found"),
        (RENAME_APP.replace("-def add(a, b):", "-def add(x, y):"), "conflict"),  # a hunk fails
        (RENAME_APP.replace("src/calc.py", "../outside.py"), "permission_denied"),
        (
            RENAME_APP + BAD_APP.replace("return a * b", "return a + b"),
            "invalid_arguments",
        ),  # source changed twice
    ],
    ids=["target-exists", "no-source", "hunk-fails", "escapes-root", "source-twice"],
)
async def test_a_rename_that_cannot_apply_changes_nothing(repo: Path, patch: str, error: str) -> None:
    before = _tree(repo)
    body = await _patch(repo, GOOD_README + patch)
    assert body["type"] == error, body
    assert _tree(repo) == before


@pytest.mark.parametrize("diff_endings", ["\r\n", "\n"], ids=["crlf-diff", "lf-diff"])
async def test_a_crlf_file_keeps_its_line_endings(repo: Path, diff_endings: str) -> None:
    """A CRLF file (Windows checkouts) takes `git diff`'s CRLF hunks and an editor's LF hunks
    alike, and stays CRLF: nothing else of the file changes."""
    (repo / "win.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    e = diff_endings
    patch = f"--- a/win.txt\n+++ b/win.txt\n@@ -1,3 +1,3 @@\n alpha{e}-beta{e}+BETA{e} gamma{e}"
    result = await _patch(repo, patch)
    assert result.get("applied") is True, result
    assert (repo / "win.txt").read_bytes() == b"alpha\r\nBETA\r\ngamma\r\n"
