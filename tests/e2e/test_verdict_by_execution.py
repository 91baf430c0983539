"""The two headline cases, end to end through `codeloop run` with scripted models: a task text that
names no test, a plan that names no target, and a verdict decided by what the tests execute."""

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from codeloop.testing import PipelineRunner

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REPO_ROOT = Path(__file__).parents[2]
SCRIPTED = Path(__file__).with_name("scripted_calc.py")
TEXT = (
    "mean() in the calc package returns the wrong value: mean([2, 4, 6]) gives 6.0 but the "
    "arithmetic mean is 4.0. Fix it so the test suite passes."
)
FILES = {
    "calc/__init__.py": '"""Small arithmetic."""\n\nfrom calc.ops import mean, total\n',
    "calc/ops.py": "def total(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return total(xs) / (len(xs) - 1)\n",
    "tests/test_ops.py": "from calc import mean, total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n\n\n"
    "def test_mean():\n    assert mean([2, 4, 6]) == 4.0\n",
}
MEAN = "tests/test_ops.py::test_mean"


async def _run(tmp_path: Path, name: str, *options: str) -> tuple[int, dict, str]:
    """`codeloop run TEXT --repo R --mode execute --model function:scripted_calc.py:NAME --json`."""
    repo = PipelineRunner.make_repo(tmp_path / name, FILES)
    prompts = tmp_path / f"{name}.prompts"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env |= {"CODELOOP_HOME": str(tmp_path / f"{name}.home"), "CODELOOP_TEST_PROMPTS": str(prompts)}
    argv = [sys.executable, "-m", "codeloop", "run", TEXT, "--repo", str(repo), "--mode", "execute"]
    argv += ["--model", f"function:{SCRIPTED}:{name}", "--json", *options]
    with anyio.fail_after(900):  # a hang guard: on 2 shared cores one run has taken over 600 s
        done = await anyio.run_process(argv, env=env, cwd=REPO_ROOT, check=False, stdin=subprocess.DEVNULL)
    stdout = done.stdout.decode()
    assert stdout.strip(), done.stderr.decode()[-3000:]
    return done.returncode, json.loads(stdout), prompts.read_text() if prompts.exists() else ""


async def test_the_verdict_follows_what_the_tests_execute_when_the_task_names_no_test(tmp_path: Path) -> None:
    """Our contract (the verifier's page): the correct fix is `passed` with test_mean, which executes
    the changed line, as evidence; a wrong fix goes back to the coder with test_mean's id and
    assertion message; a coder that never fixes it is handed off with `test.still_failing`."""
    results = {}

    async def run(name: str, *options: str) -> None:
        results[name] = await _run(tmp_path, name, *options)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "right")
        tg.start_soon(run, "always_wrong", "--max-revisions", "1")

    code, right, _ = results["right"]
    assert (code, right["status"]) == (0, "done"), right["report"]
    verification = right["verification"]
    assert verification["verdict"] == "passed" and verification["evidence"] == [MEAN]
    assert right["revisions"] == 0 and "len(xs))" in right["patch"]

    code, never, prompts = results["always_wrong"]
    feedback = prompts.split("\x1e")[1]
    assert f"[test.still_failing] {MEAN}" in feedback and "assert 3.0 == 4.0" in feedback
    assert (code, never["status"], never["failure_class"]) == (3, "handed_off", "test.still_failing")
    assert never["revisions"] == 1 and never["verification"]["verdict"] == "failed"
    assert MEAN in {f["test_id"] for f in never["verification"]["failures"]}
