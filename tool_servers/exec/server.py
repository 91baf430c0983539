"""The `exec` server: run commands, tests and static checks on the root, in the sandbox.

Tools (all in scope `execute`, all run in one sandbox per server, see `shared_sandbox`):

- `run_command`: a program and its arguments (no shell). Allowlisted programs run at once;
  anything else asks a human first (`allowlist.py`), or is `needs_confirmation` for a client
  that cannot elicit. The result is the sandbox's `ExecResult`.
- `run_tests`: pytest, with a structured result read from its JUnit report (`pytest_report.py`).
- `run_static_checks`: ruff (JSON) and a compile of every file (`static_checks.py`).

A command that fails, or runs past its timeout and is killed, is data, not an error (STYLE.md
section 5): the result has `exit_code` and `timed_out=true`. Error results are for the sandbox
itself failing (`sandbox_error`) and for arguments that are invalid or leave the root.
"""

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from layout import TREE_OUTBOX
from sandbox.backend import BackendChoice
from sandbox.environments.settings import EnvironmentSettings
from sandbox.errors import EnvironmentSetupError
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.result import ExecResult
from tool_servers.confinement import Root
from tool_servers.exec.allowlist import confirmation_action
from tool_servers.exec.environment_span import mark_current_span
from tool_servers.exec.example_run import (
    SETUP_ALLOWANCE_S,
    ExampleOutcome,
    RunExampleInput,
    example_request,
    read_outcome,
    runner_argv,
)
from tool_servers.exec.pytest_report import (
    MAX_FAILURES,
    ReportError,
    SetupProblem,
    TestFailure,
    TestRunOutput,
    output_tail,
    parse_junit,
    read_junit_file,
)
from tool_servers.exec.pytest_warmup import warm_pytest_cache
from tool_servers.exec.setup_problems import (
    classify_failures,
    from_collection_errors,
    from_environment_error,
    from_output,
)
from tool_servers.exec.shared_sandbox import SharedSandbox, Toolchain, find_toolchain
from tool_servers.exec.static_checks import (
    CHECKS_SCRIPT,
    DEFAULT_SELECT,
    RULE_SELECTOR,
    CheckRun,
    Finding,
    StaticChecksOutput,
    merge,
    parse_compile,
    parse_ruff,
    split_checks,
)
from tool_servers.exec.test_command import TestCommand, TestCommandError, find_test_command, parse_outcomes
from tool_servers.exec.test_coverage import (
    MAX_COVERAGE_FILES,
    TestCoverage,
    coverage_argv,
    include_patterns,
    read_coverage,
)
from tool_servers.project_environment import default_environment_settings
from tool_servers.protocol.errors import InvalidArguments, NotFound
from tool_servers.protocol.scopes import Risk, Scope
from tool_servers.protocol.sdk import build_server
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec

MAX_TIMEOUT_S = 1800.0
REPORT_DIR = Path(TREE_OUTBOX)
"""Where pytest writes its JUnit report (read back and deleted after each run): the sandbox's
outbox (`sandbox.workspace.OUTBOX`), the one place under `.codeloop/` whose writes reach the host."""
_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
_QUIET_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
"""Tests and checks should not litter the workspace with __pycache__ directories."""


def _check_args(values: list[str]) -> list[str]:
    for value in values:
        if "\x00" in value:
            raise ValueError("arguments may not contain NUL bytes")
    return values


class RunCommandInput(BaseModel):
    model_config = _CONFIG
    argv: list[str] = Field(min_length=1, max_length=1000)
    """Program and arguments, run without a shell, e.g. `["pytest", "-q", "tests/test_x.py"]`. The
    program is found on the sandbox's PATH (the workspace's virtualenv first). Programs off the
    allowlist (python, pytest, ruff, mypy, make, read-only file and git commands) ask a human."""
    cwd: str = "."
    """Working directory, relative to the root."""
    timeout_s: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S)
    """Wall-clock limit; past it the command is killed and the result says `timed_out`."""

    @field_validator("argv")
    @classmethod
    def _program_named(cls, argv: list[str]) -> list[str]:
        if not argv[0].strip():
            raise ValueError("argv[0] must name a program")
        return _check_args(argv)


