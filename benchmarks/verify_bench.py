"""Verifier timings, in one run, on two generated repositories — one with a 200-test suite (10
modules, 20 tests each, one module with a bug its test shows) and a calc-sized one (2 modules, 2
tests each) — each figure in a fresh exec server session on gVisor:

1. the plain suite: `run_tests` of the whole suite, sandbox start included — the unit of cost;
2. a one-test `run_tests` call: pytest's own start-up in this setup;
3. the suite in a sandbox another command started, pytest starting cold: "running the suite
   directly in the same sandbox";
4. the suite after a first test run in the same session: the sandbox started and its pytest
   interpreter warm (`Sandbox.keep_warm`);
5. `verify_patch` of a correct one-file fix, no baseline and no coverage cache (all of the
   starting tree's work included): static checks, the coverage run of the suite on the starting
   tree (every test's starting outcome, and which tests execute the changed lines), then only the
   test files that execute them, with the patch;
6. `verify_patch` of a one-file patch that leaves the targeted test failing: time to the report
   (the verifier returns after the targeted tests);
7. `verify_patch` of a one-file fix that breaks a test in another module: the suite, then the
   failing tests re-run without the patch's source changes (the baseline's price for a failure);
8. (5) and (6) in the workspace a verifier worker prepares ahead (`VerifierSpares`: sandbox started,
   pytest warm), as `codeloop serve` runs them: copying the repository in is timed, waiting for the
   spare to be ready is not (a worker prepares it while idle or while the model works).

Before every timed action the next spare is awaited untimed, so its preparation never shares the
CPU with a measurement. Beside each verification: its steps' wall times (the last run's), from the
report's checks; the first step with a sandbox command (`static`, or `targeted_tests` when no Python
file changed) includes the sandbox's start.

Each figure is the median of `--repeat` runs, printed beside the plain suite (1) and beside the
suite in a started sandbox (3). Targets: verification at most 1.5x a plain suite run, the first
failure report under a third of one. Two setups: the repository's pytest loading every plugin of
codeloop's interpreter (it has no virtualenv of its own, so that interpreter runs its tests), and
the repository's own `pytest.ini` disabling the two plugins it does not use (hypothesis, anyio).

The last lines put the two figures the verifier is held to side by side for each repository and
setup: the correct one-file fix's verification, and one plain suite run on the starting tree.

With `--swebench` the figures are a real repository's instead (`verify_real.py`): the plain
suite, the first candidate's verification with the starting tree's work, and each further
candidate's, sharing that work.

Run: .venv/bin/python benchmarks/verify_bench.py [--repeat 3] [--work-ms 10] [--backend gvisor] [--sizes 200,4]
     .venv/bin/python benchmarks/verify_bench.py --swebench INSTANCES.jsonl --repos DIR --instance ID
         --predictions A.jsonl [--predictions B.jsonl ...]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from pydantic import JsonValue
from verify_real import add_arguments, real_repository

from agents.messages.verification import VerificationReport
from agents.roles.verifier.exec_session import ExecSession
from agents.roles.verifier.spares import VerifierSpares
from agents.roles.verifier.verify import PatchTask, verify_patch
from codeloop.testing import make_repo
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import server_builder

MODULES = 10
TESTS_PER_MODULE = 20
BUGGY = 3
OTHER = 7
SIZES = {200: (10, 20, 3, 7), 4: (2, 2, 0, 1)}
"""Suite size -> (modules, tests per module, the buggy module, the module a breaking fix touches)."""
LEAN_PYTEST = "[pytest]\naddopts = -p no:hypothesispytest -p no:anyio\n"


class Tools:
    def __init__(self, backend: str) -> None:
        self.backend = backend

    def servers(self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None) -> dict[str, Any]:
        options = ServerOptions(scopes=frozenset(Scope(s) for s in scopes))
        return {"exec": server_builder("exec")(root, options, backend=self.backend)}


def _module(i: int, *, buggy: bool) -> str:
    body = "a - b" if buggy else "a + b"
    return (
        f"def combine{i}(a, b):\n    return {body}\n\n\n"
        f"def work{i}(n, ms):\n"
        "    import time\n"
        "    end = time.perf_counter() + ms / 1000\n"
        "    total = 0\n"
        "    while time.perf_counter() < end:\n"
        "        total += sum(range(n))\n"
        "    return total\n"
    )


def _tests(i: int, work_ms: float) -> str:
    lines = [f"from pkg.m{i} import combine{i}, work{i}\n\n"]
    for j in range(TESTS_PER_MODULE):
        lines.append(
            f"\ndef test_combine_{j}():\n    work{i}(50, {work_ms})\n    assert combine{i}({j}, 1) == {j + 1}\n\n"
        )
    return "".join(lines)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def use_size(tests: int) -> None:
    """Generate repositories of `tests` tests (one of `SIZES`) from now on."""
    global MODULES, TESTS_PER_MODULE, BUGGY, OTHER
    MODULES, TESTS_PER_MODULE, BUGGY, OTHER = SIZES[tests]


def modules_repo(root: Path, *, work_ms: float, lean: bool) -> None:
    """The package of `MODULES` modules (one buggy) with a test file each, committed."""
    files = {"pkg/__init__.py": ""}
    for i in range(MODULES):
        files[f"pkg/m{i}.py"] = _module(i, buggy=i == BUGGY)
        files[f"tests/test_m{i}.py"] = _tests(i, work_ms)
    if lean:
        files["pytest.ini"] = LEAN_PYTEST
    make_repo(root, files, branch="main")


def patch_of(root: Path, path: str, text: str) -> str:
    old = (root / path).read_text()
    (root / path).write_text(text)
    patch = _git(root, "diff")
    (root / path).write_text(old)
    return patch


ToolCall = tuple[str, dict[str, JsonValue]]
"""A tool's name and its arguments."""


