"""VerifierSpares: a verification in a workspace prepared ahead judges as a fresh one does, each
spare serves one verification, and without a sandbox the verifier falls back to its own."""

import shutil
from pathlib import Path

import anyio
import pytest

from agents.messages.verification import Baseline, VerificationReport
from agents.roles.verifier.exec_session import ExecSession
from agents.roles.verifier.spares import Spare, VerifierSpares
from agents.roles.verifier.verify import PatchTask, verify_patch
from agents.runtime.tools import ToolTarget
from tests.agents.roles.verifier.conftest import (
    CALC_FIXED,
    GVISOR,
    NO_RUNSC,
    InProcessTools,
    deadline,
    git,
    make_patch,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "scratch"
    path.mkdir()
    return path


async def _verify(
    workspace: Path, patch: str, tools: InProcessTools, session: ExecSession | None = None
) -> tuple[VerificationReport, Baseline]:
    with anyio.fail_after(240):
        return await verify_patch(
            workspace=workspace,
            patch=patch,
            task=PatchTask(
                mode="execute", plan_files=["calc.py"], test_targets=["tests/test_calc.py::test_mul"]
            ),
            tools=tools,
            deadline=deadline(),
            baseline=None,
            session=session,
        )


async def _verify_in(
    spare: Spare, repo: Path, patch: str, tools: InProcessTools
) -> tuple[VerificationReport, Baseline]:
    await anyio.to_thread.run_sync(lambda: shutil.copytree(repo, spare.root, dirs_exist_ok=True))
    return await _verify(spare.root, patch, tools, spare.session)


@pytest.mark.gvisor
@pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)
async def test_a_spare_verifies_as_a_fresh_workspace_does_and_serves_one_verification(
    calc_repo: Path, scratch: Path
) -> None:
    tools = InProcessTools(backend="gvisor")
    fix = make_patch(calc_repo, {"calc.py": CALC_FIXED})
    # A test that leaves a mark in the sandbox's /tmp: the next spare must not see it.
    marker = make_patch(
        calc_repo,
        {
            "calc.py": CALC_FIXED,
            "tests/test_mark.py": (
                "import os\n\ndef test_mark():\n"
                "    assert not os.path.exists('/tmp/left-by-the-last-task')\n"
                "    open('/tmp/left-by-the-last-task', 'w').close()\n"
            ),
        },
    )
    async with VerifierSpares(tools, scratch) as spares:
        assert await spares.wait_ready()
        async with spares.take() as first:
            assert first is not None
            first_root = first.root
            assert [p async for p in anyio.Path(first_root).iterdir()] == []  # empty; its sandbox is up
            report, _ = await _verify_in(first, calc_repo, marker, tools)
        assert report.verdict == "passed", report
        assert await spares.wait_ready()
        async with spares.take() as second:
            assert second is not None and second.root != first_root
            again, _ = await _verify_in(second, calc_repo, marker, tools)
            fixed, _ = await _verify(calc_repo, fix, tools)
        assert not first_root.exists()
    assert again.verdict == "passed", again  # no mark from the first verification's sandbox
    assert fixed.verdict == "passed"
    assert [p async for p in anyio.Path(scratch).iterdir()] == []  # spares and their marks gone


async def test_the_next_spare_is_prepared_while_one_is_in_use(
    calc_repo: Path, scratch: Path, tools: InProcessTools
) -> None:
    async with VerifierSpares(tools, scratch) as spares:
        async with spares.take() as first:
            assert first is not None
            with anyio.fail_after(60):
                assert await spares.wait_ready()  # while the first is still held
            async with spares.take() as second:
                assert second is not None and second.root != first.root
                assert first.root.exists() and second.root.exists()


class BrokenExec(InProcessTools):
    """A provider whose exec server cannot start a sandbox here (an unknown backend)."""

    def servers(
        self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None
    ) -> dict[str, ToolTarget]:
        from tool_servers.protocol.scopes import Scope
        from tool_servers.protocol.spec import ServerOptions
        from tool_servers.serve import server_builder

        options = ServerOptions(scopes=frozenset(Scope(s) for s in scopes))
        return {"exec": server_builder("exec")(root, options, backend="gvisor", policy="not-a-policy")}


async def test_without_a_working_sandbox_the_verifier_verifies_in_its_own_workspace(
    calc_repo: Path, scratch: Path
) -> None:
    async with VerifierSpares(BrokenExec(backend="process"), scratch) as spares:
        assert not await spares.wait_ready()
        async with spares.take() as spare:
            assert spare is None
            # What the verifier then does: open an exec session of its own on its workspace.
            report, _ = await _verify(
                calc_repo, make_patch(calc_repo, {"calc.py": CALC_FIXED}), InProcessTools(backend="process")
            )
    assert report.verdict == "passed", report
    assert git(calc_repo, "status", "--porcelain") == ""
