"""`codeloop sandbox exec`: run one command in a sandbox on a workspace.

The contract other tools depend on, kept exactly:

    codeloop sandbox exec --workspace DIR [--timeout S] [--memory-mb N] [--backend gvisor|process]
                          [--network none] [--json] -- CMD [ARGS...]

With `--json` it prints one `ExecResult` as JSON. Without it, it behaves like the command: the
command's stdout and stderr, and its exit status, or 124 when the timeout killed it (as
coreutils' timeout) and 137 when another limit did. 125 means the sandbox itself failed (as
`docker run` and `timeout` use it), or the workspace's environment could not be made ready
(`env.setup`), with a message on stderr saying why and how to fix it.

The command runs in the workspace's project environment (`--environment auto`, the default): the
recipe its files describe (or its own `.venv`), built into codeloop's cache the first time, with
progress on stderr, its bin first on PATH. When the workspace describes none, codeloop's own
interpreter is on PATH, so `python -m pytest` works either way. `--environment none` runs the
command with the system's programs only.
"""

import signal
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail, usage_error
from codeloop.cli.env import environment_settings

if TYPE_CHECKING:  # imported when the command runs: `codeloop --help` stays fast
    import anyio

    from sandbox.backend import BackendChoice
    from sandbox.errors import SandboxError
    from sandbox.limits import SandboxLimits
    from sandbox.result import ExecResult

EXIT_SANDBOX_FAILED = 125
EXIT_TIMED_OUT = 124
EXIT_KILLED_AT_LIMIT = 137

sandbox_app = typer.Typer(
    no_args_is_help=True,
    help="Run commands in a gVisor sandbox (or the weaker process backend) on a workspace.",
)


@sandbox_app.command(
    "exec",
    context_settings={"allow_interspersed_args": False},
    no_args_is_help=True,
)
def exec_command(
    command: Annotated[
        list[str], typer.Argument(help="The command and its arguments, after `--`.", metavar="CMD [ARGS...]")
    ],
    workspace: Annotated[
        Path,
        typer.Option("--workspace", help="Directory shown read-write at /workspace (the working directory)."),
    ],
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0.001, help="Wall-clock limit in seconds; the command is killed after it."
        ),
    ] = 60.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", min=64, help="Memory limit in MiB.")] = 1024,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="gvisor or process. Default: CODELOOP_SANDBOX (gvisor|process|auto), auto = gvisor when runsc works.",
        ),
    ] = None,
    network: Annotated[
        str, typer.Option("--network", help="Network of the sandbox; only `none` exists.")
    ] = "none",
    environment: Annotated[
        str,
        typer.Option(
            "--environment",
            help="auto: the workspace's project environment (built on first use, progress on stderr), else "
            "codeloop's own interpreter; none: system programs only.",
        ),
    ] = "auto",
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print {"exit_code", "stdout", "stderr", "timed_out", "backend", "duration_s", "truncated"} '
            "instead of behaving like the command.",
        ),
    ] = False,
) -> None:
    """Run CMD in a sandbox on --workspace and report what it did.

    Example: codeloop sandbox exec --workspace . --timeout 120 --json -- python -m pytest -q
    """
    import anyio

    from codeloop.config.environment import tool_server_config
    from sandbox.backend import parse_policy
    from sandbox.errors import EnvironmentSetupError, PolicyError, SandboxError
    from sandbox.limits import SandboxLimits

    if network != "none":
        raise usage_error(
            f"--network {network!r} is not supported: sandboxes have no network; pass --network none"
        )
    if backend not in (None, "gvisor", "process"):
        raise usage_error(f"--backend {backend!r} is not one of gvisor, process")
    if not workspace.is_dir():
        raise usage_error(f"--workspace {workspace} is not an existing directory")
    if environment not in ("auto", "none"):
        raise usage_error(f"--environment {environment!r} is not one of auto, none")
    try:
        policy = parse_policy(tool_server_config().sandbox_policy)
    except PolicyError as exc:
        raise usage_error(f"{exc}; set it to gvisor, process or auto") from None

    limits = SandboxLimits(timeout_s=timeout, memory_mb=memory_mb)
    try:
        result = anyio.run(
            _exec_in_sandbox, command, workspace, limits, backend or "auto", policy, environment
        )
    except KeyboardInterrupt:
        raise fail("interrupted; the sandbox was killed and deleted", 130) from None
    if isinstance(result, EnvironmentSetupError):
        raise fail(f"env.setup: {result}", EXIT_SANDBOX_FAILED)
    if isinstance(result, SandboxError):
        raise fail(str(result), EXIT_SANDBOX_FAILED)
    if result is None:
        raise fail("terminated by a signal; the sandbox was killed and deleted", 143)
    if json_output:
        typer.echo(result.model_dump_json())
        return
    if result.warning and backend != "process":
        # The weaker backend never runs silently; asked for by name, the command stays exact.
        typer.echo(f"warning: {result.warning}", err=True)
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.write(result.stderr)
    if result.exit_code == 127 and result.stderr.startswith("codeloop sandbox: cannot run"):
        sys.stderr.write(missing_program_hint(environment))
    sys.stderr.flush()
    if result.timed_out:
        raise typer.Exit(EXIT_TIMED_OUT)
    raise typer.Exit(EXIT_KILLED_AT_LIMIT if result.exit_code is None else result.exit_code)


