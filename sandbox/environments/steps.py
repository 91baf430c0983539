"""One step of a build: a host subprocess in its own process group, its output appended to the
build log and passed on line by line, killed with everything it started on timeout or cancel."""

import os
import re
import signal
import subprocess
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import anyio

from sandbox.errors import BuildFailed

TAIL_LINES = 40
SHOWN_TAIL_LINES = 12
"""Of the tail, how many lines go into the error's message (all of them are in `log_tail`)."""
_MISSING = (
    re.compile(r"No matching distribution found for ([^\s;]+)"),
    re.compile(r"Could not find a version that satisfies the requirement ([^\s;]+)"),
    re.compile(r"Because ([^\s]+) was not found in the package registry"),
    re.compile(r"No solution found when resolving dependencies:\s*╰─▶ Because ([^\s]+) was not found"),
)


def missing_requirement(output: str) -> str | None:
    """The requirement pip or uv said the package index does not have, if that is what failed."""
    for pattern in _MISSING:
        match = pattern.search(output)
        if match:
            return match.group(1).strip("'\"")
    return None


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


class StepRunner:
    """Runs a build's steps against one deadline, one log and one progress callback."""

    def __init__(
        self, log: BinaryIO, log_path: Path, *, deadline: float, progress: Callable[[str], None]
    ) -> None:
        self.log = log
        self.log_path = log_path
        self.deadline = deadline
        self.progress = progress

    async def run(self, step: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> str:
        """Runs `argv` as the step named `step` (what errors and the log call it); returns its output.

        Raises:
            BuildFailed: it exited non-zero or ran past the build's deadline.
        """
        self.progress(f"[{step}]")
        self.log.write(f"\n$ {step}\n".encode())
        self.log.flush()
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        chunks: list[bytes] = []
        left = self.deadline - anyio.current_time()
        async with await anyio.open_process(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ) as process:
            try:
                with anyio.move_on_after(max(left, 0.0)) as scope:
                    await self._pump(process.stdout, tail, chunks)
                    await process.wait()
            finally:
                # Whatever the step left running (a daemon, a stuck compiler) goes with it; on
                # cancel or timeout the step itself too.
                _kill_group(process.pid)
                with anyio.CancelScope(shield=True):
                    await process.wait()
        output = b"".join(chunks).decode(errors="replace")
        if scope.cancelled_caught:
            self._fail(step, "ran past the build's time limit", tail, output)
        if process.returncode != 0:
            self._fail(step, f"exited with {process.returncode}", tail, output)
        return output

    async def _pump(self, stream, tail: deque[str], chunks: list[bytes]) -> None:
        pending = b""
        async for chunk in stream:
            self.log.write(chunk)
            chunks.append(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                text = line.decode(errors="replace").rstrip("\r")
                tail.append(text)
                if text.strip():
                    self.progress(text)
        self.log.flush()
        if pending:
            tail.append(pending.decode(errors="replace"))

    def _fail(self, step: str, how: str, tail: deque[str], output: str) -> None:
        self.log.flush()
        missing = missing_requirement(output)
        lines = list(tail)
        why = f"; the package index has no {missing!r}" if missing else ""
        shown = "\n".join(lines[-SHOWN_TAIL_LINES:])
        raise BuildFailed(
            f"the environment's build failed at `{step}` ({how}){why}. Last lines of the build log "
            f"({self.log_path}):\n{shown}",
            step=step,
            log_tail="\n".join(lines),
            missing=missing,
            log_path=str(self.log_path),
        )