class RunTestsInput(BaseModel):
    model_config = _CONFIG
    paths: list[str] = Field(default=[], max_length=200)
    """Test files, directories or node ids (`tests/test_x.py::test_y`), relative to the root;
    empty runs pytest's default selection."""
    keyword: str | None = Field(default=None, max_length=500)
    """Only tests matching this `-k` expression."""
    max_failures: int | None = Field(default=None, ge=1)
    """Stop after this many failures (`--maxfail`)."""
    timeout_s: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT_S)
    """Wall-clock limit of the whole run."""
    coverage_files: list[str] = Field(default=[], max_length=MAX_COVERAGE_FILES)
    """Files (relative to the root) to measure per test with coverage.py: the result's `coverage`
    then says which lines of them each test executed, and every test's outcome. Empty: a plain
    run. The run starts a fresh interpreter, so it costs a second more than a plain one."""


class StaticChecksInput(BaseModel):
    model_config = _CONFIG
    paths: list[str] = Field(default=["."], min_length=1, max_length=200)
    """Files or directories to check, relative to the root."""
    select: list[str] = Field(default=list(DEFAULT_SELECT), min_length=1, max_length=100)
    """Ruff rule selectors (`--select`); the default is the correctness gate E9, F63, F7, F82."""
    timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S)
    """Wall-clock limit of each checker."""

    @field_validator("select")
    @classmethod
    def _selectors(cls, select: list[str]) -> list[str]:
        bad = [s for s in select if not RULE_SELECTOR.match(s)]
        if bad:
            raise ValueError(f"not ruff rule selectors: {bad} (expected codes or prefixes like F82, E9, ALL)")
        return select


