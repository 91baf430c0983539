"""`Sandbox`: one sandbox per workspace, started once, serving many commands one at a time.

The host side of the supervisor channel: one JSON request line per command on the supervisor's
stdin, one reply line on its stdout, read with a byte bound so a misbehaving sandbox cannot make
the caller buffer more than the output caps. The sandbox is started lazily and started again after
a command that ended it (memory limit), timed out, or was cancelled; every command gets the same
limits.
"""

import time
from pathlib import Path
from typing import Literal, Protocol, TypeVar

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import ValidationError

from sandbox.errors import SandboxClosed, SandboxCrashed
from sandbox.limits import SandboxLimits
from sandbox.protocol import CommandReply, CommandRequest, KilledBy, Ready, WarmReply, WarmRequest
from sandbox.result import Backend, ExecResult

START_TIMEOUT_S = 30.0
# The supervisor kills at the deadline and answers at once; past this grace the host gives up on
# it and kills the whole sandbox, which still keeps "killed within timeout + 1 s".
HOST_GRACE_S = 0.6


ReplyT = TypeVar("ReplyT", CommandReply, Ready, WarmReply)


def _killed(by: KilledBy) -> CommandReply:
    """The reply for a command the host had to kill with its whole sandbox (no output survives)."""
    return CommandReply(exit_code=None, stdout="", stderr="", truncated=False, killed_by=by)


class Launcher(Protocol):
    backend: Backend
    workspace: Path
    payload_uid: int | None

    async def open(self) -> None: ...
    async def start(self) -> Process: ...
    async def stop(self, process: Process) -> None: ...
    async def close(self) -> None: ...
    async def before_command(self) -> None: ...
    async def after_command(self) -> None: ...
    def died_of_memory(self, returncode: int | None) -> bool: ...
    def translate_cwd(self, cwd: str | None) -> str: ...
    def base_env(self) -> dict[str, str]: ...
    def rlimits(self) -> dict[str, int]: ...
    def log_tail(self) -> str: ...


class _Channel:
    """Line-delimited JSON to and from the supervisor, read with a byte bound."""

    def __init__(self, process: Process, max_line: int) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.reader = BufferedByteReceiveStream(process.stdout)
        self.max_line = max_line

    async def send(self, request: CommandRequest | WarmRequest) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(request.model_dump_json().encode() + b"\n")

    async def receive(self, model: type[ReplyT]) -> ReplyT | None:
        """The next line as `model`; None when the supervisor is gone (its stdout closed).

        Raises:
            SandboxCrashed: the line is too long or not a valid reply.
        """
        try:
            line = await self.reader.receive_until(b"\n", self.max_line)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            return None
        except anyio.DelimiterNotFound as exc:
            raise SandboxCrashed(f"the supervisor sent a line longer than {self.max_line} bytes") from exc
        try:
            return model.model_validate_json(line)
        except ValidationError as exc:
            raise SandboxCrashed(f"the supervisor sent an invalid {model.__name__}: {line[:200]!r}") from exc


