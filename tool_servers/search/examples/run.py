"""Running an issue's examples in the sandbox, on a scratch copy of the indexed files.

The copy keeps the checkout untouched whatever the example does (a search has a read grant: it
writes nothing in the user's tree), and holds only the files the index holds, so secrets the
index leaves out stay out. The interpreter is the repository's project environment's
(`sandbox.environments`, given `environment` settings: detected from the repository's files,
built once and cached; the copy is what its editable install imports), else the repository's own
virtualenv's (`.venv`, `venv`, `env`, `.env`) when it has one, shown read-only in the sandbox,
else codeloop's. An environment that cannot be made ready leaves the examples to codeloop's
interpreter, and the run's note says why.
"""

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from sandbox.backend import BackendChoice, open_sandbox
from sandbox.environments.environment import Environment
from sandbox.environments.opening import open_environment
from sandbox.environments.settings import EnvironmentSettings
from sandbox.errors import BackendForbidden, EnvironmentSetupError, PolicyError, SandboxError
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.runtime import mounted_venvs
from tool_servers.example_code import example_blocks
from tool_servers.search.errors import ExamplesForbidden
from tool_servers.search.examples import tracer
from tool_servers.search.models import EXAMPLE_TIMEOUT_S, ExampleRun, RaisedError, SearchResult

if TYPE_CHECKING:
    from tool_servers.search.index.code_index import CodeIndex

SETUP_ALLOWANCE_S = 60.0
"""On top of the examples' time, for the interpreter's start and the setup's imports."""
MEMORY_MB = 2048
_TRACER_DIR = ".codeloop-examples"


def repository_python(root: Path) -> str:
    """The interpreter to run `root`'s code with: its virtualenv's (a real directory, as the
    sandbox mounts them), else codeloop's own."""
    pythons = [venv / "bin" / "python" for venv in mounted_venvs(root)]
    return next((str(p) for p in pythons if p.exists()), sys.executable)


def interpreter_paths(python: str) -> tuple[Path, ...]:
    """The host paths a sandbox must show for `python`: its virtualenv, if it is in one, and the
    installation its binary belongs to."""
    binary = Path(python)
    shown = [binary.resolve().parent.parent]
    venv = binary.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        shown.append(venv.resolve())
    return tuple(shown)


async def search_running_examples(
    index: "CodeIndex",
    query: str,
    *,
    k: int,
    keep_tests: bool = False,
    setup: str = "",
    python: str | None = None,
    timeout_s: float = EXAMPLE_TIMEOUT_S,
    backend: BackendChoice = "auto",
    policy: str = "auto",
    environment: EnvironmentSettings | None = None,
) -> SearchResult:
    """`index`'s file ranking for `query`, with the files its example code executed (run as in
    `trace_examples`) filling ranks, the files of the tracebacks it raised boosted as a pasted
    traceback's are, and what ran under `examples`.

    Raises:
        ExamplesForbidden: the deployment's sandbox policy forbids every backend here.
        InvalidQuery, IndexUnavailable: see `CodeIndex.search`.
    """
    run = await trace_examples(
        index.repo,
        index.indexed_paths(),
        example_blocks(query),
        setup=setup,
        python=python,
        timeout_s=timeout_s,
        backend=backend,
        policy=policy,
        environment=environment,
    )
    raised = [[frame.path for frame in error.frames] for error in run.raised]
    result = await index.search(
        query, k=k, per_file=True, keep_tests=keep_tests, executed=run.files, raised=raised
    )
    return result.model_copy(update={"examples": run})


