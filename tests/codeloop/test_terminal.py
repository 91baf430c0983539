"""`codeloop run` at a terminal, under a pseudo terminal as a person sees it: no library prints
into the live view, `y` at the prompt approves a protected write that then ends `done`, and Ctrl-C
says what became of the task."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pexpect
import pytest

from codeloop.testing import make_repo
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve
from tests.e2e.conftest import model
from tests.processes import processes_mentioning
from tests.support.repos import CALC

REPO_ROOT = Path(__file__).parents[2]
CI = ".github/workflows/ci.yml"

pytestmark = pytest.mark.slow


def _terminal_env(home: Path) -> dict[str, str]:
    """A person's environment: pydantic-ai leaves its banner out under pytest and CI by itself, so
    those markers go, and only codeloop's own switch can keep the banner away."""
    env = codeloop_env(home)
    for marker in ("PYTEST_VERSION", "PYTEST_CURRENT_TEST", "CI", "PYDANTIC_AI_NO_BANNER"):
        env.pop(marker, None)
    return {**env, "TERM": "xterm", "COLUMNS": "100", "LINES": "40"}


def _as_at_a_terminal() -> None:
    """In the child before exec: SIGINT as a shell at a terminal gives it. A disposition or mask
    left by whatever ran earlier in the test worker is inherited across exec, and an ignored
    SIGINT makes Python install no KeyboardInterrupt handler at all (Ctrl-C would do nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _spawn(home: Path, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "codeloop", "run", *args],
        env=_terminal_env(home),
        cwd=str(REPO_ROOT),
        encoding="utf-8",
        codec_errors="replace",
        timeout=240,
        dimensions=(40, 100),
        preexec_fn=_as_at_a_terminal,
    )


def _finish(child: pexpect.spawn) -> tuple[str, int]:
    """The rest of the child's output and its exit status, once it exited."""
    child.expect(pexpect.EOF)
    child.close()
    status = child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0)
    return str(child.before), status


def test_y_at_the_prompt_approves_a_protected_write_that_ends_done_without_a_library_banner(
    tmp_path: Path,
) -> None:
    """The person at the terminal approves the CI workflow: the approval travels with the task, the
    verifier judges the patch on its merits (`passed`), the summary names who approved which path;
    and nothing but codeloop writes into the live view (pydantic-ai's first-run banner)."""
    repo = make_repo(tmp_path / "repo", CALC)
    text = "fix add so tests/test_calc.py::test_add passes, and add a CI workflow running the tests"
    child = _spawn(
        tmp_path / "home",
        text,
        "--repo",
        str(repo),
        "--mode",
        "write",
        "--model",
        model("fix_with_ci_workflow"),
    )
    child.expect(r"\[y/N\] ")
    seen = str(child.before) + str(child.after)
    child.sendline("y")
    rest, status = _finish(child)
    shown = seen + rest
    assert status == 0, shown[-3000:]
    assert CI in seen  # the question names the path
    assert "PYDANTIC_AI_NO_BANNER" not in shown and "ogfire" not in shown, shown[-3000:]
    assert ": done" in rest and "verification: passed" in rest, rest[-3000:]
    assert f"approved: {CI} by " in rest and "at the terminal of codeloop run" in rest
    assert (repo / CI).exists() is False  # a patch, not a write to the checkout


def test_ctrl_c_on_a_task_of_a_running_serve_says_it_goes_on_and_how_to_cancel_it(tmp_path: Path) -> None:
    """Our choice: Ctrl-C stops only `codeloop run`; the task in the serve goes on, so say so and
    name the commands that follow and cancel it (which work: it is still running)."""
    home, repo = tmp_path / "home", make_repo(tmp_path / "repo", CALC)

    async def main() -> tuple[str, int, bytes, int, int]:
        with anyio.fail_after(300):
            return await _interrupt_then_cancel()

    async def _interrupt_then_cancel() -> tuple[str, int, bytes, int, int]:
        async with running_serve(home, "--pipeline", "auto", "--no-mcp"):
            interrupted = await anyio.to_thread.run_sync(
                lambda: _interrupt_once_submitted(home, repo, model("slow_forever"))
            )
            task_id = interrupted[0].split("task ", 1)[1].split()[0]
            still = (await _codeloop(home, "status", task_id, "--json")).stdout
            cancelled = (await _codeloop(home, "cancel", task_id)).returncode
            watched = (await _codeloop(home, "watch", task_id)).returncode
        return (*interrupted, still, cancelled, watched)

    message, status, still, cancelled, watched = anyio.run(main, backend="asyncio")
    assert status == 130, message
    assert "goes on in the running `codeloop serve`" in message, message
    task_id = message.split("task ", 1)[1].split()[0]
    assert f"`codeloop watch {task_id}` follows it, `codeloop cancel {task_id}` stops it" in message
    assert json.loads(still)["status"] == "coding", still[:500]  # not ended: at work in the serve
    assert cancelled == 0 and watched == 4


def test_ctrl_c_on_a_task_of_its_own_bus_says_it_stopped_with_the_process(tmp_path: Path) -> None:
    """Without a serve the task ran inside `codeloop run`: Ctrl-C ends it, leaves nothing running,
    and says so."""
    repo = make_repo(tmp_path / "repo", CALC)
    message, status = _interrupt_once_submitted(tmp_path / "home", repo, model("slow_forever"))
    assert status == 130, message
    assert "stopped with this process (it ran on a bus of its own)" in message, message
    assert processes_mentioning(tmp_path) == []


async def _codeloop(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([*CODELOOP, *args], env=codeloop_env(home), check=False)


def _interrupt_once_submitted(home: Path, repo: Path, model_name: str) -> tuple[str, int]:
    """Run a task that never ends by itself at a terminal, press Ctrl-C once its coder is at work,
    and return the `error:` line and the exit status."""
    child = _spawn(home, "fix add", "--repo", str(repo), "--mode", "write", "--model", model_name)
    child.expect(r"task \S+ submitted")
    child.expect("coder")  # the live view's stage: the task is under way
    child.sendintr()
    child.expect(r"error: [^\r\n]+")
    message = str(child.after)
    _, status = _finish(child)
    return message, status
