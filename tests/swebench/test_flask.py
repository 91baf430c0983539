"""A real SWE-bench Lite instance end to end: pallets__flask-4992 from the bundle in tests/data,
its environment built from SWE-bench's spec (Python 3.11, Flask's requirement files read out of
the bundle), the gold patch applied and graded by the official parser in gVisor."""

import json
from pathlib import Path

import pytest

from tests.swebench.conftest import outcome, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.gvisor, pytest.mark.usefixtures("gvisor")]

DATA = Path(__file__).parents[1] / "data" / "swebench"


def test_flask_4992_gold_resolves(tmp_path: Path) -> None:
    out = tmp_path / "flask"
    done = run_cli(
        DATA / "pallets__flask-4992.jsonl", "--repos", DATA, "--predictions", "gold", "--out", out, "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resolved_ids"] == ["pallets__flask-4992"]
    report = json.loads((out / "instances" / "pallets__flask-4992" / "report.json").read_text())
    status = report["pallets__flask-4992"]["tests_status"]
    assert status["FAIL_TO_PASS"]["success"] == ["tests/test_config.py::test_config_from_file_toml"]
    assert status["PASS_TO_PASS"]["failure"] == [] and len(status["PASS_TO_PASS"]["success"]) == 18
    assert outcome(out, "pallets__flask-4992")["environment"]["python_version"].startswith("3.11")
