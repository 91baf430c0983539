"""A verifier worker's next workspace, made ready before the verification that will use it.

A verification used to begin by starting its sandbox and importing pytest in it: under gVisor's
ptrace platform about two seconds before the first test could run, most of the time to a first
failure report. A worker with `VerifierSpares` keeps one empty scratch directory with an open
`exec` session whose sandbox is started and whose pytest interpreter is warm (the session's first
call, a static check of the empty directory, does both). The next verification takes it,
materializes its starting tree into the directory (the sandbox mirrors what changed before its next
command) and runs in it; meanwhile the one after it is being prepared.

Isolation is unchanged: a spare serves exactly one verification and is closed with it (sandbox
killed, directory removed), so nothing of one task's runs is in the next task's sandbox. A
sandbox opened on an empty directory binds no workspace virtualenv; one in the materialized tree
is mirrored like any files (slower, still correct).

The cost is one more sandbox per worker, mostly idle: its memory (the sandbox's and the warm
interpreter's) and the CPU of its start, spent while the worker waits or its model thinks. When
the spare cannot be made (no sandbox here, the exec server failing) the worker says so once and
verifies as before.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from agents.roles.verifier.exec_session import EXEC_SCOPES, ExecSession, open_exec_session
from agents.runtime.role import Capability, innermost_exception
from agents.runtime.tools import ToolProvider, ToolTarget
from agents.runtime.tracing import untraced
from agents.workspace.scratch import open_scratch

log = logging.getLogger(__name__)
PREPARE_TIMEOUT_S = 120.0


@dataclass
class Spare:
    root: Path
    session: ExecSession
    target: ToolTarget
    """The exec server the session is on (what the tool provider gave)."""
    done: anyio.Event = field(default_factory=anyio.Event)


class VerifierSpares:
    """One ready verification workspace at a time; use as an async context manager (it owns the
    tasks that prepare and close the spares) and `take()` one per verification."""

    def __init__(self, tools: ToolProvider, scratch_dir: Path) -> None:
        self.tools = tools
        self.scratch_dir = scratch_dir
        self._send, self._receive = anyio.create_memory_object_stream[Spare](0)
        self._group: TaskGroup | None = None
        self._broken = False
        self._waiting = 0
        self._ready: anyio.Event | None = None

    async def __aenter__(self) -> "VerifierSpares":
        self._ready = anyio.Event()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._keep_one_ready)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        return await self._group.__aexit__(exc_type, exc, tb)

    async def wait_ready(self) -> bool:
        """Wait until a spare waits to be taken (True) or none can be made (False)."""
        assert self._ready is not None, "use VerifierSpares as an async context manager"
        await self._ready.wait()
        return not self._broken

    async def _keep_one_ready(self) -> None:
        """Prepares a spare, offers it until taken, and starts the next one as soon as it is."""
        assert self._group is not None and self._ready is not None
        while True:
            try:
                spare = await self._group.start(self._hold_spare)
            except Exception as exc:  # the session's failures arrive wrapped by its task group
                log.warning(
                    "the verifier keeps no spare sandbox (each verification starts its own): %s",
                    innermost_exception(exc),
                )
                self._broken = True
                self._send.close()
                self._ready.set()  # nobody waits for a spare that will not come
                return
            self._ready.set()
            await self._send.send(spare)

    async def _hold_spare(self, *, task_status: anyio.abc.TaskStatus[Spare]) -> None:
        """Opens a spare and keeps it open until its verification is done. Its preparation is no
        task's work: untraced (the verification's own calls carry the task's trace context)."""
        with untraced():
            await self._prepare_and_hold(task_status)

    async def _prepare_and_hold(self, task_status: anyio.abc.TaskStatus[Spare]) -> None:
        async with open_scratch(self.scratch_dir, "spare", "verify") as root:
            target = self.tools.servers(root, EXEC_SCOPES)["exec"]
            async with open_exec_session(target) as session:
                with anyio.fail_after(PREPARE_TIMEOUT_S):
                    # Starts the sandbox and has it import pytest (see `run_static_checks`).
                    await session.run_static_checks(["."], timeout_s=60.0)
                    # The interpreter imports in the background, and a warm run is forked only
                    # once it is done: an empty run here waits for that, so the spare is offered
                    # ready and its verification's first test run does not wait instead.
                    await session.run_tests([], timeout_s=60.0)
                spare = Spare(root, session, target)
                task_status.started(spare)
                await spare.done.wait()

    @asynccontextmanager
    async def take(self) -> AsyncIterator[Spare | None]:
        """The ready spare (waiting for the one being prepared), or None when there is none to
        be had (none can be made, or another verification is already waiting for it): the caller
        then verifies in a workspace and session of its own."""
        spare = None
        # Concurrent verifications do not queue for the one spare: the second opens its own.
        if not (self._broken or self._waiting):
            self._waiting += 1
            try:
                spare = await self._receive.receive()
                self._ready = anyio.Event()  # here, before anyone else runs: the spare is gone
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                spare = None
            finally:
                self._waiting -= 1
        if spare is None:
            yield None
            return
        adopt = getattr(self.tools, "adopt", None)
        if adopt is not None:  # made outside any step: its calls are this verification's now
            adopt(spare.target)
        try:
            yield spare
        finally:
            spare.done.set()


VERIFIER_SPARES: Capability[VerifierSpares] = Capability("verifier-spares")
"""Where the verifier takes its workspaces from, their sandboxes started ahead; without it, it
opens one per verification."""
