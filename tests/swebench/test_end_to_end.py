"""`codeloop swebench` end to end on a repository made in the test, in gVisor, with real
builds: gold resolves, empty does not, a wrong patch does not, a patch that does not apply is
unresolved; a test that connects out fails in the sandbox and a gold run records it; --left-out
leaves it out of grading, saying so; --resume runs only what was not graded."""

import json
from pathlib import Path

import pytest

from tests.swebench import synthetic
from tests.swebench.conftest import outcome, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.gvisor, pytest.mark.usefixtures("gvisor")]


def _common(inputs: dict[str, Path]) -> list[str | Path]:
    return [inputs["instances"], "--repos", inputs["repos"], "--specs", inputs["specs"]]


def test_gold_resolves_and_the_network_test_is_recorded_as_unrunnable(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "gold"
    done = run_cli(*_common(synthetic_inputs), "--predictions", "gold", "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["resolved_ids"] == ["synthetic__calc-1"]
    assert summary["unresolved_ids"] == ["synthetic__calc-2"]
    assert summary["error_instances"] == 0 and summary["completed_instances"] == 2
    assert json.loads((out / "report.json").read_text()) == summary
    network = "tests/test_neg.py::test_neg_over_network"
    # The socket test fails inside the sandbox (no network), while the build reached the index.
    assert outcome(out, "synthetic__calc-2")["not_passing"] == [network]
    official = json.loads((out / "instances" / "synthetic__calc-2" / "report.json").read_text())
    status = official["synthetic__calc-2"]["tests_status"]["FAIL_TO_PASS"]
    assert status == {"success": ["tests/test_neg.py::test_neg"], "failure": [network]}
    log = (out / "instances" / "synthetic__calc-2" / "test_output.txt").read_text()
    assert "OSError: [Errno 113] No route to host" in log
    validation = json.loads((out / "validation.json").read_text())
    assert validation["synthetic__calc-2"]["cannot_run"] == [network]
    assert validation["synthetic__calc-2"]["why"] == {network: "network"}
    assert summary["codeloop"]["gold"]["unresolved_only_for_network_ids"] == ["synthetic__calc-2"]
    assert "synthetic__calc-1" not in validation
    assert "synthetic/calc" in (out / "report.html").read_text()

    left = tmp_path / "left-out"
    done = run_cli(
        *_common(synthetic_inputs),
        "--predictions",
        "gold",
        "--left-out",
        out / "validation.json",
        "--out",
        left,
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resolved_ids"] == ["synthetic__calc-1", "synthetic__calc-2"]
    assert outcome(left, "synthetic__calc-2")["left_out"] == [network]
    assert json.loads((left / "report.json").read_text())["codeloop"]["left_out_tests"] == {
        "synthetic__calc-2": [network]
    }


def test_empty_wrong_and_unapplicable_predictions_resolve_nothing(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    done = run_cli(
        *_common(synthetic_inputs), "--predictions", "empty", "--out", tmp_path / "empty", "--json"
    )
    assert done.returncode == 0, done.stderr
    empty = json.loads(done.stdout)
    assert empty["resolved_instances"] == 0 and empty["unresolved_instances"] == 2

    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(
        json.dumps(
            {"instance_id": "synthetic__calc-1", "model_name_or_path": "m", "model_patch": synthetic.WRONG_1}
        )
        + "\n"
        + json.dumps(
            {
                "instance_id": "synthetic__calc-2",
                "model_name_or_path": "m",
                "model_patch": synthetic.NOT_APPLYING_1,
            }
        )
        + "\n"
    )
    out = tmp_path / "preds"
    done = run_cli(*_common(synthetic_inputs), "--predictions", predictions, "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["unresolved_ids"] == ["synthetic__calc-1", "synthetic__calc-2"]
    assert outcome(out, "synthetic__calc-1")["patch_applied"] is True
    assert outcome(out, "synthetic__calc-1")["not_passing"] == ["tests/test_core.py::test_add"]
    assert outcome(out, "synthetic__calc-2")["patch_applied"] is False
    assert summary["codeloop"]["patch_apply_failed_ids"] == ["synthetic__calc-2"]
    log = (out / "instances" / "synthetic__calc-2" / "run_instance.log").read_text()
    assert ">>>>> Patch Apply Failed" in log and "patch --batch --fuzz=5 -p1 -i" in log


def test_resume_runs_only_what_was_not_graded(synthetic_inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = run_cli(
        *_common(synthetic_inputs),
        "--predictions",
        "gold",
        "--instance-ids",
        "synthetic__calc-1",
        "--out",
        out,
    )
    assert first.returncode == 0, first.stderr
    graded = out / "instances" / "synthetic__calc-1" / "outcome.json"
    before = graded.stat().st_mtime_ns
    again = run_cli(*_common(synthetic_inputs), "--predictions", "gold", "--resume", out, "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["completed_ids"] == ["synthetic__calc-1", "synthetic__calc-2"]
    assert graded.stat().st_mtime_ns == before
    assert "synthetic__calc-2: unresolved" in again.stderr and "synthetic__calc-1:" not in again.stderr


def test_a_model_solves_the_instance_and_its_patch_is_graded(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    """--model: the agent pipeline makes the prediction (a scripted model applies the fix through
    the tools), written in SWE-bench's predictions format, then graded as any prediction."""
    model = f"function:{Path(__file__).with_name('gold_model.py')}:solve"
    out = tmp_path / "model"
    done = run_cli(
        *_common(synthetic_inputs),
        "--model",
        model,
        "--instance-ids",
        "synthetic__calc-1",
        "--out",
        out,
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resolved_ids"] == ["synthetic__calc-1"]
    (line,) = (out / "predictions.jsonl").read_text().splitlines()
    prediction = json.loads(line)
    assert prediction["instance_id"] == "synthetic__calc-1" and prediction["model_name_or_path"] == model
    assert "+    return a + b" in prediction["model_patch"]
    assert outcome(out, "synthetic__calc-1")["model_name_or_path"] == model
