"""Moving the workspace between the trees the verifier compares, with git on the host.

The workspace is a git repository whose HEAD commit is the tree the task started from. The
verifier applies a patch (or a subset of its file sections) with `git apply`, and puts files back
with `git checkout HEAD -- ...`, which restores exactly the starting content whatever a test run
did to the files meanwhile. The exec server's sandbox picks up these host edits at its next command.
"""

import os
import subprocess
from pathlib import Path

import anyio

from agents.roles.verifier.errors import WorkspaceError
from agents.roles.verifier.patchset import FileChange

GIT_TIMEOUT_S = 60.0
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


async def git(workspace: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """Run git in `workspace`; (exit status, stdout and stderr).

    Raises:
        WorkspaceError: git cannot be run, or did not finish within `GIT_TIMEOUT_S`.
    """
    argv = ["git", "-C", str(workspace), "-c", "core.hooksPath=/dev/null", *args]
    try:
        with anyio.fail_after(GIT_TIMEOUT_S):
            done = await anyio.run_process(
                argv,
                input=stdin.encode() if stdin is not None else None,
                stdin=subprocess.DEVNULL if stdin is None else None,  # never the user's terminal
                check=False,
                env={**os.environ, **_GIT_ENV},
            )
    except (OSError, TimeoutError) as exc:
        raise WorkspaceError(f"git {args[0]} failed in {workspace}: {exc}") from exc
    output = (done.stdout or b"").decode(errors="replace") + (done.stderr or b"").decode(errors="replace")
    return done.returncode, output


async def head_commit(workspace: Path) -> str:
    """The commit of the starting tree.

    Raises:
        WorkspaceError: the workspace is not a git repository with a commit.
    """
    status, output = await git(workspace, "rev-parse", "--verify", "HEAD")
    if status != 0:
        raise WorkspaceError(f"{workspace} is not a git repository with a commit: {output.strip()}")
    return output.strip()


async def tree_hash(workspace: Path) -> str:
    """The starting tree's git tree hash: the same files give the same hash, whatever the commit.

    Raises:
        WorkspaceError: git failed.
    """
    status, output = await git(workspace, "rev-parse", "--verify", "HEAD^{tree}")
    if status != 0:
        raise WorkspaceError(f"git rev-parse failed: {output.strip()}")
    return output.strip()


async def changed_tracked_files(workspace: Path) -> list[str]:
    """Tracked files that differ from HEAD (the workspace should start with none)."""
    status, output = await git(workspace, "status", "--porcelain", "--untracked-files=no")
    if status != 0:
        raise WorkspaceError(f"git status failed: {output.strip()}")
    return [line[3:] for line in output.splitlines() if line.strip()]


async def check_patch(workspace: Path, patch: str) -> str | None:
    """Why `patch` does not apply to the workspace as it is, or None when it does."""
    status, output = await git(workspace, "apply", "--check", "--whitespace=nowarn", "-", stdin=patch)
    return None if status == 0 else output.strip() or f"git apply exited {status}"


async def apply_patch(workspace: Path, patch: str) -> None:
    """Apply `patch` to the working tree.

    Raises:
        WorkspaceError: it did not apply (call `check_patch` first to report why as data).
    """
    if not patch.strip():
        return
    status, output = await git(workspace, "apply", "--whitespace=nowarn", "-", stdin=patch)
    if status != 0:
        raise WorkspaceError(f"git apply failed: {output.strip()}")


async def restore(workspace: Path, changes: list[FileChange]) -> None:
    """Put the files of `changes` back to their starting content (added files removed).

    Raises:
        WorkspaceError: git could not restore them.
    """
    if not changes:
        return
    status, listing = await git(workspace, "ls-tree", "-r", "--name-only", "HEAD")
    if status != 0:
        raise WorkspaceError(f"git ls-tree failed: {listing.strip()}")
    tracked = set(listing.splitlines())
    old = sorted({c.old_path for c in changes if c.old_path and c.old_path in tracked})
    for change in changes:
        if change.path not in tracked:
            target = workspace / change.path
            if target.is_symlink() or target.is_file():
                target.unlink()
    if old:
        status, output = await git(workspace, "checkout", "HEAD", "--", *old)
        if status != 0:
            raise WorkspaceError(f"git checkout failed: {output.strip()}")


async def reset_tracked(workspace: Path) -> None:
    """Check out HEAD's content of every tracked file that differs from it.

    Raises:
        WorkspaceError: git could not.
    """
    status, output = await git(workspace, "diff", "--name-only", "-z", "HEAD")
    if status != 0:
        raise WorkspaceError(f"git diff failed: {output.strip()}")
    paths = [p for p in output.split("\0") if p]
    if paths:
        status, output = await git(workspace, "checkout", "HEAD", "--", *paths)
        if status != 0:
            raise WorkspaceError(f"git checkout failed: {output.strip()}")