async def trace_examples(
    root: Path,
    paths: Sequence[str],
    blocks: Sequence[str],
    *,
    setup: str = "",
    python: str | None = None,
    timeout_s: float = EXAMPLE_TIMEOUT_S,
    backend: BackendChoice = "auto",
    policy: str = "auto",
    gvisor: GvisorOptions | None = None,
    environment: EnvironmentSettings | None = None,
) -> ExampleRun:
    """Run `blocks` (after `setup`) in a sandbox on a copy of `paths` (relative to `root`), and
    report which of those files' functions ran. `python`: the interpreter (default: the project
    environment `environment` settings find for `root`, else `repository_python(root)`). A
    failure to run at all is a result with a note.

    Raises:
        ExamplesForbidden: the deployment's sandbox policy forbids every backend here.
    """
    if not blocks:
        return ExampleRun(
            python=python or repository_python(root), note="the query holds no example code to run"
        )
    async with AsyncExitStack() as stack:
        project_env, env_note = None, None
        if python is None and environment is not None:
            try:
                lease = await stack.enter_async_context(open_environment(root, environment))
                project_env = lease.environment if lease else None
            except EnvironmentSetupError as exc:
                env_note = (
                    f"the project environment could not be made ready ({exc}); ran on codeloop's interpreter"
                )
        python = str(project_env.python) if project_env else python or repository_python(root)
        run = await _trace_in_sandbox(
            root, paths, blocks, setup, python, timeout_s, backend, policy, gvisor, project_env
        )
    return run.model_copy(update={"note": env_note}) if env_note and not run.note else run


async def _trace_in_sandbox(
    root: Path,
    paths: Sequence[str],
    blocks: Sequence[str],
    setup: str,
    python: str,
    timeout_s: float,
    backend: BackendChoice,
    policy: str,
    gvisor: GvisorOptions | None,
    project_env: Environment | None,
) -> ExampleRun:
    """`trace_examples` once its interpreter (and project environment, if any) is chosen."""
    shown = interpreter_paths(python) if project_env is None else ()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="codeloop-examples-") as scratch:
        workspace = Path(scratch) / "workspace"
        await anyio.to_thread.run_sync(_copy_tree, root, workspace, paths)
        request = {"setup": setup, "blocks": list(blocks), "deadline_s": timeout_s}
        (workspace / _TRACER_DIR / "request.json").write_text(json.dumps(request), encoding="utf-8")
        shutil.copyfile(tracer.__file__, workspace / _TRACER_DIR / "tracer.py")
        limits = SandboxLimits(timeout_s=timeout_s + SETUP_ALLOWANCE_S, memory_mb=MEMORY_MB)
        argv = [python, "-s", f"{_TRACER_DIR}/tracer.py", f"{_TRACER_DIR}/request.json"]
        env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8"}
        try:
            async with open_sandbox(
                workspace,
                limits=limits,
                backend=backend,
                gvisor=gvisor,
                ro_paths=shown,
                policy=policy,
                environment=project_env,
            ) as box:
                result = await box.exec(argv, env=env)
        except (PolicyError, BackendForbidden) as exc:
            raise ExamplesForbidden(f"the query's examples cannot run: {exc}") from exc
        except SandboxError as exc:
            return ExampleRun(python=python, note=f"the sandbox could not run the examples: {exc}")
    return _report(
        result.stdout,
        result.stderr,
        result.exit_code,
        result.backend,
        python,
        duration_s=time.monotonic() - started,
        timed_out=result.timed_out,
    )


def _copy_tree(root: Path, workspace: Path, paths: Sequence[str]) -> None:
    (workspace / _TRACER_DIR).mkdir(parents=True)
    for rel in paths:
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(root / rel, target, follow_symlinks=False)
        except OSError:
            continue  # deleted or unreadable since it was indexed: the example runs without it


def _report(
    stdout: str,
    stderr: str,
    exit_code: int | None,
    backend: str,
    python: str,
    *,
    duration_s: float,
    timed_out: bool,
) -> ExampleRun:
    ran = {"backend": backend, "python": python, "duration_s": round(duration_s, 3)}
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(tracer.MARKER)), None)
    if line is None:
        why = "ran out of time" if timed_out else f"exited with {exit_code}"
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        return ExampleRun(
            **ran, timed_out=timed_out, note=f"the example tracer {why} before reporting: {tail[0][:300]}"
        )
    try:
        data = json.loads(line[len(tracer.MARKER) :])
        return ExampleRun(
            **ran,
            statements=data["statements"],
            failed=data["failed"],
            timed_out=data["timed_out"] or timed_out,
            files=data["files"],
            setup_error=data["setup_error"],
            resolved=data["resolved"],
            raised=[RaisedError.model_validate(r) for r in data["raised"]],
        )
    except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        # The example's own code can write to the real stdout; a report it forged, or one cut short,
        # is not evidence.
        return ExampleRun(
            **ran,
            timed_out=timed_out,
            note=f"the example tracer's report could not be read: {str(exc)[:300]}",
        )
