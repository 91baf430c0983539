"""SWE-bench harness tests: the synthetic repository's inputs, made once per session, and a way
to run `codeloop swebench` as a user does (a subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.gvisor import probe_runsc
from tests.swebench import synthetic


@pytest.fixture(scope="session")
def synthetic_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return synthetic.write_inputs(tmp_path_factory.mktemp("swebench-synthetic"))


@pytest.fixture
def gvisor() -> None:
    status = probe_runsc()
    if not status.works:
        pytest.skip(f"runsc does not work here: {status.detail}")


def run_cli(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`codeloop swebench ARGS...`; the session's cache directory (conftest) is inherited."""
    return subprocess.run(
        [sys.executable, "-m", "codeloop", "swebench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def outcome(out: Path, instance_id: str) -> dict[str, object]:
    return json.loads((out / "instances" / instance_id / "outcome.json").read_text())