async def timed(
    actions: list[Callable[[], Awaitable[object]]], repeat: int, settle: Callable[[], Awaitable[object]]
) -> list[tuple[float, Any]]:
    """Median wall time and last result of each action; the actions take turns, so a change in
    the machine's load during the run affects them all alike. `settle` runs untimed before each
    (the spare being prepared must not share the CPU with a timed action)."""
    times: list[list[float]] = [[] for _ in actions]
    results: list[object] = [None] * len(actions)
    for _ in range(repeat):
        for i, action in enumerate(actions):
            await settle()
            started = time.perf_counter()
            results[i] = await action()
            times[i].append(time.perf_counter() - started)
    return [(statistics.median(t), r) for t, r in zip(times, results, strict=True)]


async def setup_figures(
    root: Path, tools: Tools, repeat: int, spares: VerifierSpares
) -> list[tuple[str, float, str]]:
    async def plain(paths: list[str]) -> dict[str, object]:
        async with Client(tools.servers(root, frozenset({"read", "execute"}))["exec"]) as client:
            result = await client.call_tool("run_tests", {"paths": paths, "timeout_s": 600})
            return result.structured_content or {}

    def suite_after(first: ToolCall, times: list[float]) -> Callable[[], Awaitable[None]]:
        """The whole suite in a session whose sandbox the call `first` started (timed: the suite)."""

        async def run() -> None:
            async with Client(tools.servers(root, frozenset({"read", "execute"}))["exec"]) as client:
                await client.call_tool(*first)
                started = time.perf_counter()
                await client.call_tool("run_tests", {"paths": [], "timeout_s": 600})
                times.append(time.perf_counter() - started)

        return run

    warm_times: list[float] = []
    # After a first test run the sandbox is started and its pytest interpreter warm.
    plain_warm = suite_after(("run_tests", {"paths": ["tests/test_m0.py"], "timeout_s": 600}), warm_times)
    started_times: list[float] = []
    # After another command the sandbox is started, and pytest starts cold.
    plain_started = suite_after(("run_command", {"argv": ["true"], "timeout_s": 60}), started_times)

    def verify(patch: str, *, in_spare: bool = False) -> Callable[[], Awaitable[object]]:
        """`verify_patch` on the repository, or (`in_spare`) in the workspace a verifier worker
        prepared ahead (`VerifierSpares`): copying the repository into it is timed, waiting for it
        to be ready is not (`timed`'s settle: a worker's idle time, or its model's)."""

        async def check(workspace: Path, session: ExecSession | None = None) -> VerificationReport:
            report, _ = await verify_patch(
                workspace=workspace,
                patch=patch,
                task=PatchTask(
                    mode="execute", plan_files=[f"pkg/m{BUGGY}.py"], test_targets=[f"tests/test_m{BUGGY}.py"]
                ),
                tools=tools,
                deadline=datetime.now(UTC) + timedelta(seconds=600),
                baseline=None,
                session=session,
            )
            return report

        async def run() -> object:
            if not in_spare:
                return await check(root)
            async with spares.take() as spare:
                assert spare is not None
                await anyio.to_thread.run_sync(lambda: shutil.copytree(root, spare.root, dirs_exist_ok=True))
                return await check(spare.root, spare.session)

        return run

    source = (root / "pkg" / f"m{BUGGY}.py").read_text()
    fix = patch_of(root, f"pkg/m{BUGGY}.py", source.replace("a - b", "a + b"))
    wrong = patch_of(root, f"pkg/m{BUGGY}.py", source.replace("a - b", "a * b"))
    other = (root / "pkg" / f"m{OTHER}.py").read_text()
    breaks_other = fix + patch_of(
        root, f"pkg/m{OTHER}.py", other.replace("return a + b", "return a + b + (a == 0)")
    )

    measured = await timed(
        [
            lambda: plain([]),
            lambda: plain(["tests/test_m0.py::test_combine_0"]),
            plain_warm,
            plain_started,
            verify(fix),
            verify(wrong),
            verify(breaks_other),
            verify(fix, in_spare=True),
            verify(wrong, in_spare=True),
        ],
        repeat,
        settle=spares.wait_ready,
    )
    (suite_s, suite), (one_s, _), _, _, (pass_s, passed), (fail_s, failed), (regress_s, regressed) = measured[
        :7
    ]
    (spare_pass_s, spare_passed), (spare_fail_s, spare_failed) = measured[7:]
    counts = f"{suite.get('passed')} passed, {suite.get('failed')} failed"

    def steps(report: VerificationReport) -> str:
        return " ".join(f"{c.name}={c.duration_s:.2f}" for c in report.checks if c.duration_s >= 0.01)

    return [
        ("plain suite run (run_tests, whole suite)", suite_s, counts),
        ("pytest start-up (run_tests, one test)", one_s, ""),
        ("plain suite run, sandbox started, cold pytest", statistics.median(started_times), ""),
        ("plain suite run, sandbox started, pytest warm", statistics.median(warm_times), ""),
        (
            "verify: correct one-file fix",
            pass_s,
            f"{passed.verdict}, {passed.tests_run} outcomes; {steps(passed)}",
        ),
        (
            "verify: targeted test still failing (first report)",
            fail_s,
            f"{failed.verdict}, {len(failed.failures)} failure(s); {steps(failed)}",
        ),
        (
            "verify: fix breaking another module's test",
            regress_s,
            f"{regressed.verdict}, regressions={len(regressed.regressions)}; {steps(regressed)}",
        ),
        (
            "verify in a spare: correct one-file fix",
            spare_pass_s,
            f"{spare_passed.verdict}, {spare_passed.tests_run} outcomes; {steps(spare_passed)}",
        ),
        (
            "verify in a spare: targeted test still failing",
            spare_fail_s,
            f"{spare_failed.verdict}, {len(spare_failed.failures)} failure(s); {steps(spare_failed)}",
        ),
    ]


