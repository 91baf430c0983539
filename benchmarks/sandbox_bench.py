"""Sandbox timings: medians, in one run, of

1. plain subprocess `python3 -c pass`;
2. gVisor cold start with that command (open a sandbox, run it, get the result), and teardown;
3. the same command exec'd in a reused gVisor sandbox;
4. a small real pytest suite (100 tests) run plainly, in a reused gVisor sandbox, and in the
   process backend;
5. where the pytest-in-gVisor time goes: the suite again under variants of file access mode,
   mount hints, bytecode caching and a runsc flag, interleaved round by round, with CPU seconds
   read from the sandbox's cpuacct cgroup (wall time moves with the machine's load; CPU seconds
   much less);
6. the cost of one system call plainly and in gVisor;
7. a workspace holding a big virtualenv (numpy and pyarrow copied from codeloop's): open + first
   `python -c pass`, a later command, and the mirror's RAM, with the tree as `.venv` (bound
   read-only from the host) and the same tree under another name (mirrored like any files), the
   two alternating sandbox by sandbox;
8. a one-test pytest run started cold and in the interpreter the sandbox keeps warm
   (`Sandbox.keep_warm`), alternating in one sandbox, and `true` in a sandbox with a warm
   interpreter beside one without (its clean-up kills as the payload user: a fork per kill).

Why the sandbox is set up as these sections probe: `docs/sandbox.md`.
Targets: cold start <= 0.5 s, exec in a reused sandbox <= 100 ms, pytest in gVisor <= 2.5x plain.
Run: .venv/bin/python benchmarks/sandbox_bench.py [--rounds 5]   (needs root and runsc)
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from sandbox.backend import open_sandbox
from sandbox.gvisor import probe_runsc
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.session import Sandbox

LIMITS = SandboxLimits(timeout_s=120, memory_mb=1024)
RUNTIME = (Path(sys.prefix),)  # the venv that has pytest, shown read-only
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
PASS = ["python3", "-c", "pass"]
# The plain runs get the environment the sandbox gives its commands (sandbox.gvisor base_env), not
# this process's: an inherited PYTHONDONTWRITEBYTECODE or PYTHONUNBUFFERED (set in some shells and
# CI jobs) changes the system calls of the plain run, so it would no longer be the same command.
PLAIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}

_PACKAGE = {
    "calc/__init__.py": "from calc.ops import add, mul\nfrom calc.parse import parse\n",
    "calc/ops.py": (
        "import decimal, fractions, functools, math, statistics\n"
        "def add(a, b):\n    return a + b\n"
        "def mul(a, b):\n    return a * b\n"
        "@functools.lru_cache\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    ),
    "calc/parse.py": (
        "import dataclasses, enum, json, re, typing\n"
        "TOKEN = re.compile(r'\\s*(\\d+|[+*()])')\n"
        "def parse(text):\n    return [m.group(1) for m in TOKEN.finditer(text)]\n"
    ),
}
_TESTS = """import pytest
from calc import add, mul, parse
from calc.ops import fib

@pytest.mark.parametrize("a,b", [(x, y) for x in range(5) for y in range(4)])
def test_add(a, b):
    assert add(a, b) == a + b

def test_mul():
    assert mul(3, 4) == 12

def test_parse():
    assert parse("1 + 2") == ["1", "+", "2"]

def test_fib():
    assert fib(20) == 6765

class TestFixtures:
    def test_tmp_path(self, tmp_path):
        (tmp_path / "f").write_text("x")
        assert (tmp_path / "f").read_text() == "x"

    def test_capsys(self, capsys):
        print("hi")
        assert capsys.readouterr().out == "hi\\n"
