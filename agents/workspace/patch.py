"""The patch of a scratch workspace, and applying it to the user's checkout (`codeloop run --apply`).

The patch is computed by the system from the workspace, never taken from a model's words: every
change against the snapshot commit — edits, new and deleted files, renames, mode changes and
binary contents (`--binary`) — as one unified diff with `a/`/`b/` prefixes that plain `git apply`
takes on a copy of the original tree. The workspace's own index is left alone (a temporary index
takes the `add -A`), so the git tool server and the verifier see the workspace as the coder left it.

Applying to the checkout is the one write to the user's files, and only when the checkout still is
the snapshot's tree (its manifest digest recomputed the same way, without uploading anything): a
patch made against a tree the user has since changed could land in the wrong place. `git apply
--check` runs first and `git apply` is all-or-nothing, so a failure leaves the checkout as it was.
"""

import shutil
import tempfile
from pathlib import Path

import anyio

from agents.workspace.errors import CheckoutChanged, GitFailed, PatchDoesNotApply
from agents.workspace.git import run_git
from agents.workspace.manifest import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, scan_tree
from agents.workspace.snapshot import SnapshotRef
from bus.messages import Message

_DIFF_OPTIONS = (
    "--binary",
    "--find-renames",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


class Patch(Message):
    """What a workspace changed against its snapshot."""

    diff: str
    """Unified diff against the snapshot (`a/`/`b/` prefixes, binary hunks included); empty when
    nothing changed."""
    files_changed: list[str]
    """Paths the diff touches, sorted; a rename lists both its old and its new path."""


async def workspace_patch(dest: Path) -> Patch:
    """The diff of the workspace at `dest` against its starting commit (HEAD).

    Raises:
        GitFailed: `dest` is not a workspace made by `materialize`, or git failed.
    """
    git_dir = dest / ".git"
    if not await anyio.Path(git_dir).is_dir():
        raise GitFailed(f"{dest} is not a workspace repository (no .git); build it with materialize()")
    with tempfile.TemporaryDirectory(prefix="codeloop-index-") as scratch:
        index = Path(scratch) / "index"
        if await anyio.Path(git_dir / "index").exists():
            # A warm index: unchanged files are not re-hashed. copy2 keeps the index's mtime, which
            # git's racy-entry check compares file mtimes against: with a fresh mtime, a file
            # rewritten at the same size within the index's last second passed as unchanged.
            shutil.copy2(git_dir / "index", index)
        env = {"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1"}
        await run_git(dest, "add", "--all", scratch=True, env=env)
        _, names, _ = await run_git(
            dest, "diff", "--cached", "--find-renames", "--name-status", "-z", "HEAD", scratch=True, env=env
        )
        records = _records(names)
        diff = await _diff(dest, env, None)
        try:
            text = diff.decode()
        except UnicodeDecodeError:
            text = await _diff_as_utf8(dest, env, records, Path(scratch))
    return Patch(diff=text, files_changed=sorted({path for paths in records for path in paths}))


async def _diff(dest: Path, env: dict[str, str], paths: list[str] | None, *config: str) -> bytes:
    pathspec = ["--", *paths] if paths is not None else []
    _, out, _ = await run_git(
        dest, *config, "diff", "--cached", *_DIFF_OPTIONS, "HEAD", *pathspec, scratch=True, env=env
    )
    return out


async def _diff_as_utf8(dest: Path, env: dict[str, str], records: list[list[str]], scratch: Path) -> str:
    """The diff with the files whose text is not UTF-8 (Latin-1 sources, say) as binary hunks.

    A patch travels as a JSON string, which cannot hold arbitrary bytes; a binary hunk (base85) of
    such a file keeps every byte and still applies with `git apply`.
    """
    good: list[str] = []
    bad: list[str] = []
    for paths in records:
        try:
            (await _diff(dest, env, paths)).decode()
            good.extend(paths)
        except UnicodeDecodeError:
            bad.extend(paths)
    attributes = scratch / "attributes"
    attributes.write_text("* -diff\n")  # -diff: git treats the file as binary
    as_binary = await _diff(dest, env, bad, "-c", f"core.attributesFile={attributes}") if bad else b""
    as_text = await _diff(dest, env, good) if good else b""
    return (as_text + as_binary).decode()


def _records(name_status: bytes) -> list[list[str]]:
    """Changes from `--name-status -z`: a status field, then one path (two for renames and copies)."""
    fields = name_status.decode("utf-8", errors="replace").split("\0")
    records = []
    i = 0
    while i < len(fields) and fields[i]:
        width = 2 if fields[i][0] in "RC" else 1
        records.append(fields[i + 1 : i + 1 + width])
        i += 1 + width
    return records


async def apply_to_checkout(
    repo: Path,
    ref: SnapshotRef,
    patch: str,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> None:
    """Apply `patch` to the user's checkout at `repo`, which must still be `ref`'s tree; no commit.

    Raises:
        CheckoutChanged: the checkout's files differ from the snapshot; nothing was written.
        PatchDoesNotApply: `git apply --check` rejected the patch; nothing was written.
        CaptureFailed: the checkout could not be read.
    """
    repo = Path(await anyio.Path(repo).resolve())
    now = await scan_tree(repo, max_files=max_files, max_bytes=max_bytes)
    if now.digest() != ref.digest:
        raise CheckoutChanged(
            f"the patch was not applied: {repo} changed since the task started "
            f"(snapshot {ref.digest[:12]}, now {now.digest()[:12]})"
        )
    if not patch.strip():
        return
    cwd, options = await _apply_location(repo)
    data = patch.encode("utf-8", errors="surrogateescape")
    code, _, err = await run_git(
        cwd, "apply", "--check", *options, "-", scratch=False, input=data, check=False
    )
    if code != 0:
        raise PatchDoesNotApply(
            f"the patch does not apply to {repo}; nothing was changed: {err.strip()}", stderr=err
        )
    code, _, err = await run_git(cwd, "apply", *options, "-", scratch=False, input=data, check=False)
    if code != 0:
        raise PatchDoesNotApply(f"git apply failed on {repo}: {err.strip()}", stderr=err)


async def _apply_location(repo: Path) -> tuple[Path, list[str]]:
    """Where to run `git apply` and with which options, so the patch's paths land under `repo`.

    Inside a repository git apply reads patch paths from the top level and ignores those outside
    the current directory, so a snapshot of a subdirectory is applied from the top with
    `--directory=<prefix>`; outside any repository it behaves like `patch -p1` in `repo`.
    """
    options = ["--whitespace=nowarn"]
    code, out, _ = await run_git(
        repo, "rev-parse", "--show-toplevel", "--show-prefix", scratch=False, check=False
    )
    if code != 0:
        return repo, options
    top, _, prefix = out.decode().partition("\n")
    prefix = prefix.strip()
    if prefix:
        options.append(f"--directory={prefix.rstrip('/')}")
    return Path(top.strip()), options