class ExecTools:
    """Handlers of the `exec` server over one root and its shared sandbox."""

    def __init__(self, root: Root, box: SharedSandbox) -> None:
        self.root = root
        self.box = box

    @property
    def prefixes(self) -> tuple[str, ...]:
        """Absolute spellings of the root in reported paths: gVisor shows it at /workspace, and at
        the project environment's project path, where its editable install imports from."""
        spellings = [str(self.root.path) + "/", "/workspace/"]
        environment = self.box.environment
        if environment is not None and environment.project_path is not None:
            spellings.append(str(environment.project_path) + "/")
        return tuple(spellings)

    def _relative_paths(self, raw: list[str], *, node_ids: bool = False) -> list[str]:
        """Root-relative spellings of `raw`, refused when they leave the root or do not exist."""
        paths = []
        for item in raw:
            path, sep, rest = item.partition("::") if node_ids else (item, "", "")
            if path.startswith("-"):
                raise InvalidArguments(f"{item!r} is not a path (it starts with '-')", path=item)
            resolved = self.root.resolve(path)
            if not resolved.exists():
                raise NotFound(f"{path}: no such file or directory under the root", path=path)
            paths.append(self.root.relative(resolved) + sep + rest)
        return paths

    def confirm_command(self, args: RunCommandInput) -> str | None:
        return confirmation_action(args.argv)

    async def run_command(self, args: RunCommandInput, call: CallContext) -> ExecResult:
        cwd = self._relative_paths([args.cwd])[0]
        if not self.root.resolve(cwd).is_dir():
            raise InvalidArguments(f"cwd {args.cwd!r} is not a directory", cwd=args.cwd)
        await self.box.prepare()
        env = {"PATH": find_toolchain(self.root.path, self.box.environment).path}
        return await self.box.exec(args.argv, timeout_s=args.timeout_s, cwd=cwd, env=env)

    async def run_example(self, args: RunExampleInput, call: CallContext) -> ExampleOutcome:
        request = example_request(args.text, args.timeout_s)
        if request is None:
            return ExampleOutcome(ran=False, note="the text shows no example code to run")
        await self.box.prepare()
        if self.box.environment_error is not None:
            return ExampleOutcome(
                ran=False, note=f"the project environment is not ready: {self.box.environment_error}"
            )
        tools = find_toolchain(self.root.path, self.box.environment)
        env = {"PATH": tools.path, "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8", **_QUIET_ENV}
        result = await self.box.exec(
            runner_argv(tools.python, request[1]),
            timeout_s=args.timeout_s + SETUP_ALLOWANCE_S,
            cwd=".",
            env=env,
        )
        return read_outcome(
            args.text, result.stdout, result.stderr, result.timed_out, result.backend, result.duration_s
        )

    async def run_tests(self, args: RunTestsInput, call: CallContext) -> TestRunOutput:
        selection = self._relative_paths(args.paths, node_ids=True)
        await self.box.prepare()
        if self.box.environment_error is not None:
            return self._unbuilt(self.box.environment_error)
        try:
            command = find_test_command(self.root.path)
        except TestCommandError as exc:
            return self._unrunnable(SetupProblem(failure_class="env.setup", message=str(exc)))
        tools = find_toolchain(self.root.path, self.box.environment)
        if command.kind != "pytest":
            return await self._run_command_tests(command, tools, selection, args)
        # Through the confinement check: a `.codeloop` symlink must not lead the host's writes out.
        report_dir = self.root.resolve(str(REPORT_DIR))
        await anyio.to_thread.run_sync(_make_report_dir, report_dir)
        report = report_dir / f"junit-{uuid.uuid4().hex}.xml"
        pytest_args = [
            "-p",
            "no:cacheprovider",
            "--tb=short",
            "-q",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={REPORT_DIR / report.name}",
            "--continue-on-collection-errors",
            "--rootdir=.",
            *(command.pytest_args or []),
        ]
        if args.keyword is not None:
            pytest_args += ["-k", args.keyword]
        if args.max_failures is not None:
            pytest_args.append(f"--maxfail={args.max_failures}")
        pytest_args += ["--", *selection] if selection else []
        measured = self._relative_paths(args.coverage_files)
        coverage_file = report_dir / f"coverage-{uuid.uuid4().hex}.json"
        if measured:
            argv = coverage_argv(
                tools.test_python,
                str(REPORT_DIR / coverage_file.name),
                include_patterns(measured, self.prefixes),
                pytest_args,
            )
        else:
            argv = [tools.test_python, "-m", "pytest", *pytest_args]
        env = {"PATH": tools.path, **_QUIET_ENV}
        await warm_pytest_cache(tools.test_python)
        counts, failures, found, report_error = None, [], False, None
        coverage: TestCoverage | None = None
        try:
            result = await self.box.exec(
                argv,
                timeout_s=args.timeout_s,
                cwd=".",
                env=env,
                # The coverage run usually comes right after the static checks asked for the warm
                # interpreter: waiting for its imports (every plugin's) can take longer than a
                # cold start of a repository that disables plugins. In a spare it is ready.
                warm=("if_ready" if measured else True) if tools.warm_tests else False,
            )
            if measured:
                coverage = await anyio.to_thread.run_sync(read_coverage, coverage_file, self.prefixes)
            # The report is the tested code's output: read and parsed as hostile (`pytest_report`).
            xml = await anyio.to_thread.run_sync(read_junit_file, report)
            if xml is not None:
                counts, failures = await anyio.to_thread.run_sync(
                    lambda: parse_junit(xml, root_prefixes=self.prefixes)
                )
                found = True
        except ReportError as exc:
            report_error = str(exc)
        finally:
            await anyio.Path(report).unlink(missing_ok=True)
            await anyio.Path(coverage_file).unlink(missing_ok=True)
            await anyio.to_thread.run_sync(_remove_report_dir, report_dir)
        failures = classify_failures(self.root.path, failures)
        if not found:
            output = f"{result.stdout}\n{result.stderr}"
            setup_error = from_output(self.root.path, output, self.prefixes, tools.test_python)
        elif counts is not None and counts.passed + counts.failed + counts.skipped == 0:
            setup_error = from_collection_errors(self.root.path, failures)
        else:
            setup_error = None
        mark_current_span(self.box.environment_info)
        return TestRunOutput(
            passed=counts.passed if counts else 0,
            failed=counts.failed if counts else 0,
            errors=counts.errors if counts else 0,
            skipped=counts.skipped if counts else 0,
            failures=failures,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            report_found=found,
            output_tail=output_tail(result.stdout, result.stderr),
            python=tools.test_python,
            backend=result.backend,
            warning=result.warning,
            duration_s=result.duration_s,
            report_error=report_error,
            environment=self.box.environment_info,
            setup_error=setup_error,
            coverage=coverage,
        )

    async def _run_command_tests(
        self, command: TestCommand, tools: Toolchain, selection: list[str], args: RunTestsInput
    ) -> TestRunOutput:
        """The tests run by the repository's own command (not pytest), outcomes read from its
        verbose output (`test_command`); no per-test coverage."""
        files = list(dict.fromkeys(s.split("::")[0] for s in selection))
        env = {"PATH": tools.path, **_QUIET_ENV}
        result = await self.box.exec(
            command.argv(tools.test_python, files), timeout_s=args.timeout_s, cwd=".", env=env
        )
        output = f"{result.stdout}\n{result.stderr}"
        outcomes = parse_outcomes(command, self.root.path, output)
        failures = [
            TestFailure(
                test_id=tid,
                outcome="failed" if o == "failed" else "error",
                file=tid.split("::")[0],
                line=0,
                message=o,
                traceback="",
            )
            for tid, o in outcomes.items()
            if o in ("failed", "error")
        ][:MAX_FAILURES]
        counts = {
            o: sum(1 for v in outcomes.values() if v == o) for o in ("passed", "failed", "error", "skipped")
        }
        coverage = None
        if args.coverage_files:
            coverage = TestCoverage(
                outcomes=outcomes,
                error=f"per-test coverage needs pytest; the tests run with {' '.join(command.argv('python', []))[:200]}",
            )
        return TestRunOutput(
            passed=counts["passed"],
            failed=counts["failed"],
            errors=counts["error"],
            skipped=counts["skipped"],
            failures=failures,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            report_found=bool(outcomes),
            output_tail=output_tail(result.stdout, result.stderr),
            python=tools.test_python,
            backend=result.backend,
            warning=result.warning,
            duration_s=result.duration_s,
            environment=self.box.environment_info,
            coverage=coverage,
        )

    def _unbuilt(self, error: EnvironmentSetupError) -> TestRunOutput:
        """The result of a test run that could not start: the project environment is not usable."""
        return self._unrunnable(from_environment_error(error), getattr(error, "log_tail", "") or str(error))

    def _unrunnable(self, problem: SetupProblem, tail: str = "") -> TestRunOutput:
        """The result of a test run that could not start, `problem` saying why."""
        return TestRunOutput(
            passed=0,
            failed=0,
            errors=0,
            skipped=0,
            failures=[],
            exit_code=None,
            timed_out=False,
            report_found=False,
            output_tail=tail or problem.message,
            python="",
            backend=self.box.backend_in_use or "process",
            warning=self.box.warning_in_use,
            duration_s=0.0,
            setup_error=problem,
        )

    async def run_static_checks(self, args: StaticChecksInput, call: CallContext) -> StaticChecksOutput:
        paths = self._relative_paths(args.paths)
        # The checks need no project package: with an environment that could not be built they
        # run on codeloop's interpreter instead.
        await self.box.prepare()
        tools = find_toolchain(self.root.path, self.box.environment)
        env = {"PATH": tools.path, **_QUIET_ENV}
        if tools.warm_tests:
            # Test runs usually follow the checks: the sandbox imports pytest while they run.
            await warm_pytest_cache(tools.test_python)
            await self.box.keep_warm(tools.test_python, env)
        ruff_argv = []
        if tools.ruff is not None:
            ruff_argv = [
                tools.ruff,
                "check",
                "--output-format=json",
                "--no-cache",
                "--force-exclude",
                f"--select={','.join(args.select)}",
            ]
        # No "--" here: after -c every word is the script's argument (paths never start with "-").
        argv = [tools.python, "-I", "-S", "-c", CHECKS_SCRIPT, str(len(ruff_argv)), *ruff_argv, *paths]
        result = await self.box.exec(
            argv, timeout_s=args.timeout_s, cwd=".", env=env, require_environment=False
        )
        compile_out, ruff_out = split_checks(result.stdout)
        compiled, checked = parse_compile(compile_out, self.prefixes)
        compile_run = CheckRun(
            tool="py_compile",
            exit_code=0 if checked is not None else result.exit_code,
            timed_out=result.timed_out and checked is None,
            note="" if checked is not None else output_tail(result.stdout, result.stderr, lines=10),
        )
        if tools.ruff is None:
            ruff_run = CheckRun(tool="ruff", exit_code=None, timed_out=False, note="ruff is not installed")
            ruff_findings: list[Finding] = []
        else:
            ruff_run, ruff_findings = self._ruff_run(result, ruff_out)
        runs = [ruff_run, compile_run]
        findings = merge(ruff_findings, compiled)
        complete = all(r.exit_code in (0, 1) and not r.timed_out and not r.note for r in runs)
        return StaticChecksOutput(
            ok=complete and not findings,
            findings=findings,
            files_checked=checked or 0,
            runs=runs,
            backend=result.backend,
            warning=result.warning,
            duration_s=round(result.duration_s, 4),
        )

    def _ruff_run(self, result: ExecResult, ruff_out: str | None) -> tuple[CheckRun, list[Finding]]:
        """Ruff's part of the checks command: its run and findings (`ruff_out` None: the compile
        pass before it did not finish, so ruff never started)."""
        if ruff_out is None:
            note = "not run: the compile pass did not finish"
            return CheckRun(tool="ruff", exit_code=None, timed_out=result.timed_out, note=note), []
        findings, note = [], ""
        try:
            if not result.timed_out:
                findings = parse_ruff(ruff_out, self.prefixes)
        except (ValueError, TypeError, AttributeError):
            note = f"unreadable ruff output: {output_tail(ruff_out, result.stderr, lines=10)}"
        if result.exit_code not in (0, 1) and not note:
            note = output_tail(ruff_out, result.stderr, lines=10)
        return CheckRun(
            tool="ruff", exit_code=result.exit_code, timed_out=result.timed_out, note=note
        ), findings


