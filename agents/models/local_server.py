"""`LocalServers`: the llama.cpp servers of one process, each a child process on a loopback port.

A `local:PATH.gguf` model is served by llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server`, the `codeloop[local]` extra), started at the first request that
needs it and kept for the life of the `LocalServers` block — in practice the life of the
`codeloop serve` (or of the serve a `codeloop run` starts for its one task), so a second task does
not load the model again; a server busy with a response its caller gave up on is stopped instead
(`discard`), and the next request starts a new one. One server per model file and context size.

Every server is a child in its own process group, killed with its group and reaped when the block
ends, whatever ends it (cancellation included); on Linux it is also started under a parent-death
signal (`setpriv --pdeathsig`), so a SIGKILLed codeloop does not leave it behind. Its output goes
to a log file beside the other state, whose tail a failed start quotes.

The context size is always set (`--n_ctx`): llama-cpp-python's own default (2,048 tokens) is the
trap users of local models fall into most, a prompt cut short without a word.
"""

import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import anyio
import httpx2
from anyio.abc import Process

from agents.errors import AgentError

log = logging.getLogger("codeloop.agents")

START_TIMEOUT_S = 180.0
"""A model of a few GB loads in well under a minute from a warm disk; a cold, shared machine is slower."""
_STOP_GRACE_S = 5.0
_POLL_S = 0.2
CHAT_FORMAT = "chatml-function-calling"
"""llama-cpp-python's chat handler that offers tools to ChatML models (SmolLM2, Qwen, Hermes) and
returns their calls as OpenAI tool calls; the model file's own template passes no tools."""


class LocalServerError(AgentError):
    """A local model's server could not be started or died; the message says why and where its log is."""

    failure_class = "env.setup"


@dataclass(frozen=True)
class LocalEndpoint:
    """A running local server."""

    base_url: str
    """`http://127.0.0.1:PORT/v1`, the OpenAI-compatible root."""
    context_tokens: int
    """The context the server was started with (`--n_ctx`)."""
    pid: int
    """The server's process id (its process group's id too)."""
    log_path: Path


