"""Nothing shared but the bus: a task submitted from one home is done by workers (separate
processes, each its own CODELOOP_HOME, another user) that cannot read the repository; they work
from the snapshot alone, the coder and verifier through the workspace service, and the patch they
made applies to the original tree."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agents.client import submit_task, watch_task
from agents.messages import TaskResult
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.testing import make_repo
from tests.processes import processes_mentioning
from tests.support.cluster import ROLES, as_other_user, open_cluster
from tests.support.repos import CALC
from tests.support.scale_faults import slow_fix_task

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the workers run as another user, which needs root"),
]


@pytest.fixture
def base() -> Iterator[Path]:
    """The cluster's directory, under /tmp (not tmp_path, which is 0700): the workers' homes must
    be theirs to enter. Nothing of it may still run afterwards."""
    base = Path(tempfile.mkdtemp(prefix="codeloop-scale-"))
    base.chmod(0o755)
    yield base
    assert processes_mentioning(base) == []
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The submitter's repository, mode 0700: the workers' user cannot list or read it."""
    repo = make_repo(tmp_path / "repo", CALC)
    repo.chmod(0o700)
    denied = subprocess.run([*as_other_user(), "ls", str(repo)], capture_output=True, text=True)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    return repo


async def test_workers_that_cannot_read_the_repository_do_the_task_from_the_snapshot(
    tmp_path: Path, base: Path, repo: Path
) -> None:
    with anyio.fail_after(300):
        async with open_cluster(base, model_delay_s=0.0, workspaces=True) as cluster:
            for role in ROLES:
                await cluster.start(role)
            config = BusConfig(
                servers=tuple(n.url for n in cluster.nodes), replicas=3, state_dir=tmp_path / "me"
            )
            async with open_bus(config) as bus:
                task = await slow_fix_task(bus, repo)
                envelope, _ = await submit_task(bus, task)
                final = await watch_task(bus, envelope.task_id, lambda e: None)
                # A task without a snapshot (a bare NATS client's): the worker must say it cannot
                # read the path, not capture a partial or empty tree.
                bare, _ = await submit_task(bus, task.model_copy(update={"snapshot": None}))
                bare_final = await watch_task(bus, bare.task_id, lambda e: None)
            homes = [w.home for w in cluster.workers]
            by_role = {w.role: w.home for w in cluster.workers}
    result = TaskResult.model_validate(final.payload)
    assert result.status == "done", result.report
    assert result.files_changed == ["calc/__init__.py"] and result.patch
    # Every process had its own home, and none of them is the submitter's.
    assert len(set(homes)) == 2 + len(ROLES) and all(base in h.parents for h in homes)
    # The coder's and verifier's tools ran in the workspace service, not beside them.
    audit = [
        json.loads(line)
        for line in (by_role["workspaces"] / "workspaces-audit.jsonl").read_text().splitlines()
    ]
    calls = {
        (r["principal"].split(":")[0], r["tool"]) for r in audit if r["principal"].endswith(envelope.task_id)
    }
    assert {("code", "write_file"), ("verify", "run_tests")} <= calls, calls
    for role in ("coder", "verifier"):
        assert not any((by_role[role] / "work").iterdir()), role

    bare_result = TaskResult.model_validate(bare_final.payload)
    assert bare_result.status != "done" and bare_result.failure_class == "env.setup"
    assert "not readable by this worker" in bare_result.report, bare_result.report
    await anyio.to_thread.run_sync(_applies_and_fixes, repo, result.patch, tmp_path / "original")


def _applies_and_fixes(repo: Path, patch: str, copy: Path) -> None:
    """The patch applies to a copy of the original tree, and there the test it fixes passes; the
    original is untouched."""
    shutil.copytree(repo, copy, symlinks=True)
    subprocess.run(["git", "apply", "--check", "-"], cwd=copy, input=patch, text=True, check=True)
    subprocess.run(["git", "apply", "-"], cwd=copy, input=patch, text=True, check=True)
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_calc.py"],
        cwd=copy,
        capture_output=True,
        text=True,
    )
    assert tests.returncode == 0, tests.stdout
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
        == ""
    )