_OUTBOX_IGNORE = "# codeloop tool reports: not part of the project\n*\n"


def _make_report_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    # Ignored while it exists, so a report never shows in git status or a commit.
    gitignore = path.parent / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text(_OUTBOX_IGNORE)


def _remove_report_dir(path: Path) -> None:
    """Undo `_make_report_dir` once the report is read: a call leaves the tree as it found it,
    apart from what the tests themselves wrote. Only what is empty, or ours, is removed."""
    try:
        path.rmdir()
        gitignore = path.parent / ".gitignore"
        if sorted(p.name for p in path.parent.iterdir()) == [".gitignore"] and (
            gitignore.read_text() == _OUTBOX_IGNORE
        ):
            gitignore.unlink()
            path.parent.rmdir()
    except OSError:  # not empty (another run's report, the user's files): leave it
        pass


def exec_tools(tools: ExecTools) -> list[ToolSpec]:
    """The `exec` tool specs."""
    return [
        ToolSpec(
            name="run_command",
            description=(
                "Run a program (no shell) in the sandbox on the root; returns exit_code, stdout, stderr, "
                "timed_out. Allowlisted programs (python, pytest, ruff, read-only file and git commands) "
                "run at once; others ask a human."
            ),
            scope=Scope.EXECUTE,
            input_model=RunCommandInput,
            output_model=ExecResult,
            handler=tools.run_command,
            risk=Risk.MEDIUM,
            read_only=False,
            destructive=True,
            idempotent=False,
            confirm=tools.confirm_command,
        ),
        ToolSpec(
            name="run_tests",
            description=(
                "Run pytest in the sandbox; returns passed/failed/error/skipped counts and, per failure, "
                "the test id, file:line, message and a trimmed traceback."
            ),
            scope=Scope.EXECUTE,
            input_model=RunTestsInput,
            output_model=TestRunOutput,
            handler=tools.run_tests,
            risk=Risk.MEDIUM,
            read_only=False,
            destructive=False,
            idempotent=False,
        ),
        ToolSpec(
            name="run_example",
            description=(
                "Run the example code a task's text shows (its >>> sessions and code blocks) statement by "
                "statement in the sandbox, with the project's interpreter; returns per statement what it "
                "printed or raised, and the exceptions and outputs the text itself shows."
            ),
            scope=Scope.EXECUTE,
            input_model=RunExampleInput,
            output_model=ExampleOutcome,
            handler=tools.run_example,
            risk=Risk.MEDIUM,
            read_only=False,
            destructive=False,
            idempotent=False,
        ),
        ToolSpec(
            name="run_static_checks",
            description=(
                "Check Python files in the sandbox with ruff (a correctness gate by default) and a compile "
                "of each file; returns findings with path, line, code and message."
            ),
            scope=Scope.EXECUTE,
            input_model=StaticChecksInput,
            output_model=StaticChecksOutput,
            handler=tools.run_static_checks,
            risk=Risk.LOW,
            read_only=False,
            destructive=False,
            idempotent=True,
        ),
    ]


