"""Capturing a working tree into the object store and materialising it elsewhere, against a real
nats-server and real git."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import anyio
import pytest
from nats.js.object_store import ObjectStore

from agents.workspace import (
    SnapshotTooLarge,
    SnapshotUnavailable,
    WorkspaceError,
    capture_snapshot,
    materialize,
    workspace_patch,
)
from agents.workspace.artifacts import Artifacts
from agents.workspace.manifest import MODE_FILE, Entry, Scan
from agents.workspace.snapshot import SnapshotRef, read_manifest
from bus.connection import Bus
from bus.subjects import ARTIFACTS_BUCKET
from tests.agents.workspace.conftest import git
from tests.support.repos import dirty_repo

pytestmark = pytest.mark.anyio


def tree_files(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` outside `.git`, path -> bytes."""
    out = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts[0] == ".git" or path.is_symlink() or not path.is_file():
            continue
        out[rel.as_posix()] = path.read_bytes()
    return out


async def test_snapshot_holds_uncommitted_and_untracked_files_but_not_ignored_ones(
    bus: Bus, tmp_path: Path
) -> None:
    """The design's capture rule: tracked and untracked files git does not ignore, uncommitted changes
    included; a tracked file deleted in the working tree is not there."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
    files = tree_files(dest)
    assert set(files) == {".gitignore", "README.md", "notes.txt", "src/app.py"}
    assert b"a + b" in files["src/app.py"]
    assert ref.files == 4 and ref.bytes == sum(len(data) for data in files.values())
    assert ref.git_head == git(repo, "rev-parse", "HEAD").strip()
    assert ref.source_path == str(repo.resolve())


async def test_workspace_is_a_git_repository_whose_head_is_exactly_the_snapshot(
    bus: Bus, tmp_path: Path
) -> None:
    """Our contract with the verifier and the git tool server: HEAD is the starting tree, the work tree
    is clean against it, no hooks, a fixed author, and the same snapshot gives the same commit."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        first = await materialize(bus, ref, tmp_path / "one")
        second = await materialize(bus, ref, tmp_path / "two")
    assert git(first, "status", "--porcelain") == ""
    assert sorted(git(first, "ls-files").split()) == [".gitignore", "README.md", "notes.txt", "src/app.py"]
    assert git(first, "log", "--format=%an <%ae>").strip() == "codeloop <codeloop@localhost>"
    assert git(first, "rev-parse", "HEAD") == git(second, "rev-parse", "HEAD")
    assert not (first / ".git" / "hooks").exists()
    # A later python run's bytecode is no change of the tree.
    (first / "src" / "__pycache__").mkdir()
    (first / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0")
    assert git(first, "status", "--porcelain") == ""


async def test_a_worker_without_the_users_path_materializes_from_the_object_store(
    bus: Bus, tmp_path: Path
) -> None:
    """The design: a worker on a machine that never had the user's path builds the same tree (here the
    original is moved away after capture)."""
    repo = dirty_repo(tmp_path / "repo")
    expected = tree_files(repo)
    del expected["debug.log"], expected["build/out.bin"]
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        shutil.move(repo, tmp_path / "elsewhere")
        dest = await materialize(bus, ref, tmp_path / "work")
    assert tree_files(dest) == expected


async def test_a_local_file_that_changed_after_capture_is_taken_from_the_object_store(
    bus: Bus, tmp_path: Path
) -> None:
    """The same-machine shortcut copies a file only when it still has the manifest's digest."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        (repo / "README.md").write_text("edited after submission\n")
        dest = await materialize(bus, ref, tmp_path / "work")
    assert (dest / "README.md").read_text() == "# demo\n"


async def test_binary_files_and_the_executable_bit_survive(bus: Bus, tmp_path: Path) -> None:
    """Snapshots are byte-exact: NUL and high bytes, a file over one object-store chunk, a mode."""
    repo = tmp_path / "repo"
    repo.mkdir()
    blob = bytes(range(256)) * 4
    big = os.urandom(300 * 1024)  # three 128 KiB chunks
    (repo / "data.bin").write_bytes(blob)
    (repo / "big.bin").write_bytes(big)
    (repo / "empty").write_bytes(b"")
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "run.sh").chmod(0o755)
    git(repo, "init", "-q")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        shutil.rmtree(repo)
        dest = await materialize(bus, ref, tmp_path / "work")
    assert (dest / "data.bin").read_bytes() == blob
    assert (dest / "big.bin").read_bytes() == big
    assert (dest / "empty").read_bytes() == b""
    assert os.access(dest / "run.sh", os.X_OK) and not os.access(dest / "data.bin", os.X_OK)
    assert "100755 " in git(dest, "ls-files", "-s", "run.sh")


async def test_symlinks_inside_the_tree_stay_links_and_links_leaving_it_are_skipped_with_a_reason(
    bus: Bus, tmp_path: Path
) -> None:
    """A link out of the tree would let a workspace read or write the worker's files."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "guide.md").write_text("guide\n")
    (repo / "guide").symlink_to("docs/guide.md")
    (repo / "docs" / "up").symlink_to("../docs")
    (repo / "passwd").symlink_to("/etc/passwd")
    (repo / "docs" / "escape").symlink_to("../../outside")
    git(repo, "init", "-q")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
    assert os.readlink(dest / "guide") == "docs/guide.md"
    assert (dest / "guide").read_text() == "guide\n"
    assert os.readlink(dest / "docs" / "up") == "../docs"
    assert not (dest / "passwd").is_symlink() and not (dest / "docs" / "escape").is_symlink()
    reasons = {item.path: item.reason for item in ref.skipped}
    assert set(reasons) == {"passwd", "docs/escape"} and ref.skipped_count == 2
    assert "leaves the tree" in reasons["passwd"] and "leaves the tree" in reasons["docs/escape"]


async def test_a_directory_that_is_no_repository_is_walked_without_git_virtualenvs_and_caches(
    bus: Bus, tmp_path: Path
) -> None:
    """Our capture rule outside git: everything but `.git`, `.codeloop`, virtualenvs and `__pycache__`."""
    repo = tmp_path / "plain"
    for rel in [
        "main.py",
        "pkg/mod.py",
        "pkg/__pycache__/mod.pyc",
        "env/pyvenv.cfg",
        "env/lib/x.py",
        ".codeloop/state",
        "sub/.git/HEAD",
    ]:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel)
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
    assert set(tree_files(dest)) == {"main.py", "pkg/mod.py"}
    assert ref.git_head is None


