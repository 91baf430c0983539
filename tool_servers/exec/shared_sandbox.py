"""The one sandbox of an `exec` server, and the Python toolchain commands find inside it.

`SharedSandbox` opens the sandbox at the first command (listing tools or a refused call never
starts one), reuses it for every later command, and closes it when the server's lifespan ends.
The sandbox layer itself starts a fresh container after a command that killed it (memory limit)
or timed out, so the same object keeps serving. Its failures become `sandbox_error` results.

Which Python: the project environment (`sandbox.environments`) when the root has a recipe — the
`[environment]` settings, or one detected from its files, the root's own virtualenv included —
resolved, and built if the cache lacks it, when the first command opens the sandbox (listing
tools never does), once per server; else the interpreter running codeloop, whose virtualenv has
pytest and ruff. codeloop's virtualenv is outside the workspace, so it is shown read-only inside
the sandbox (`open_sandbox(ro_paths=...)`), and its `bin/` follows the environment's on the
sandbox's PATH (ruff comes from it). An environment that cannot be made ready is remembered for
the server's life (`environment_error`): test runs report it as `env.setup`, other commands as a
`sandbox_error`, and nothing runs with a wrong interpreter in its place.
"""

import logging
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

# Submodules, not the package: under pytest, tests/sandbox/ can shadow the top-level `sandbox`
# package as a namespace package, while the editable install still resolves its submodules.
from sandbox import errors as sandbox_errors
from sandbox.backend import BackendChoice, open_sandbox
from sandbox.environments.environment import Environment, EnvironmentInfo
from sandbox.environments.opening import open_environment
from sandbox.environments.settings import EnvironmentSettings
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.result import Backend, ExecResult
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


_PYTEST_METADATA = re.compile(r"^pytest-\d[^-]*\.(dist-info|egg-info)$")
"""pytest's own metadata directory (`pytest-4.6.0.dist-info`), not a plugin's (`pytest_cov-...`)."""


def has_pytest(venv: Path) -> bool:
    """pytest is installed in `venv`: its package, or its distribution's metadata. The metadata
    is what an editable install leaves (pytest's own repository, tested with itself: the code
    stays in the project, a `.pth` file points there), as are an old pytest's single `pytest.py`
    and its `.egg-link`. Read from the files alone: the host never runs a project's interpreter,
    whose `.pth` files may execute the project's code."""
    for site in venv.glob("lib/python3*/site-packages"):
        if (site / "pytest" / "__init__.py").is_file() or (site / "pytest.py").is_file():
            return True
        if (site / "pytest.egg-link").is_file():
            return True
        if any(_PYTEST_METADATA.match(entry.name) for entry in site.iterdir()):
            return True
    return False


def _environment_has_pytest(environment: Environment) -> bool:
    """pytest in the environment or, for a layer, in a parent whose site-packages it sees."""
    return any(
        has_pytest(e.venv) or (e.tools_path is not None and (e.tools_path / "pytest").is_dir())
        for e in environment.chain()
    )