def missing_program_hint(environment: str) -> str:
    """The line after `cannot run 'python': no such program on the sandbox's PATH (...)`: what
    that PATH holds, and with `--environment none` where Python is."""
    if environment == "none":
        return (
            "codeloop sandbox: --environment none runs the system's programs only (there, Python is "
            "`python3`); leave it out to run in the workspace's environment, where `python` is its "
            "interpreter\n"
        )
    return (
        "codeloop sandbox: that PATH is the workspace's environment (or codeloop's own interpreter when "
        "it has none), then the system's programs; what the project needs belongs in its "
        "environment (`codeloop env show --repo DIR`)\n"
    )


async def _cancel_on_termination(scope: "anyio.CancelScope") -> None:
    """Cancel `scope` at SIGTERM/SIGHUP, which would end Python at once and leave the sandbox
    running: cancelled, the sandbox is killed and deleted before we exit."""
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _exec_in_sandbox(
    command: list[str],
    workspace: Path,
    limits: "SandboxLimits",
    backend: "BackendChoice",
    policy: "BackendChoice",
    environment: str,
) -> "ExecResult | SandboxError | None":
    """Run `command` in a sandbox on `workspace`: its result, the sandbox's error, or None when a
    signal ended it first."""

    import anyio

    from sandbox.backend import open_sandbox
    from sandbox.environments import open_environment
    from sandbox.errors import SandboxError

    outcome: ExecResult | SandboxError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_termination, tg.cancel_scope)
        try:
            async with AsyncExitStack() as stack:
                lease = None
                if environment == "auto":
                    lease = await stack.enter_async_context(
                        open_environment(workspace, environment_settings(workspace), progress=_progress)
                    )
                own = () if lease is not None or environment == "none" else _own_interpreter(workspace)
                sandbox = await stack.enter_async_context(
                    open_sandbox(
                        workspace,
                        limits=limits,
                        backend=backend,
                        policy=policy,
                        environment=lease.environment if lease else None,
                        ro_paths=own,
                    )
                )
                env = (
                    {"PATH": f"{Path(sys.executable).parent}:{sandbox.launcher.base_env()['PATH']}"}
                    if own
                    else None
                )
                outcome = await sandbox.exec(command, env=env)
                if lease is not None:
                    outcome = outcome.model_copy(update={"environment": lease.info})
        except SandboxError as exc:  # caught here: the task group would wrap it in a group
            outcome = exc
        tg.cancel_scope.cancel()
    return outcome


def _progress(line: str) -> None:
    """A build's progress, on stderr (stdout is the command's, or the JSON result)."""
    sys.stderr.write(f"  {line}\n")
    sys.stderr.flush()


def _own_interpreter(workspace: Path) -> tuple[Path, ...]:
    """codeloop's virtualenv, shown read-only, when the workspace has no environment of its own
    (nothing to show when it lives inside the workspace)."""
    prefix = Path(sys.prefix).resolve()
    return () if prefix.is_relative_to(workspace.resolve()) else (prefix,)


def register(app: typer.Typer) -> None:
    """Add `codeloop sandbox ...` to the root app."""
    app.add_typer(sandbox_app, name="sandbox")