async def test_a_virtualenv_and_caches_git_does_not_ignore_stay_out_of_the_snapshot_and_are_named(
    bus: Bus, tmp_path: Path
) -> None:
    """Our choice: a `.venv` missing from `.gitignore` is a machine's installed packages, not the
    project; it is left out and named once, while what git tracks (even in a cache) goes along."""
    repo = tmp_path / "repo"
    for rel in [
        "main.py",
        ".venv/pyvenv.cfg",
        ".venv/lib/python3.11/site-packages/big.py",
        "tools/env/pyvenv.cfg",
        "tools/env/bin/python",
        "tools/run.py",
        ".pytest_cache/v/cache/lastfailed",
        "fixtures/__pycache__/kept.pyc",
    ]:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel)
    git(repo, "init", "-q")
    git(repo, "add", "main.py", "tools/run.py")
    git(repo, "add", "-f", "fixtures/__pycache__/kept.pyc")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
    assert set(tree_files(dest)) == {"main.py", "tools/run.py", "fixtures/__pycache__/kept.pyc"}
    reasons = {item.path: item.reason for item in ref.skipped}
    assert set(reasons) == {".venv", "tools/env", ".pytest_cache"}
    assert reasons[".venv"].startswith("a virtual environment git does not ignore")
    assert "git add -f" in reasons[".pytest_cache"]


async def test_a_thousand_file_tree_round_trips_through_the_object_store(bus: Bus, tmp_path: Path) -> None:
    """Snapshots of realistic repositories: every one of 1,000 files comes back with its bytes."""
    repo = tmp_path / "repo"
    for i in range(1000):
        path = repo / f"pkg{i % 25}" / f"sub{i % 3}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n" + "# padding\n" * (i % 40))
    git(repo, "init", "-q")
    expected = tree_files(repo)
    with anyio.fail_after(60):
        ref = await capture_snapshot(bus, repo)
        shutil.move(repo, tmp_path / "moved")
        dest = await materialize(bus, ref, tmp_path / "work")
    assert ref.files == 1000
    assert tree_files(dest) == expected


