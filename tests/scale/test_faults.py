"""The cluster on one machine under faults: while tasks run, a NATS node is SIGKILLed and
restarted and one worker of each role (the orchestrator too) is SIGKILLed and replaced; every
task is still done, once (`benchmarks/scale_bench.py --faults` at 10 tasks instead of 100)."""

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import anyio
import pytest

from tests.processes import processes_mentioning
from tests.support.cluster import ROLES
from tests.support.scale_faults import faults

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the workers run as another user, which needs root"),
]


async def test_no_task_is_lost_or_done_twice_when_a_node_and_a_worker_of_each_role_die() -> None:
    base = Path(tempfile.mkdtemp(prefix="codeloop-scale-faults-"))
    os.chmod(base, 0o755)
    try:
        with anyio.fail_after(400):
            report = await faults(
                argparse.Namespace(
                    tasks=10,
                    workers=[1],
                    model_delay=0.0,
                    max_seconds=300,
                    worker_concurrency=None,
                    workspace_service=False,
                ),
                base,
            )
        assert len(report["faults"]) == 2 + 1 + len(ROLES), report["faults"]  # the node down and up, 5 kills
        assert report["lost"] == 0 and report["not_done"] == 0 and report["done"] == 10, report
        assert report["results_doubled"] == 0, report
        assert report["steps_applied_twice"] == 0, report
        assert report["patches_not_applying_once"] == 0, report
    finally:
        assert processes_mentioning(base) == []
        shutil.rmtree(base, ignore_errors=True)