@dataclass
class _Running:
    endpoint: LocalEndpoint
    process: Process
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class LocalServers:
    """Starts local model servers on demand and stops them all when its `async with` block ends."""

    def __init__(
        self,
        *,
        log_dir: Path,
        python: str = sys.executable,
        start_timeout_s: float = START_TIMEOUT_S,
        threads: int | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.python = python
        self.start_timeout_s = start_timeout_s
        self.threads = threads
        self._running: dict[tuple[str, int], _Running] = {}
        self._lock = anyio.Lock()
        self._stack = AsyncExitStack()
        self._open = False

    async def __aenter__(self) -> "LocalServers":
        self._open = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._open = False
        with anyio.CancelScope(shield=True):
            for running in list(self._running.values()):
                await _stop(running.process)
            self._running.clear()

    @property
    def pids(self) -> list[int]:
        """The process ids of the servers running now."""
        return [r.endpoint.pid for r in self._running.values() if r.process.returncode is None]

    async def endpoint(self, model_path: Path, *, context_tokens: int) -> LocalEndpoint:
        """The server of `model_path` with `context_tokens` of context, started if none runs.

        Raises:
            LocalServerError: llama-cpp-python is not installed, the file is not a model, the
                server exited or did not answer within `start_timeout_s` (its log's tail quoted).
        """
        if not self._open:
            raise LocalServerError("local model servers are started only inside a running LocalServers block")
        key = (str(model_path), context_tokens)
        async with self._lock:
            running = self._running.get(key)
            if running is not None and running.process.returncode is not None:
                log.warning(
                    "local model server %s exited (%s); starting it again",
                    model_path.name,
                    running.process.returncode,
                )
                await _stop(running.process)
                del self._running[key]
                running = None
            if running is None:
                running = await self._start(model_path, context_tokens)
                self._running[key] = running
        return running.endpoint

    async def discard(self, model_path: Path, *, context_tokens: int) -> None:
        """Stop the server of `model_path` with `context_tokens` of context, if one runs; the next
        `endpoint` starts a new one.

        For a response its caller gave up on: llama-cpp-python's server does not drop a
        non-streamed response when its client leaves, it computes it to the end holding the
        model, and a grammar-bound tool call that does not stop ends only when the context is
        full, minutes later. Every later request would wait behind it; a new server answers at once.
        """
        async with self._lock:
            running = self._running.pop((str(model_path), context_tokens), None)
        if running is not None:
            log.info(
                "stopping the local model server of %s: it is busy with an abandoned response",
                model_path.name,
            )
            await _stop(running.process)

    async def _start(self, model_path: Path, context_tokens: int) -> _Running:
        check_runtime()
        check_model_file(model_path)
        self.log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_path = self.log_dir / f"{model_path.stem}-{context_tokens}.log"
        port = _free_port()
        cmd = [
            self.python,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(context_tokens),
            "--chat_format",
            CHAT_FORMAT,
        ]
        if self.threads is not None:
            cmd += ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        log.info(
            "starting local model server for %s on port %d (context %d tokens)",
            model_path.name,
            port,
            context_tokens,
        )
        with log_path.open("ab") as out:
            try:
                process = await anyio.open_process(
                    _ended_with_parent(cmd),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            except OSError as exc:
                raise LocalServerError(f"cannot start the local model server ({self.python}): {exc}") from exc
        endpoint = LocalEndpoint(
            base_url=f"http://127.0.0.1:{port}/v1",
            context_tokens=context_tokens,
            pid=process.pid,
            log_path=log_path,
        )
        try:
            await _wait_ready(process, endpoint, timeout_s=self.start_timeout_s)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            raise
        return _Running(endpoint=endpoint, process=process)


def check_runtime() -> None:
    """Raises `LocalServerError` when llama-cpp-python's server is not importable here."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        raise LocalServerError(
            "local: models need llama-cpp-python's server, which is not installed: "
            "pip install 'codeloop[local]' (it builds llama.cpp for this machine once, a few minutes)"
        )


def check_model_file(path: Path) -> None:
    """Raises `LocalServerError` unless `path` is a readable GGUF file."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise LocalServerError(f"local model {path} cannot be read: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise LocalServerError(f"local model {path} is not a GGUF file (llama.cpp's model format)")


async def _wait_ready(process: Process, endpoint: LocalEndpoint, *, timeout_s: float) -> None:
    async with httpx2.AsyncClient(timeout=5.0) as client:
        with anyio.move_on_after(timeout_s) as waiting:
            while True:
                if process.returncode is not None:
                    raise LocalServerError(
                        f"the local model server exited with {process.returncode} while starting; "
                        f"the end of its log ({endpoint.log_path}):\n{_tail(endpoint.log_path)}"
                    )
                try:
                    response = await client.get(f"{endpoint.base_url}/models")
                    if response.status_code == 200:
                        return
                except httpx2.HTTPError:
                    pass  # not listening yet
                await anyio.sleep(_POLL_S)
        if waiting.cancelled_caught:
            raise LocalServerError(
                f"the local model server did not answer within {timeout_s:.0f} s; "
                f"the end of its log ({endpoint.log_path}):\n{_tail(endpoint.log_path)}"
            )


async def _stop(process: Process) -> None:
    """SIGTERM the server's group, SIGKILL it after a grace period, and reap it."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with anyio.move_on_after(_STOP_GRACE_S):
                await process.wait()
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # a straggler of the group, if any
        await process.aclose()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ended_with_parent(cmd: list[str]) -> list[str]:
    """`cmd` under a parent-death SIGKILL where Linux's `setpriv` offers it: the signal follows the
    thread that starts the child, the event loop's, which lives as long as the servers' owner."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or not sys.platform.startswith("linux"):
        return cmd
    return [setpriv, "--pdeathsig=KILL", "--", *cmd]


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