async def test_capturing_the_same_tree_twice_gives_the_same_digest_and_stores_nothing_new(
    bus: Bus, tmp_path: Path
) -> None:
    """Content addressing: blobs already in the object store are not stored again."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        first = await capture_snapshot(bus, repo)
        stored = (await bus.js.stream_info(f"OBJ_{ARTIFACTS_BUCKET}")).state.messages
        second = await capture_snapshot(bus, repo)
        after = (await bus.js.stream_info(f"OBJ_{ARTIFACTS_BUCKET}")).state.messages
        (repo / "notes.txt").write_text("changed\n")
        third = await capture_snapshot(bus, repo)
        grown = (await bus.js.stream_info(f"OBJ_{ARTIFACTS_BUCKET}")).state.messages
    assert first.digest == second.digest and after == stored
    assert third.digest != first.digest
    assert grown - after == 4  # one new blob and one new manifest, a chunk and a meta message each


async def test_blobs_are_standard_nats_objects(bus: Bus, tmp_path: Path) -> None:
    """Other NATS clients (nats-py's ObjectStore, the nats CLI) read what a snapshot stores."""
    repo = tmp_path / "repo"
    repo.mkdir()
    content = os.urandom(200 * 1024)
    (repo / "f.bin").write_bytes(content)
    with anyio.fail_after(30):
        await capture_snapshot(bus, repo)
        store: ObjectStore = await bus.js.object_store(ARTIFACTS_BUCKET)
        result = await store.get(f"blob/{hashlib.sha256(content).hexdigest()}")
    assert result.data == content


async def test_an_oversized_tree_is_refused_with_the_limit_named(bus: Bus, tmp_path: Path) -> None:
    """A snapshot must not fill the object store; the error says which limit to raise."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        with pytest.raises(SnapshotTooLarge, match="limit of 10 bytes"):
            await capture_snapshot(bus, repo, max_bytes=10)
        with pytest.raises(SnapshotTooLarge, match="limit of 2 files"):
            await capture_snapshot(bus, repo, max_files=2)
    assert (await bus.js.stream_info(f"OBJ_{ARTIFACTS_BUCKET}")).state.messages == 0


async def test_materialize_refuses_a_directory_that_is_not_empty(bus: Bus, tmp_path: Path) -> None:
    """A workspace is always built fresh; writing into a used directory would mix two trees."""
    repo = dirty_repo(tmp_path / "repo")
    dest = tmp_path / "used"
    dest.mkdir()
    (dest / "old.txt").write_text("x")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        with pytest.raises(WorkspaceError, match="not an empty directory"):
            await materialize(bus, ref, dest)


async def test_a_snapshot_missing_from_the_object_store_is_reported(bus: Bus, tmp_path: Path) -> None:
    """A reference to a manifest the bus does not hold is `SnapshotUnavailable`, not a nats error."""
    repo = dirty_repo(tmp_path / "repo")
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        bogus = ref.model_copy(update={"digest": "0" * 64})
        with pytest.raises(SnapshotUnavailable, match="missing"):
            await materialize(bus, bogus, tmp_path / "work")


def hash_everything(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, `.git` included, and the target of every link."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            out[rel] = (
                os.readlink(path) if path.is_symlink() else hashlib.sha256(path.read_bytes()).hexdigest()
            )
    return out


async def test_the_users_checkout_is_byte_for_byte_unchanged_by_capture_materialize_and_patch(
    bus: Bus, tmp_path: Path
) -> None:
    """The rule agents live by: the user's checkout is never written, its `.git` included."""
    repo = dirty_repo(tmp_path / "repo")
    before = hash_everything(repo)
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        (dest / "src" / "app.py").write_text("changed in the workspace\n")
        patch = await workspace_patch(dest)
    assert patch.files_changed == ["src/app.py"]
    assert hash_everything(repo) == before


async def test_a_bucket_without_direct_gets_still_serves_snapshots(bus: Bus, tmp_path: Path) -> None:
    """Buckets made by other clients or older servers may lack direct gets; snapshots fall back to the
    stream API, object by object, and give the same tree."""
    info = await bus.js.stream_info(f"OBJ_{ARTIFACTS_BUCKET}")
    info.config.allow_direct = False
    await bus.js.update_stream(info.config)
    repo = dirty_repo(tmp_path / "repo")
    (repo / "big.bin").write_bytes(os.urandom(300 * 1024))
    expected = tree_files(repo)
    del expected["debug.log"], expected["build/out.bin"]
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        again = await capture_snapshot(bus, repo)
        shutil.move(repo, tmp_path / "elsewhere")
        dest = await materialize(bus, ref, tmp_path / "work")
    assert again.digest == ref.digest
    assert tree_files(dest) == expected


@pytest.mark.slow
async def test_a_manifest_of_100k_files_is_stored_and_read_back(bus: Bus) -> None:
    """Manifests are far over NATS's 1 MiB max payload for big repositories; they travel chunked."""
    entries = [
        Entry(
            path=f"pkg{i % 300}/module_{i}.py",
            mode=MODE_FILE,
            size=i,
            sha256=hashlib.sha256(b"%d" % i).hexdigest(),
        )
        for i in range(100_000)
    ]
    tree = Scan(entries=sorted(entries))
    data = tree.manifest_bytes()
    assert len(data) > 8 * 1024 * 1024
    ref = SnapshotRef(
        digest=tree.digest(), files=len(entries), bytes=tree.total_bytes, source_path="/nowhere"
    )
    with anyio.fail_after(60):
        store = await Artifacts.open(bus)
        await store.put(f"manifest/{ref.digest}", data)
        assert await read_manifest(store, ref) == tree.entries


@pytest.mark.parametrize(
    "rows",
    [
        [["../outside.txt", "100644", 1, "x"]],
        [["/etc/outside", "100644", 1, "x"]],
        [["sub/.git/hooks/pre-commit", "100755", 1, "x"]],
        [["link", "120000", "/tmp"]],
        [["a", "120000", "b"], ["a/x", "100644", 1, "x"]],
    ],
)
async def test_a_manifest_that_would_write_outside_its_workspace_is_refused(
    bus: Bus, tmp_path: Path, rows: list
) -> None:
    """Path confinement: the object store is shared by every bus client, so a manifest is checked
    before anything is written (a path under a link would write through it)."""
    data = json.dumps({"format": "codeloop-snapshot/1", "files": rows}).encode()
    digest = hashlib.sha256(data).hexdigest()
    ref = SnapshotRef(digest=digest, files=len(rows), bytes=1, source_path="/nowhere")
    with anyio.fail_after(30):
        await (await Artifacts.open(bus)).put(f"manifest/{digest}", data)
        with pytest.raises(SnapshotUnavailable, match="cannot be read"):
            await materialize(bus, ref, tmp_path / "work" / "dest")
    assert list((tmp_path / "work").rglob("*")) == [tmp_path / "work" / "dest"]


async def test_file_names_git_quotes_and_an_empty_tree_survive(bus: Bus, tmp_path: Path) -> None:
    """Names with spaces, quotes, backslashes, newlines and non-ASCII letters are paths like any
    other; a tree with no file at all still becomes a repository with a starting commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    names = ["with space.txt", 'quote".txt', "back\\slash.txt", " leading", "new\nline", "ünïcødé.md"]
    for name in names:
        (repo / name).write_text(name)
    empty = tmp_path / "empty"
    empty.mkdir()
    with anyio.fail_after(30):
        ref = await capture_snapshot(bus, repo)
        dest = await materialize(bus, ref, tmp_path / "work")
        nothing = await capture_snapshot(bus, empty)
        bare = await materialize(bus, nothing, tmp_path / "bare")
    assert tree_files(dest) == {name: name.encode() for name in names}
    assert git(dest, "status", "--porcelain") == ""
    assert nothing.files == 0 and git(bare, "ls-files") == "" and git(bare, "rev-parse", "HEAD").strip()