def build_exec_server(
    root: Path,
    options: ServerOptions | None = None,
    *,
    limits: SandboxLimits | None = None,
    backend: BackendChoice = "auto",
    gvisor: GvisorOptions | None = None,
    policy: str = "auto",
    environment: EnvironmentSettings | None = None,
    cache_root: Path | None = None,
    **_: Any,
) -> MCPServer[object]:
    """The `exec` MCP server on `root`: one sandbox (gVisor, or the process backend where
    `backend` and `policy` allow it), opened at the first command, closed with the server.

    `limits` apply to every command (default `SandboxLimits()`; a call's `timeout_s` replaces the
    wall-clock limit); `gvisor` says how runsc is run (default `GvisorOptions()`); `policy` is the
    deployment's CODELOOP_SANDBOX, read by the caller (a bad one makes each command a
    `sandbox_error` of type PolicyError). `environment` says how the root's project environment
    is found and built (the `[environment]` settings; `enabled=False` for none); default: detected
    from the root's files, cached under `cache_root` (codeloop's cache directory, default the
    platform's) in `environments/`.
    """
    confined = Root(root)
    box = SharedSandbox(
        confined.path,
        limits=limits or SandboxLimits(),
        backend=backend,
        gvisor=gvisor,
        policy=policy,
        environment=environment or default_environment_settings(cache_root),
    )

    @asynccontextmanager
    async def lifespan(_: MCPServer[object]) -> AsyncIterator[dict[str, object]]:
        async with box.serving():
            yield {}

    return build_server(
        "exec",
        exec_tools(ExecTools(confined, box)),
        options or ServerOptions(),
        instructions=(
            "Run commands, pytest and static checks on the root inside a sandbox (no network). "
            "A failing or timed-out command is a result, not an error."
        ),
        lifespan=lifespan,
    )
