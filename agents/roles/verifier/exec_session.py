"""The verifier's one session with the `exec` tool server: `run_tests`, `run_example` and
`run_static_checks`.

The results are read open-world (unknown fields ignored) into the few fields the verifier uses;
the server owns their full schema. A tool error result (the sandbox failed, arguments refused) or
a broken session becomes `ExecUnavailable`, which the verifier reports as `env.infra`: not the
patch's fault. Each call is given the time left before the deadline as its `timeout_s`, so the
sandbox kills a hanging suite and reports `timed_out` before the deadline passes.
"""

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from agents.roles.verifier.errors import VerifierError
from agents.runtime.tools import NotingClient, ScopeName, ToolTarget, mcp_client

_OPEN = ConfigDict(extra="ignore", frozen=True)
MAX_CALL_TIMEOUT_S = 1800.0
"""The exec server's own cap on `timeout_s`."""
TRANSPORT_GRACE_S = 15.0
"""Beyond a call's `timeout_s`: the sandbox's kill and report; past it the call itself is abandoned."""
BUILD_GRACE_S = 1800.0
"""Beyond the first call's: the exec server builds the project environment at its first command,
before the command's own timeout starts (the build has its own limit, 30 minutes by default)."""


EXEC_SCOPES: frozenset[ScopeName] = frozenset({"read", "execute"})
"""The grant of every exec server the verifier opens: it reads and runs, never writes."""


class ExecUnavailable(VerifierError):
    """The exec server could not run the call (sandbox error, refused arguments, lost session)."""


class TestFailure(BaseModel):
    __test__ = False
    model_config = _OPEN
    test_id: str
    outcome: str = "failed"
    """`failed` or `error` today; read as text so a new outcome does not break the session."""
    file: str = ""
    line: int = 0
    message: str = ""
    traceback: str = ""
    failure_class: str | None = None
    """For a test file that could not be collected: `env.setup` or `test.collection_error`."""


class Crash(BaseModel):
    """Where a failing test's exception was raised: path (root-relative inside the repository),
    line, the exception's first line."""

    model_config = _OPEN
    path: str
    line: int
    message: str = ""


class TestCoverage(BaseModel):
    """Per measured file, per test (node id; "" outside any test), the lines it executed; every
    test's outcome (`tool_servers.exec.test_coverage`)."""

    __test__ = False
    model_config = _OPEN
    files: dict[str, dict[str, list[int]]] = {}
    outcomes: dict[str, str] = {}
    crashes: dict[str, Crash] = {}
    error: str | None = None


class StatementRun(BaseModel):
    """What one statement of the task's example did (the exec server's `run_example`)."""

    model_config = _OPEN
    source: str = ""
    raised: str | None = None
    """`Type: first line of the message`, or None."""
    in_repository: bool = False
    import_error: bool = False
    output: str = ""
    shown_output: str | None = None
    """The output the task's text shows under this expression, when it shows one."""
    causes: list[str] = []
    """The type names of the exceptions the raised one came from, nearest first."""
    bound: str | None = None
    """The repository's import run first for a name the example never binds, if one was."""


class ExampleRun(BaseModel):
    """The task's example run statement by statement on one tree."""

    model_config = _OPEN
    ran: bool = False
    statements: list[StatementRun] = []
    shown_exceptions: list[str] = []
    """Exception type names the task's text shows raised."""
    timed_out: bool = False
    note: str | None = None


class SetupProblem(BaseModel):
    """Why the suite (or part of it) could not run: `env.setup` or `test.collection_error`."""

    model_config = _OPEN
    failure_class: str = "env.setup"
    message: str = ""
    module: str | None = None
    file: str | None = None
    step: str | None = None


class EnvironmentUsed(BaseModel):
    """The project environment a run used (None in `TestRun`: codeloop's own interpreter)."""

    model_config = _OPEN
    key: str = ""
    kind: str = ""
    source: str = ""
    python_version: str = ""
    built: bool = False
    build_s: float = 0.0
    lookup_s: float = 0.0

    def describe(self) -> str:
        """One phrase for a report: which environment, and what getting it cost."""
        built = f"built in {self.build_s:.1f} s" if self.built else "cached"
        return f"environment {self.key[:12]} ({self.kind or 'recipe'} from {self.source or '?'}, Python {self.python_version}, {built})"


_KILLED = re.compile(r"\[codeloop sandbox: (killed at [^;\]]+)")
"""The line the sandbox adds to a command's stderr when it killed the command."""
_LIMIT_SETTINGS = {"CPU time": "cpu_time_s", "memory": "memory_mb"}
"""A limit's words in that line -> the configuration key setting it (a timeout is the deadline's)."""


