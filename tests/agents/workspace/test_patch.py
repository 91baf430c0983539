"""The system-computed patch of a workspace, and `--apply` to the user's checkout, with real git."""

import os
import shutil
from pathlib import Path

import anyio
import pytest

from agents.workspace import (
    CheckoutChanged,
    Patch,
    PatchDoesNotApply,
    apply_to_checkout,
    capture_snapshot,
    materialize,
    workspace_patch,
)
from bus.connection import Bus
from tests.agents.workspace.conftest import GIT_ENV, git
from tests.agents.workspace.test_snapshot import hash_everything, tree_files
from tests.support.repos import dirty_repo

pytestmark = pytest.mark.anyio


def edit_workspace(dest: Path) -> None:
    """An edit, a new file, a deletion, a rename, a binary change and a mode change."""
    (dest / "src" / "app.py").write_text("def add(a, b):\n    return b + a\n")
    (dest / "src" / "new_test.py").write_text(
        "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (dest / "notes.txt").unlink()
    (dest / "docs").mkdir()
    shutil.move(dest / "README.md", dest / "docs" / "README.md")
    (dest / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\xff" * 50)
    (dest / ".gitignore").chmod(0o755)


def fresh_copy_of_original(repo: Path, into: Path) -> Path:
    """The user's tree as it was at capture, without its git history: what a reviewer starts from."""
    shutil.copytree(repo, into, ignore=shutil.ignore_patterns(".git", "debug.log", "build"), symlinks=True)
    return into


async def test_the_patch_applies_with_plain_git_apply_to_a_fresh_copy_of_the_original(
    bus: Bus, tmp_path: Path
) -> None:
    """The issue's acceptance: the patch applies with `git apply` to a fresh copy of the original tree,
    new, deleted, renamed, binary and mode changes included, and gives the workspace's tree."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        edit_workspace(dest)
        patch = await workspace_patch(dest)
    assert patch.files_changed == sorted(
        [
            ".gitignore",
            "README.md",
            "docs/README.md",
            "logo.png",
            "notes.txt",
            "src/app.py",
            "src/new_test.py",
        ]
    )
    assert "rename from README.md" in patch.diff and "GIT binary patch" in patch.diff
    assert "--- a/src/app.py\n+++ b/src/app.py" in patch.diff
    copy = fresh_copy_of_original(repo, tmp_path / "copy")
    await anyio.run_process(["git", "-C", str(copy), "apply", "-"], input=patch.diff.encode(), env=GIT_ENV)
    assert tree_files(copy) == tree_files(dest)
    assert os.access(copy / ".gitignore", os.X_OK)


async def test_the_patch_leaves_the_workspace_index_alone_and_is_empty_without_changes(
    bus: Bus, tmp_path: Path
) -> None:
    """The verifier and the git tool server see the workspace as the coder left it: unstaged."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        assert (await workspace_patch(dest)).diff == ""
        (dest / "fresh.txt").write_text("new\n")
        patch = await workspace_patch(dest)
    assert patch.files_changed == ["fresh.txt"]
    assert git(dest, "status", "--porcelain") == "?? fresh.txt\n"


async def test_apply_writes_the_patch_into_an_unchanged_checkout_without_committing(
    bus: Bus, tmp_path: Path
) -> None:
    """`codeloop run --apply`: the finished patch lands in the checkout, as uncommitted changes."""
    repo = dirty_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        edit_workspace(dest)
        patch = await workspace_patch(dest)
        await apply_to_checkout(repo, ref, patch.diff)
    expected = tree_files(dest)
    got = tree_files(repo)
    assert {path: got[path] for path in expected} == expected
    assert set(got) - set(expected) == {"debug.log", "build/out.bin"}  # ignored files untouched
    assert git(repo, "rev-parse", "HEAD") == head


async def test_apply_is_refused_when_the_checkout_changed_since_the_task_started(
    bus: Bus, tmp_path: Path
) -> None:
    """A patch made against another tree could land in the wrong place: refused, checkout untouched;
    once the checkout is back to the snapshot's tree, the same patch applies."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        edit_workspace(dest)
        patch = await workspace_patch(dest)
        (repo / "notes.txt").write_text("the user kept working\n")
        before = hash_everything(repo)
        with pytest.raises(CheckoutChanged, match="changed since the task started"):
            await apply_to_checkout(repo, ref, patch.diff)
        assert hash_everything(repo) == before
        (repo / "extra.txt").write_text("a new untracked file is a change too\n")
        (repo / "notes.txt").write_text("untracked, not ignored\n")
        with pytest.raises(CheckoutChanged):
            await apply_to_checkout(repo, ref, patch.diff)
        (repo / "extra.txt").unlink()
        (repo / "more.log").write_text("an ignored file is no change\n")
        await apply_to_checkout(repo, ref, patch.diff)
    assert (repo / "src" / "new_test.py").exists() and not (repo / "notes.txt").exists()


async def test_a_patch_that_does_not_apply_writes_nothing(bus: Bus, tmp_path: Path) -> None:
    """All or nothing: a patch whose second file fails leaves the first file as it was."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        (dest / "README.md").write_text("# demo, edited\n")
        (dest / "src" / "app.py").write_text("rewritten\n")
        patch = (await workspace_patch(dest)).diff
        broken = patch.replace("-    return a + b  # fixed, not committed", "-    return something else")
        assert broken != patch
        before = hash_everything(repo)
        with pytest.raises(PatchDoesNotApply, match="nothing was changed"):
            await apply_to_checkout(repo, ref, broken)
    assert hash_everything(repo) == before


async def test_a_snapshot_of_a_subdirectory_patches_that_subdirectory(bus: Bus, tmp_path: Path) -> None:
    """`--repo` may name a directory inside a repository; patch paths are relative to it."""
    repo = dirty_repo(tmp_path / "repo")
    sub = repo / "src"
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, sub)
        dest = await materialize(bus, ref, tmp_path / "work")
        assert set(tree_files(dest)) == {"app.py"}
        (dest / "app.py").write_text("patched\n")
        (dest / "extra.py").write_text("new\n")
        patch = await workspace_patch(dest)
        await apply_to_checkout(sub, ref, patch.diff)
    assert (sub / "app.py").read_text() == "patched\n" and (sub / "extra.py").read_text() == "new\n"
    assert not (repo / "app.py").exists()


async def test_apply_works_on_a_checkout_that_is_no_git_repository(bus: Bus, tmp_path: Path) -> None:
    """`git apply` outside a repository acts as `patch -p1`; binary hunks included."""
    repo = tmp_path / "plain"
    repo.mkdir()
    (repo / "a.txt").write_text("one\n")
    (repo / "b.bin").write_bytes(b"\0\1\2")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        (dest / "a.txt").write_text("two\n")
        (dest / "b.bin").write_bytes(b"\0\3\4\5")
        (dest / "c.txt").write_text("three\n")
        patch = await workspace_patch(dest)
        await apply_to_checkout(repo, ref, patch.diff)
    assert tree_files(repo) == tree_files(dest)


async def test_a_patch_of_a_file_that_is_not_utf8_travels_as_json_and_applies_byte_for_byte(
    bus: Bus, tmp_path: Path
) -> None:
    """Patches travel in JSON messages; a Latin-1 source file's change becomes a binary hunk that
    still restores every byte, while UTF-8 files in the same patch stay readable text hunks."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "latin1.py").write_bytes("# caf\xe9\nx = 1\n".encode("latin-1"))
    (repo / "plain.py").write_text("y = 1\n")
    git(repo, "init", "-q")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        (dest / "latin1.py").write_bytes("# caf\xe9 cr\xe8me\nx = 2\n".encode("latin-1"))
        (dest / "plain.py").write_text("y = 2\n")
        patch = await workspace_patch(dest)
        restored = Patch.model_validate_json(patch.model_dump_json())
        copy = fresh_copy_of_original(repo, tmp_path / "copy")
        await anyio.run_process(
            ["git", "-C", str(copy), "apply", "-"], input=restored.diff.encode(), env=GIT_ENV
        )
    assert "+y = 2" in patch.diff and "GIT binary patch" in patch.diff
    assert patch.files_changed == ["latin1.py", "plain.py"]
    assert tree_files(copy) == tree_files(dest)


async def test_a_same_size_rewrite_in_the_index_s_last_second_is_in_the_patch(
    bus: Bus, tmp_path: Path
) -> None:
    """A file rewritten at its old size with its old timestamp, as fast tools do within one
    second of the index's last write (the verifier applying and restoring a patch): git can tell
    it changed only by its racy-entry check, which must still see the index's own mtime."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        app = dest / "src" / "app.py"
        then = app.stat().st_mtime_ns - 10**10
        os.utime(app, ns=(then, then))  # old enough that the index records it as clean, not racy
        git(dest, "status", "--porcelain")  # writes the index with the file's stat data
        text = app.read_text()
        app.write_text(text.replace("+", "-"))  # same size, other content
        os.utime(app, ns=(then, then))  # same size and stat data as the index entry ...
        os.utime(dest / ".git" / "index", ns=(then, then))  # ... and the index written that instant
        patch = await workspace_patch(dest)
    assert patch.files_changed == ["src/app.py"]