class Sandbox:
    """Runs commands under one set of limits; use through `open_sandbox`, not directly."""

    def __init__(self, launcher: Launcher, limits: SandboxLimits) -> None:
        self.launcher = launcher
        self.limits = limits
        self.backend: Backend = launcher.backend
        self.warning: str | None = None
        """Carried into every result (`ExecResult.warning`); set by `open_sandbox`."""
        self._channel: _Channel | None = None
        self._lock = anyio.Lock()
        self._closed = False
        # Two capped streams, JSON-escaped (worst case 6 bytes per byte), plus the envelope.
        self._max_line = 12 * limits.output_bytes + 65536

    async def _start(self) -> _Channel:
        process = await self.launcher.start()
        channel = _Channel(process, self._max_line)
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                ready = await channel.receive(Ready)
        except (TimeoutError, SandboxCrashed) as exc:
            await self.launcher.stop(process)
            raise SandboxCrashed(
                f"the {self.backend} sandbox did not start: {exc} {self.launcher.log_tail()}"
            ) from exc
        except BaseException:
            await self.launcher.stop(process)  # cancelled while starting: leave nothing behind
            raise
        if ready is None:
            await self.launcher.stop(process)
            raise SandboxCrashed(f"the {self.backend} sandbox exited at start: {self.launcher.log_tail()}")
        return channel

    async def _discard(self) -> None:
        """Kills the running sandbox (if any); the next command starts a fresh one."""
        channel, self._channel = self._channel, None
        if channel is not None:
            await self.launcher.stop(channel.process)

    async def start(self) -> None:
        """Starts the sandbox now instead of at the first command."""
        async with self._lock:
            if self._channel is None:
                self._channel = await self._start()

    async def exec(
        self,
        argv: list[str],
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        warm: bool | Literal["if_ready"] = False,
    ) -> ExecResult:
        """Runs one command and returns what it did; a failure or limit of the command is a result.

        `env` is added to a minimal fixed environment (PATH, HOME, TMPDIR, LANG); nothing of the
        caller's environment leaks in. `cwd` is relative to /workspace unless absolute.
        `warm`: the command is `PYTHON -m pytest ...` (or `PYTHON -c CODE ...`, CODE running
        pytest itself); it runs in the interpreter `keep_warm` prepared for PYTHON and this `env`
        when there is one (else as usual), and one is kept ready for the next run with the same
        interpreter and environment. `warm="if_ready"`: only when that interpreter has finished
        its imports; while it is still importing the command runs cold (a run whose own start is
        quicker than the imports of every plugin: the first one after the static checks).

        Raises:
            SandboxClosed: the sandbox was closed.
            SandboxUnavailable: the backend cannot start here.
            SandboxCrashed: the sandbox died for a reason that is not a limit of the command.
        """
        if not argv:
            raise ValueError("argv must name a command")
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        async with self._lock:
            if self._closed:
                raise SandboxClosed("this sandbox is closed; open a new one with open_sandbox()")
            try:
                reply, duration_s = await self._exec_locked(argv, timeout, env, cwd, warm)
            except BaseException:
                # Cancelled mid-command (or broken): the command may still run; end it all.
                with anyio.CancelScope(shield=True):
                    await self._discard()
                raise
        return self._result(reply, timeout, duration_s)

    async def keep_warm(self, python: str, env: dict[str, str] | None = None) -> WarmReply:
        """Starts a pytest interpreter of `python` in the sandbox now (it imports pytest and its
        plugins while other commands run), for later `exec(..., warm=True)` test runs with the
        same `env`. Only under gVisor, for a virtualenv's interpreter; the reply says why not.

        Raises:
            SandboxClosed, SandboxUnavailable, SandboxCrashed: as `exec`.
        """
        async with self._lock:
            if self._closed:
                raise SandboxClosed("this sandbox is closed; open a new one with open_sandbox()")
            if self.launcher.payload_uid is None:
                return WarmReply(warm=False, note=f"the {self.backend} backend keeps no warm interpreter")
            if self._channel is None:
                self._channel = await self._start()
            channel = self._channel
            request = WarmRequest(
                python=python, env={**self.launcher.base_env(), **(env or {})}, uid=self.launcher.payload_uid
            )
            try:
                await channel.send(request)
                with anyio.fail_after(START_TIMEOUT_S):
                    reply = await channel.receive(WarmReply)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._discard()
                raise
            if reply is None:
                await self._discard()
                raise SandboxCrashed(f"the sandbox exited: {self.launcher.log_tail()}")
            return reply

    async def _exec_locked(
        self,
        argv: list[str],
        limit_s: float,
        env: dict[str, str] | None,
        cwd: str | None,
        warm: bool | Literal["if_ready"],
    ) -> tuple[CommandReply, float]:
        """The reply and the seconds from sending the command to its end (reply or kill);
        restarting the sandbox and copying results back come after and are not counted."""
        if self._channel is None:
            self._channel = await self._start()
        channel = self._channel
        await self.launcher.before_command()
        request = CommandRequest(
            argv=list(argv),
            env={**self.launcher.base_env(), **(env or {})},
            cwd=self.launcher.translate_cwd(cwd),
            timeout_s=limit_s,
            output_bytes=self.limits.output_bytes,
            rlimits=self.launcher.rlimits(),
            cpu_time_s=self.limits.cpu_time_s,
            uid=self.launcher.payload_uid,
            warm=warm,
        )
        started = time.monotonic()
        await channel.send(request)
        reply: CommandReply | None = None
        with anyio.move_on_after(limit_s + HOST_GRACE_S) as scope:
            reply = await channel.receive(CommandReply)
        duration_s = time.monotonic() - started
        if scope.cancelled_caught:
            await self._discard()
            reply = _killed("timeout")
        elif reply is None:
            await channel.process.wait()
            returncode = channel.process.returncode
            await self._discard()
            if not self.launcher.died_of_memory(returncode):
                raise SandboxCrashed(f"the sandbox exited with {returncode}: {self.launcher.log_tail()}")
            reply = _killed("memory")
        elif reply.killed_by == "timeout":
            # A timed-out command gets its container killed and deleted, as the issue asks; the
            # next command starts from a fresh one.
            await self._discard()
        await self.launcher.after_command()
        return reply, duration_s

    def _result(self, reply: CommandReply, timeout: float, duration_s: float) -> ExecResult:
        stderr = reply.stderr
        killed_by = reply.killed_by
        if killed_by == "timeout":
            stderr += f"\n[codeloop sandbox: killed at the {timeout:g} s timeout]\n"
        elif killed_by == "cpu":
            stderr += f"\n[codeloop sandbox: killed at the CPU time limit of {self.limits.cpu_time_s:g} s]\n"
        elif killed_by == "memory":
            stderr += (
                f"\n[codeloop sandbox: killed at the memory limit of {self.limits.memory_mb} MB; "
                "the sandbox is restarted for the next command]\n"
            )
        return ExecResult(
            exit_code=reply.exit_code,
            stdout=reply.stdout,
            stderr=stderr,
            timed_out=killed_by == "timeout",
            backend=self.backend,
            duration_s=round(duration_s, 4),
            truncated=reply.truncated,
            warm=reply.warm,
            warning=self.warning,
        )

    async def aclose(self) -> None:
        """Kills and deletes the sandbox; no runsc or payload process survives. Idempotent."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if self._closed:
                    return
                self._closed = True
                await self._discard()
                await self.launcher.close()

    @property
    def workspace(self) -> Path:
        return self.launcher.workspace