"""


def make_suite(root: Path) -> Path:
    """A small package with a 100-test pytest suite (4 modules x 25 tests)."""
    for rel, text in _PACKAGE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "tests").mkdir()
    for i in range(4):
        (root / "tests" / f"test_mod{i}.py").write_text(_TESTS)
    return root


def drop_bytecode(root: Path) -> None:
    for cache in root.rglob("__pycache__"):
        shutil.rmtree(cache)


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms"


def plain_run(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one plain subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, env=PLAIN_ENV)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stdout[-400:]
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def sandbox_cpu_s(sandbox: Sandbox) -> float:
    """CPU seconds of the whole sandbox (sentry, gofer, ptrace stubs) from its cpuacct cgroup."""
    container = sandbox.launcher.container_id  # type: ignore[attr-defined] - only the gVisor launcher has a container id; this is the gVisor run
    return int(Path(f"/sys/fs/cgroup/cpuacct/codeloop/{container}/cpuacct.usage").read_text()) / 1e9


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def reused_runs(
    workspace: Path,
    argv: list[str],
    n: int,
    *,
    backend: str = "gvisor",
    env: dict[str, str] | None = None,
    options: GvisorOptions | None = None,
    before_each: Callable[[], None] | None = None,
) -> tuple[list[float], list[float]]:
    """Wall and (gVisor) CPU seconds of n runs of argv in one sandbox, after one warm-up command."""
    walls, cpus = [], []
    async with open_sandbox(
        workspace,
        limits=LIMITS,
        backend=backend,  # pyright: ignore[reportArgumentType] - backend is gvisor or process, from the benchmark's own loop
        gvisor=options,
        ro_paths=RUNTIME,
    ) as sandbox:
        await sandbox.exec(["true"])
        for _ in range(n):
            if before_each:
                before_each()
            cpu_before = sandbox_cpu_s(sandbox) if backend == "gvisor" else 0.0
            started = time.perf_counter()
            result = await sandbox.exec(argv, env=env)
            walls.append(time.perf_counter() - started)
            cpus.append(sandbox_cpu_s(sandbox) - cpu_before if backend == "gvisor" else 0.0)
            assert result.exit_code == 0, result.stdout[-400:] + result.stderr[-400:]
    return walls, cpus


async def pytest_suite(suite: Path, rounds: int = 5) -> None:
    """Plain, gVisor and process runs interleaved round by round, so load drift hits all alike."""
    walls: dict[str, list[float]] = {"plain": [], "gvisor": [], "process": []}
    cpus: dict[str, list[float]] = {"plain": [], "gvisor": []}
    async with AsyncExitStack() as stack:
        sandboxes = {}
        for backend in ("gvisor", "process"):
            sandboxes[backend] = await stack.enter_async_context(
                open_sandbox(suite, limits=LIMITS, backend=backend, ro_paths=RUNTIME)
            )
            warm_up = await sandboxes[backend].exec(PYTEST)  # the first run also writes bytecode
            assert warm_up.exit_code == 0, warm_up.stdout[-400:] + warm_up.stderr[-400:]
        for _ in range(rounds):
            wall, cpu = plain_run(PYTEST, suite)
            walls["plain"].append(wall)
            cpus["plain"].append(cpu)
            for backend, sandbox in sandboxes.items():
                cpu_before = sandbox_cpu_s(sandbox) if backend == "gvisor" else 0.0
                walls[backend].append(await timed(lambda sandbox=sandbox: sandbox.exec(PYTEST)))
                if backend == "gvisor":
                    cpus[backend].append(sandbox_cpu_s(sandbox) - cpu_before)
    wall = {k: statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"4. pytest suite (100 tests), median of {rounds}, interleaved:")
    print(f"   plain                       {wall['plain'] * 1000:7.0f} ms wall  {cpu['plain']:5.2f} s CPU")
    print(
        f"   reused gVisor sandbox       {wall['gvisor'] * 1000:7.0f} ms wall  {cpu['gvisor']:5.2f} s CPU"
        f"   = {wall['gvisor'] / wall['plain']:.2f}x wall, {cpu['gvisor'] / cpu['plain']:.2f}x CPU (target <= 2.5x)"
    )
    print(f"   process backend             {wall['process'] * 1000:7.0f} ms wall")


VARIANTS: list[tuple[str, GvisorOptions, dict[str, str], list[str]]] = [
    ("a. every mount shared (no mount hints)", GvisorOptions(cache_runtime=False), {}, []),
    ("b. default: runtime mounts hinted exclusive", GvisorOptions(), {}, []),
    ("c. every mount exclusive (stale workspace!)", GvisorOptions(file_access_mounts="exclusive"), {}, []),
    ("d. default + PYTHONDONTWRITEBYTECODE=1", GvisorOptions(), {"PYTHONDONTWRITEBYTECODE": "1"}, []),
    ("f. default + pytest --capture=sys", GvisorOptions(), {}, ["--capture=sys"]),
    ("g. default + runsc --dcache=10000", GvisorOptions(runsc_flags=("--dcache=10000",)), {}, []),
]


async def investigate(suite: Path, rounds: int = 5) -> None:
    """Runs the variants round-robin in sandboxes open side by side, so load drift hits all alike."""
    print(f"\n5. where the pytest-in-gVisor time goes (median of {rounds}, variants interleaved):")
    walls: dict[str, list[float]] = {name: [] for name, *_ in VARIANTS} | {"plain": []}
    cpus: dict[str, list[float]] = {name: [] for name, *_ in VARIANTS} | {"plain": []}
    async with AsyncExitStack() as stack:
        sandboxes = {}
        for name, options, *_ in VARIANTS:
            sandboxes[name] = await stack.enter_async_context(
                open_sandbox(suite, limits=LIMITS, backend="gvisor", gvisor=options, ro_paths=RUNTIME)
            )
            await sandboxes[name].exec(PYTEST)  # warm-up: the first run also writes bytecode
        for _ in range(rounds):
            wall, cpu = plain_run(PYTEST, suite)
            walls["plain"].append(wall)
            cpus["plain"].append(cpu)
            for name, _, env, extra in VARIANTS:
                sandbox = sandboxes[name]
                cpu_before = sandbox_cpu_s(sandbox)
                started = time.perf_counter()
                result = await sandbox.exec([*PYTEST, *extra], env=env)
                walls[name].append(time.perf_counter() - started)
                cpus[name].append(sandbox_cpu_s(sandbox) - cpu_before)
                assert result.exit_code == 0, result.stdout[-400:]
    cold_walls = []
    for _ in range(3):
        drop_bytecode(suite)
        started = time.perf_counter()
        async with open_sandbox(
            suite,
            limits=LIMITS,
            backend="gvisor",
            gvisor=GvisorOptions(cache_runtime=False),
            ro_paths=RUNTIME,
        ) as sandbox:
            await sandbox.exec(PYTEST, env={"PYTHONDONTWRITEBYTECODE": "1"})
        cold_walls.append(time.perf_counter() - started)
    plain_wall, plain_cpu = statistics.median(walls["plain"]), statistics.median(cpus["plain"])
    print(
        f"   {'plain (interleaved with the variants)':46s} {plain_wall * 1000:6.0f} ms wall          {plain_cpu:5.2f} s CPU"
    )
    for name, *_ in VARIANTS:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(
            f"   {name:46s} {wall * 1000:6.0f} ms wall ({wall / plain_wall:.2f}x)  {cpu:5.2f} s CPU ({cpu / plain_cpu:.2f}x)"
        )
    cold = statistics.median(cold_walls)
    print(
        f"   {'e. naive: fresh sandbox per run, no bytecode':46s} {cold * 1000:6.0f} ms wall ({cold / plain_wall:.2f}x)"
    )


async def warm_runs(base: Path, rounds: int) -> None:
    workspace = base / "one-test"
    await anyio.Path(workspace).mkdir()
    await anyio.Path(workspace / "test_one.py").write_text("def test_one():\n    assert True\n")
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    runs: dict[bool, list[float]] = {False: [], True: []}
    trues: dict[bool, list[float]] = {False: [], True: []}
    rounds = max(rounds, 5)
    print(f"\n8. pytest in a warm interpreter (median of {rounds}, alternating):")
    async with AsyncExitStack() as stack:
        plain_box = await stack.enter_async_context(
            open_sandbox(base, limits=LIMITS, backend="gvisor", ro_paths=RUNTIME)
        )
        box = await stack.enter_async_context(
            open_sandbox(workspace, limits=LIMITS, backend="gvisor", ro_paths=RUNTIME)
        )
        reply = await box.keep_warm(sys.executable, env)
        if not reply.warm:
            print(f"   no warm interpreter here: {reply.note}")
            return
        await box.exec(PYTEST, env=env, warm=True)  # waits for its imports
        await plain_box.exec(["true"])
        for index in range(rounds):
            for warm in (True, False) if index % 2 else (False, True):
                started = time.perf_counter()
                result = await box.exec(PYTEST, env=env, warm=warm)
                runs[warm].append(time.perf_counter() - started)
                assert result.exit_code == 0 and result.warm == warm, result.stdout[-400:]
                trues[warm].append((await (box if warm else plain_box).exec(["true"])).duration_s)
    cold, warm_s = statistics.median(runs[False]), statistics.median(runs[True])
    print(f"   one-test run, cold interpreter               {cold * 1000:6.0f} ms")
    print(f"   one-test run, warm interpreter               {warm_s * 1000:6.0f} ms ({warm_s / cold:.2f}x)")
    print(f"   true, no warm interpreter in the sandbox     {median_ms(trues[False])}")
    print(f"   true, a warm interpreter in the sandbox      {median_ms(trues[True])}")


SYSCALL_LOOPS = {
    "getpid()": "import os\nfor _ in range(N): os.getpid()",
    "stat() of a workspace file": "import os\nopen('f', 'w').close()\nfor _ in range(N): os.stat('f')",
    "open+read+close of a runtime file": f"for _ in range(N // 3):\n    with open({str(Path(sys.prefix, 'pyvenv.cfg'))!r}, 'rb') as f: f.read()",
}


def _timed_loop(body: str, n: int = 5000) -> str:
    return (
        f"import time\nN = {n}\nt = time.perf_counter()\n{body}\nprint((time.perf_counter() - t) / N * 1e6)"
    )


def count_syscalls(argv: list[str], cwd: Path) -> int | None:
    """System calls of one plain run, from `strace -f -c` (None without strace)."""
    if shutil.which("strace") is None:
        return None
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(
            ["strace", "-f", "-c", "-o", out.name, *argv], cwd=cwd, capture_output=True, env=PLAIN_ENV
        )
        last = Path(out.name).read_text().strip().splitlines()[-1].split()
    return int(last[3 if len(last) > 5 else 2])


async def syscall_costs(workspace: Path) -> None:
    """Per-syscall cost plainly and in gVisor: what multiplies every file the suite touches."""
    print("\n6. cost of one system call (microseconds, one run each):")
    async with open_sandbox(workspace, limits=LIMITS, backend="gvisor", ro_paths=RUNTIME) as sandbox:
        for name, body in SYSCALL_LOOPS.items():
            code = _timed_loop(body)
            plain = float(
                (await anyio.run_process([sys.executable, "-c", code], cwd=workspace, env=PLAIN_ENV)).stdout
            )
            inside = float((await sandbox.exec([sys.executable, "-c", code])).stdout)
            print(f"   {name:36s} plain {plain:6.1f} us   gVisor {inside:7.1f} us   ({inside / plain:.0f}x)")


BIG_VENV_PACKAGES = ("numpy", "numpy.libs", "pyarrow")


def make_big_venv_workspace(root: Path) -> tuple[int, int]:
    """A workspace whose `.venv` holds copies of codeloop's numpy and pyarrow; returns its bytes
    and files."""
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        sys.prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}", "site-packages"
    )
    target = venv / site.relative_to(sys.prefix)
    for name in BIG_VENV_PACKAGES:
        if (site / name).exists():
            subprocess.run(["cp", "-a", str(site / name), str(target)], check=True)
    (root / "app.py").write_text("print('app')\n")
    size = int(subprocess.run(["du", "-sb", str(venv)], capture_output=True, text=True).stdout.split()[0])
    return size, sum(len(files) for _, _, files in os.walk(venv))


def mirror_used_mb(work_dir: Path) -> float:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        if line.split()[1].startswith(str(work_dir)):
            st = os.statvfs(line.split()[1])
            return (st.f_blocks - st.f_bfree) * st.f_frsize / 1e6
    return float("nan")


async def workspace_venv(tmp: Path, sandboxes: int = 3) -> None:
    """Section 7: the workspace's own virtualenv is bound, not mirrored; the two layouts alternate
    sandbox by sandbox (the tree renamed between them), so load drift hits both alike."""
    root = tmp / "venv-ws"
    await anyio.Path(root).mkdir()
    size, files = await anyio.to_thread.run_sync(make_big_venv_workspace, root)
    print(
        f"\n7. workspace holding a {size / 1e6:.0f} MB, {files}-file virtualenv "
        f"(medians: {sandboxes} sandboxes, 5 later commands each, layouts alternating):"
    )
    variants = {
        ".venv": "as .venv: bound read-only (default)",
        "vendored": "as vendored/: mirrored like any files",
    }
    starts: dict[str, list[float]] = {name: [] for name in variants}
    later: dict[str, list[float]] = {name: [] for name in variants}
    used: dict[str, list[float]] = {name: [] for name in variants}
    current = ".venv"
    for i in range(sandboxes):
        for name in variants:
            if name != current:
                await anyio.Path(root / current).rename(root / name)
                current = name
            options = GvisorOptions(state_dir=tmp / f"{name}-state-{i}", work_dir=tmp / f"{name}-work-{i}")
            started = time.perf_counter()
            async with open_sandbox(root, limits=LIMITS, backend="gvisor", gvisor=options) as sandbox:
                await sandbox.exec(["python", "-c", "pass"])
                starts[name].append(time.perf_counter() - started)
                used[name].append(mirror_used_mb(options.work_dir))
                for _ in range(5):
                    later[name].append(await timed(lambda: sandbox.exec(["python", "-c", "pass"])))
    for name, label in variants.items():
        print(
            f"   {label:37s} open + first command {median_ms(starts[name])}, later command"
            f" {median_ms(later[name])}, mirror RAM {statistics.median(used[name]):6.1f} MB"
        )


async def main(rounds: int) -> None:
    status = probe_runsc()
    if not status.works:
        print(f"runsc does not work here ({status.detail}); nothing to measure.")
        return
    print(f"runsc: {status.version}, platform {status.platform}\n")
    with tempfile.TemporaryDirectory(prefix="codeloop-bench-") as tmp:
        empty = Path(tmp, "empty")
        await anyio.Path(empty).mkdir()
        suite = make_suite(Path(tmp, "suite"))

        plain = [plain_run(PASS, empty)[0] for _ in range(10)]
        print(f"1. plain subprocess python3 -c pass           {median_ms(plain)}")

        colds, teardowns = [], []
        for _ in range(10):
            started = time.perf_counter()
            async with open_sandbox(empty, limits=LIMITS, backend="gvisor") as sandbox:
                await sandbox.exec(PASS)
                colds.append(time.perf_counter() - started)
                closing = time.perf_counter()
            teardowns.append(time.perf_counter() - closing)
        print(f"2. gVisor cold start to result (python3 -c pass) {median_ms(colds)}   (target <= 500 ms)")
        print(f"   gVisor teardown (kill, reap, delete)        {median_ms(teardowns)}")

        walls, _ = await reused_runs(empty, PASS, 20)
        print(f"3. exec in a reused gVisor sandbox            {median_ms(walls)}   (target <= 100 ms)")
        walls, _ = await reused_runs(empty, ["true"], 20)
        print(f"   (exec of /bin/true: the sandbox's own overhead {median_ms(walls)})")

        await pytest_suite(suite, rounds)

        await investigate(suite, rounds)
        calls = count_syscalls(PYTEST, suite)
        if calls is not None:
            print(f"   one plain run of the suite makes {calls} system calls (strace -f -c)")
        await syscall_costs(empty)
        await workspace_venv(Path(tmp), max(2, min(rounds, 3)))
        await warm_runs(Path(tmp), rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of sections 4 and 5")
    anyio.run(main, parser.parse_args().rounds)