async def main(args: argparse.Namespace) -> None:
    tools = Tools(args.backend)
    sizes = [int(n) for n in args.sizes.split(",")]
    print(
        f"verify_bench: {args.work_ms} ms of work per test, backend {args.backend}, median of {args.repeat}"
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores here are shared)")
    held: list[str] = []
    for size in sizes:
        use_size(size)
        await one_size(args, tools, size, held)
    print("\nthe verifier's cost: a verified correct one-file fix beside one plain suite run")
    for line in held:
        print(f"  {line}")
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


async def one_size(args: argparse.Namespace, tools: Tools, size: int, held: list[str]) -> None:
    print(f"\n== {MODULES * TESTS_PER_MODULE} tests ({MODULES} modules) ==")
    for lean in (False, True):
        with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
            root = Path(tmp) / "repo"
            modules_repo(root, work_ms=args.work_ms, lean=lean)
            (Path(tmp) / "scratch").mkdir()
            async with VerifierSpares(tools, Path(tmp) / "scratch") as spares:
                figures = await setup_figures(root, tools, args.repeat, spares)
        label = (
            "repository pytest.ini disables hypothesis and anyio plugins"
            if lean
            else "every plugin of codeloop's interpreter"
        )
        print(f"\n[{label}]")
        suite_s, started_s = figures[0][1], figures[2][1]
        print(f"  {'':<52} {'':>9}  {'(1)':>11}  {'(3)':>9}")
        for name, seconds, note in figures:
            print(
                f"  {name:<52} {seconds:7.2f} s  {seconds / suite_s:5.2f}x suite  {seconds / started_s:5.2f}x (3)  {note}"
            )
        fix_s = figures[4][1]
        held.append(
            f"{size:>4} tests, {'lean pytest.ini' if lean else 'all plugins    '}: verify {fix_s:6.2f} s, "
            f"plain suite {suite_s:6.2f} s, ratio {fix_s / suite_s:.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-ms", type=float, default=10.0)
    parser.add_argument("--backend", default="gvisor", choices=["gvisor", "process"])
    parser.add_argument("--sizes", default="200,4", help="suite sizes to generate, among 200 and 4")
    add_arguments(parser)
    arguments = parser.parse_args()
    if arguments.swebench is not None:
        if arguments.repos is None or arguments.instance is None or not arguments.predictions:
            parser.error("--swebench needs --repos, --instance and at least one --predictions")
        anyio.run(real_repository, arguments, backend="asyncio")
        sys.exit(0)
    anyio.run(main, arguments, backend="asyncio")
    sys.exit(0)