class TestRun(BaseModel):
    __test__ = False
    model_config = _OPEN
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[TestFailure] = []
    exit_code: int | None = None
    timed_out: bool = False
    report_found: bool = False
    output_tail: str = ""
    duration_s: float = 0.0
    coverage: TestCoverage | None = None
    setup_error: SetupProblem | None = None
    environment: EnvironmentUsed | None = None

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    @property
    def truncated(self) -> bool:
        """More tests failed than the report lists."""
        return self.failed + self.errors > len(self.failures)

    @property
    def killed(self) -> str | None:
        """The sandbox killed the run at one of its limits: which one, and the setting that
        raises it ("killed at the CPU time limit of 300 s; [sandbox] cpu_time_s raises it")."""
        found = _KILLED.search(self.output_tail)
        if found is None:
            return None
        setting = next((s for word, s in _LIMIT_SETTINGS.items() if word in found[1]), None)
        return found[1] + (f"; [sandbox] {setting} raises it" if setting else "")


class StaticFinding(BaseModel):
    model_config = _OPEN
    path: str
    line: int = 0
    column: int = 0
    code: str = ""
    message: str = ""


class StaticRun(BaseModel):
    model_config = _OPEN
    ok: bool = False
    findings: list[StaticFinding] = []
    files_checked: int = 0


class ExecSession:
    """Calls on one open MCP client session of the exec server."""

    def __init__(
        self, client: NotingClient, *, before_call: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self._client = client
        self._before_call = before_call
        self._first = True

    async def _call(self, tool: str, arguments: dict[str, JsonValue], timeout_s: float) -> dict[str, object]:
        if self._before_call is not None:
            await self._before_call()
        limit = timeout_s + TRANSPORT_GRACE_S + (BUILD_GRACE_S if self._first else 0.0)
        self._first = False
        try:
            with anyio.fail_after(limit):
                result = await self._client.call_tool(tool, arguments)
        except TimeoutError as exc:
            raise ExecUnavailable(f"{tool} did not answer within {limit:.0f} s") from exc
        except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ExecUnavailable(f"{tool} failed: {exc}") from exc
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(c, "text", "") for c in result.content)[:300]
            raise ExecUnavailable(f"{tool} returned an error: {text or 'no details'}")
        return result.structured_content

    async def run_tests(
        self, paths: list[str], *, timeout_s: float, coverage_files: list[str] | None = None
    ) -> TestRun:
        """pytest on `paths` (empty: the suite's default selection); with `coverage_files`, under
        coverage of those files, one context per test (`TestRun.coverage`).

        Raises:
            ExecUnavailable: see the module docstring.
        """
        timeout_s = max(1.0, min(timeout_s, MAX_CALL_TIMEOUT_S))
        arguments: dict[str, JsonValue] = {"paths": [*paths], "timeout_s": timeout_s}
        if coverage_files:
            arguments["coverage_files"] = [*coverage_files]
        content = await self._call("run_tests", arguments, timeout_s)
        try:
            return TestRun.model_validate(content)
        except ValidationError as exc:
            raise ExecUnavailable(f"unreadable run_tests result: {exc.error_count()} errors") from exc

    async def run_example(self, text: str, *, timeout_s: float) -> ExampleRun:
        """The code `text` shows, run statement by statement on the root (`run_example`).

        Raises:
            ExecUnavailable: see the module docstring.
        """
        timeout_s = max(1.0, min(timeout_s, 600.0))
        content = await self._call("run_example", {"text": text, "timeout_s": timeout_s}, timeout_s + 30.0)
        try:
            return ExampleRun.model_validate(content)
        except ValidationError as exc:
            raise ExecUnavailable(f"unreadable run_example result: {exc.error_count()} errors") from exc

    async def run_static_checks(self, paths: list[str], *, timeout_s: float) -> StaticRun:
        """Ruff's correctness gate and a compile of each of `paths`.

        Raises:
            ExecUnavailable: see the module docstring.
        """
        timeout_s = max(1.0, min(timeout_s, MAX_CALL_TIMEOUT_S))
        content = await self._call(
            "run_static_checks", {"paths": [*paths], "timeout_s": timeout_s}, timeout_s
        )
        try:
            return StaticRun.model_validate(content)
        except ValidationError as exc:
            raise ExecUnavailable(f"unreadable run_static_checks result: {exc.error_count()} errors") from exc


@asynccontextmanager
async def open_exec_session(target: ToolTarget) -> AsyncIterator[ExecSession]:
    """One MCP client session on the exec server `target`, so one sandbox serves every call.

    Raises:
        ExecUnavailable: the session could not be opened or broke.
    """
    try:
        async with mcp_client(target) as client:
            yield ExecSession(client, before_call=getattr(target, "before_call", None))
    except (MCPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise ExecUnavailable(f"exec server session failed: {exc}") from exc