def find_toolchain(root: Path, environment: Environment | None = None) -> Toolchain:
    """The toolchain for `root`, looked up now (a command may have created a virtualenv); with a
    project environment, its interpreter runs the tests and the checks."""
    own_bin = Path(sys.executable).parent
    own_python = str(Path(sys.executable))
    if environment is not None:
        python = str(environment.python)
        test_python = python if _environment_has_pytest(environment) else own_python
        bins = [str(environment.venv / "bin"), str(own_bin)]
        ruff = next(
            (str(p) for p in (environment.venv / "bin" / "ruff", own_bin / "ruff") if p.is_file()), None
        )
        return Toolchain(
            python=python,
            test_python=test_python,
            warm_tests=test_python == own_python,
            ruff=ruff,
            path=":".join([*dict.fromkeys(bins), *SYSTEM_PATH]),
        )
    venv = _workspace_venv(root)
    bins = ([str(venv / "bin")] if venv else []) + [str(own_bin)]
    ruff_candidates = ([venv / "bin" / "ruff"] if venv else []) + [own_bin / "ruff"]
    ruff = next((str(p) for p in ruff_candidates if p.is_file()), None)
    python = str(venv / "bin" / "python") if venv else own_python
    test_python = python if venv and has_pytest(venv) else own_python
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
        environment: EnvironmentSettings | None = None,
    ) -> None:
        self.root = root
        self.environment_settings = environment
        """How the root's project environment is found and built; None: codeloop's interpreter."""
        self.environment: Environment | None = None
        """The environment the open sandbox runs commands in (None: codeloop's interpreter)."""
        self.environment_info: EnvironmentInfo | None = None
        """Its key, recipe source and build time, as this server got it, for tool results."""
        self.environment_error: sandbox_errors.EnvironmentSetupError | None = None
        """Why the root's environment could not be made ready (remembered for the server's life)."""
        self._environment_tried = False
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
        self,
        argv: list[str],
        *,
        timeout_s: float,
        cwd: str,
        env: dict[str, str],
        warm: bool | Literal["if_ready"] = False,
        require_environment: bool = True,
    ) -> ExecResult:
        """Run one command; a failing or timed-out command is a result. `warm`: a pytest run that
        may start in the interpreter `keep_warm` prepared, or only once it is ready (`"if_ready"`,
        see `Sandbox.exec`).
        `require_environment`: refuse to run when the project environment could not be made
        ready (False: run with codeloop's interpreter instead, for commands that do not need
        the project's packages). The result carries the environment it ran in.

        Raises:
            SandboxError: the sandbox could not start or died for a reason not of the command, or
                the project environment could not be made ready (`sandbox_error` names the
                EnvironmentSetupError: RecipeInvalid, PythonNotFound, BuildFailed).
        """
        box = await self._open(require_environment=require_environment)
        with sandbox_errors_as_tool_errors():
            result = await box.exec(argv, timeout_s=timeout_s, cwd=cwd, env=env, warm=warm)
        return (
            result.model_copy(update={"environment": self.environment_info})
            if self.environment_info
            else result
        )

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

    @property
    def backend_in_use(self) -> Backend | None:
        """The backend of the open sandbox; None before one is open."""
        return None if self._sandbox is None else self._sandbox.backend

    @property
    def warning_in_use(self) -> str | None:
        """The open sandbox's warning (the weaker backend ran); None under gVisor or before."""
        return None if self._sandbox is None else self._sandbox.warning

    async def prepare(self) -> None:
        """Opens the sandbox now — resolving, and if needed building, the project environment —
        without failing on an environment that cannot be made ready (see `environment_error`).

        Raises:
            SandboxError: the sandbox itself could not start.
        """
        await self._open(require_environment=False)

    async def _lease_environment(self, stack: AsyncExitStack) -> None:
        """Resolves the root's environment once per server, holding its lease in `stack`."""
        settings = self.environment_settings
        if settings is None or self._environment_tried and self.environment_error is not None:
            return
        self._environment_tried = True
        try:
            lease = await stack.enter_async_context(
                open_environment(self.root, settings, progress=lambda line: log.info("environment: %s", line))
            )
        except sandbox_errors.EnvironmentSetupError as exc:
            log.warning("exec server on %s: the project environment is not usable: %s", self.root, exc)
            self.environment_error = exc
            return
        if lease is not None:
            self.environment, self.environment_info = lease.environment, lease.info

    async def _open(self, *, require_environment: bool = True) -> Sandbox:
        async with self._lock:
            if self._sandbox is None:
                stack = AsyncExitStack()
                try:
                    await self._lease_environment(stack)
                    with sandbox_errors_as_tool_errors():
                        self._sandbox = await stack.enter_async_context(
                            open_sandbox(
                                self.root,
                                limits=self.limits,
                                backend=self.backend,  # pyright: ignore[reportArgumentType] - the backend was validated by parse_policy when the server was built
                                gvisor=self.gvisor,
                                ro_paths=codeloop_runtime(self.root),
                                policy=self.policy,
                                environment=self.environment,
                            )
                        )
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await stack.aclose()
                    raise
                self._stack = stack
                if (
                    self._sandbox.warning
                ):  # said once per sandbox on the server's stderr; each result says it too
                    log.warning("exec server on %s: %s", self.root, self._sandbox.warning)
            if require_environment and self.environment_error is not None:
                raise SandboxError(
                    f"the project environment could not be made ready ({self.environment_error.failure_class}): "
                    f"{self.environment_error}",
                    sandbox_error=type(self.environment_error).__name__,
                )
            return self._sandbox

    async def aclose(self) -> None:
        """Kill and delete the sandbox if it was opened (and let go of its environment's lease);
        the next command opens a new one."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                stack, self._stack, self._sandbox = self._stack, None, None
                self.environment = None
                if stack is not None:
                    await stack.aclose()
