"""The one sandbox of an `exec` server, and the Python toolchain commands find inside it.

`SharedSandbox` opens the sandbox at the first command (listing tools or a refused call never
starts one), reuses it for every later command, and closes it when the server's lifespan ends.
The sandbox layer itself starts a fresh container after a command that killed it (memory limit)
or timed out, so the same object keeps serving. Its failures become `sandbox_error` results.

Which Python: the workspace's own virtualenv (`.venv`, `venv`, `env`) when it has one, else the
interpreter running codeloop, whose virtualenv has pytest and ruff. That virtualenv is outside
the workspace, so it is shown read-only inside the sandbox (`open_sandbox(ro_paths=...)`), and
its `bin/` follows the workspace virtualenv's on the sandbox's PATH.
"""

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

# Submodules, not the package: under pytest, tests/sandbox/ can shadow the top-level `sandbox`
# package as a namespace package, while the editable install still resolves its submodules.
from sandbox import errors as sandbox_errors
from sandbox.backend import BackendChoice, open_sandbox
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.result import ExecResult
from sandbox.session import Sandbox
from tool_servers.protocol.errors import SandboxError

log = logging.getLogger(__name__)
VENV_NAMES = (".venv", "venv", "env")
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


@dataclass(frozen=True)
class Toolchain:
    """Absolute paths of the programs the exec tools run (valid on the host and in the sandbox)."""

    python: str
    """Interpreter for py_compile and the like: the workspace's virtualenv, else codeloop's."""
    test_python: str
    """Interpreter for pytest: the workspace's virtualenv when pytest is installed there."""
    warm_tests: bool
    """Test runs may start in a pytest interpreter the sandbox keeps ready: only for codeloop's
    own interpreter, whose code the host runs anyway (the sandbox imports it as root)."""
    ruff: str | None
    """The ruff binary (workspace virtualenv first), or None when there is none."""
    path: str
    """PATH inside the sandbox: workspace virtualenv, codeloop's virtualenv, system."""


def _workspace_venv(root: Path) -> Path | None:
    for name in VENV_NAMES:
        if (root / name / "pyvenv.cfg").is_file() and (root / name / "bin" / "python").exists():
            return root / name
    return None


def _has_module(venv: Path, module: str) -> bool:
    return any(venv.glob(f"lib/python3*/site-packages/{module}/__init__.py"))


def find_toolchain(root: Path) -> Toolchain:
    """The toolchain for `root`, looked up now (a command may have created a virtualenv)."""
    own_bin = Path(sys.executable).parent
    own_python = str(Path(sys.executable))
    venv = _workspace_venv(root)
    bins = ([str(venv / "bin")] if venv else []) + [str(own_bin)]
    ruff_candidates = ([venv / "bin" / "ruff"] if venv else []) + [own_bin / "ruff"]
    ruff = next((str(p) for p in ruff_candidates if p.is_file()), None)
    python = str(venv / "bin" / "python") if venv else own_python
    test_python = python if venv and _has_module(venv, "pytest") else own_python
    return Toolchain(
        python=python,
        test_python=test_python,
        warm_tests=test_python == own_python,
        ruff=ruff,
        path=":".join([*bins, *SYSTEM_PATH]),
    )


def codeloop_runtime(root: Path) -> tuple[Path, ...]:
    """Host paths to show read-only in the sandbox: codeloop's virtualenv unless it is in the root."""
    prefix = Path(sys.prefix).resolve()
    return () if prefix == root or root in prefix.parents else (prefix,)


@contextmanager
def sandbox_errors_as_tool_errors() -> Iterator[None]:
    """Translate the sandbox package's errors (a bad CODELOOP_SANDBOX included) into `sandbox_error`."""
    try:
        yield
    except sandbox_errors.PolicyError as exc:
        raise SandboxError(f"the sandbox is misconfigured: {exc}", sandbox_error="PolicyError") from exc
    except sandbox_errors.SandboxError as exc:
        raise SandboxError(f"the sandbox failed: {exc}", sandbox_error=type(exc).__name__) from exc


class SharedSandbox:
    """One lazily opened, reused sandbox on a server's root."""

    def __init__(
        self,
        root: Path,
        *,
        limits: SandboxLimits,
        backend: BackendChoice,
        gvisor: GvisorOptions | None = None,
        policy: str = "auto",
    ) -> None:
        self.root = root
        self.limits = limits
        self.backend = backend
        self.gvisor = gvisor
        self.policy = policy
        """The deployment's CODELOOP_SANDBOX as the composition root read it; parsed at the open."""
        self._lock = anyio.Lock()
        self._stack: AsyncExitStack | None = None
        self._sandbox: Sandbox | None = None
        self._users = 0

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The server's lifespan: the sandbox is closed when the last session using it ends."""
        self._users += 1
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                await self.aclose()

    async def exec(
        self, argv: list[str], *, timeout_s: float, cwd: str, env: dict[str, str], warm: bool = False
    ) -> ExecResult:
        """Run one command; a failing or timed-out command is a result. `warm`: a pytest run that
        may start in the interpreter `keep_warm` prepared (see `Sandbox.exec`).

        Raises:
            SandboxError: the sandbox could not start or died for a reason not of the command.
        """
        box = await self._open()
        with sandbox_errors_as_tool_errors():
            return await box.exec(argv, timeout_s=timeout_s, cwd=cwd, env=env, warm=warm)

    async def keep_warm(self, python: str, env: dict[str, str]) -> None:
        """Have the sandbox import pytest for `python` now, ahead of a test run (`Sandbox.keep_warm`);
        where it cannot (another backend, not a virtualenv), test runs simply start cold.

        Raises:
            SandboxError: the sandbox could not start or died.
        """
        box = await self._open()
        with sandbox_errors_as_tool_errors():
            reply = await box.keep_warm(python, env)
        if not reply.warm:
            log.debug("no warm pytest in the sandbox on %s: %s", self.root, reply.note)

    async def _open(self) -> Sandbox:
        async with self._lock:
            if self._sandbox is None:
                stack = AsyncExitStack()
                with sandbox_errors_as_tool_errors():
                    self._sandbox = await stack.enter_async_context(
                        open_sandbox(
                            self.root,
                            limits=self.limits,
                            backend=self.backend,
                            gvisor=self.gvisor,
                            ro_paths=codeloop_runtime(self.root),
                            policy=self.policy,
                        )
                    )
                self._stack = stack
                if (
                    self._sandbox.warning
                ):  # said once per sandbox on the server's stderr; each result says it too
                    log.warning("exec server on %s: %s", self.root, self._sandbox.warning)
            return self._sandbox

    async def aclose(self) -> None:
        """Kill and delete the sandbox if it was opened; the next command opens a new one."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                stack, self._stack, self._sandbox = self._stack, None, None
                if stack is not None:
                    await stack.aclose()
