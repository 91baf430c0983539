"""The workspace mirror's synchronisation (sandbox/workspace.py): what changed on one side, and
only that, reaches the other, deletions and symlinks included."""

import os
from pathlib import Path

import pytest

from sandbox.workspace import WorkspaceMirror, apply_changes, snapshot


def test_changes_deletions_and_symlinks_reach_the_other_side(tmp_path: Path) -> None:
    """Our design: snapshots of (kind, size, mtime) decide what is copied; links are copied as links."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "pkg").mkdir()
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "gone.txt").write_text("bye")
    (src / "link").symlink_to("/etc/hostname")
    before = snapshot(src)
    apply_changes(src, dst, {}, before)
    assert (dst / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert os.readlink(dst / "link") == "/etc/hostname"

    (src / "pkg" / "mod.py").write_text("x = 22\n")
    (src / "gone.txt").unlink()
    (src / "pkg" / "new").mkdir()
    (src / "pkg" / "new" / "f.txt").write_text("new")
    after = snapshot(src)
    touched = apply_changes(src, dst, before, after)
    assert (dst / "pkg" / "mod.py").read_text() == "x = 22\n"
    assert not (dst / "gone.txt").exists()
    assert (dst / "pkg" / "new" / "f.txt").read_text() == "new"
    assert set(touched) == {"pkg/mod.py", "gone.txt", "pkg/new", "pkg/new/f.txt"}


def test_a_directory_replaced_by_a_file_is_replaced_on_the_other_side(tmp_path: Path) -> None:
    """Our design: a path that changed kind is removed first, then copied."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "thing").mkdir(parents=True)
    (src / "thing" / "inner").write_text("1")
    dst.mkdir()
    before = snapshot(src)
    apply_changes(src, dst, {}, before)
    (src / "thing" / "inner").unlink()
    (src / "thing").rmdir()
    (src / "thing").write_text("now a file")
    apply_changes(src, dst, before, snapshot(src))
    assert (dst / "thing").read_text() == "now a file"


def test_a_host_edit_made_while_a_command_runs_reaches_the_next_command(tmp_path: Path) -> None:
    """Our design: copying a command's writes back must not swallow host edits made meanwhile."""
    if os.geteuid() != 0:
        pytest.skip("the mirror mounts a tmpfs, which needs root")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a")
    mirror = WorkspaceMirror(workspace, tmp_path / "mirror", write_cap_mb=1)
    mirror.open()
    try:
        mirror.before_command()
        (mirror.path / "from_command.txt").write_text("cmd")  # the command writes...
        (workspace / "from_host.txt").write_text("host")  # ...while a host tool edits
        mirror.after_command()
        assert (workspace / "from_command.txt").read_text() == "cmd"
        mirror.before_command()
        assert (mirror.path / "from_host.txt").read_text() == "host"
    finally:
        mirror.close()
    assert not os.path.ismount(tmp_path / "mirror")


def test_an_unmirrored_directory_is_neither_copied_in_nor_synced_either_way(tmp_path: Path) -> None:
    """Our design: a workspace virtualenv is left out of the mirror (it is bound from the host
    instead); the mirror holds only an empty mount point, and no sync crosses it."""
    if os.geteuid() != 0:
        pytest.skip("the mirror mounts a tmpfs, which needs root")
    workspace = tmp_path / "ws"
    (workspace / ".venv" / "lib").mkdir(parents=True)
    (workspace / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workspace / "a.txt").write_text("a")
    mirror = WorkspaceMirror(workspace, tmp_path / "mirror", write_cap_mb=1, unmirrored=frozenset({".venv"}))
    mirror.open()
    try:
        assert (mirror.path / "a.txt").read_text() == "a"
        assert list((mirror.path / ".venv").iterdir()) == []
        (workspace / ".venv" / "lib" / "host_edit.py").write_text("x")
        mirror.before_command()
        assert list((mirror.path / ".venv").iterdir()) == []
        (mirror.path / ".venv" / "from_command.txt").write_text("cmd")
        mirror.after_command()
        assert sorted(p.name for p in (workspace / ".venv").iterdir()) == ["lib", "pyvenv.cfg"]
    finally:
        mirror.close()
