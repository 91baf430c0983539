"""Bad input to `codeloop swebench`: one line saying what is wrong, exit 2, nothing written."""

import json
from pathlib import Path

import pytest

from tests.swebench import synthetic
from tests.swebench.conftest import run_cli


def _error(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.slow
def test_a_malformed_instance_line_names_the_line(synthetic_inputs: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    text = synthetic_inputs["instances"].read_text().splitlines()
    bad.write_text(text[0] + "\n" + text[1][:40] + "\n")
    out = tmp_path / "out"
    line = _error(run_cli(bad, "--predictions", "gold", "--out", out))
    assert line.startswith("error: ") and "line 2: not valid JSON" in line
    assert not out.exists()


@pytest.mark.slow
def test_an_unknown_instance_id(synthetic_inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [
        synthetic_inputs["instances"],
        "--specs",
        synthetic_inputs["specs"],
        "--repos",
        synthetic_inputs["repos"],
    ]
    line = _error(
        run_cli(*args, "--predictions", "gold", "--instance-ids", "synthetic__calc-9", "--out", out)
    )
    assert "no instance synthetic__calc-9" in line
    assert not out.exists()


@pytest.mark.slow
def test_a_repository_not_found_says_where_it_looked(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    empty = tmp_path / "repos"
    empty.mkdir()
    out = tmp_path / "out"
    args = [synthetic_inputs["instances"], "--specs", synthetic_inputs["specs"], "--repos", empty]
    line = _error(run_cli(*args, "--predictions", "gold", "--out", out))
    assert f"repository {synthetic.REPO} not found: looked under --repos {empty}" in line
    assert "calc.bundle" in line and "pass --repos DIR" in line
    assert not out.exists()


@pytest.mark.slow
def test_a_missing_interpreter_names_the_version_and_how_to_install_it(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    specs = synthetic.specs()
    specs[synthetic.REPO][synthetic.VERSION]["python"] = "3.4"
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    out = tmp_path / "out"
    args = [synthetic_inputs["instances"], "--specs", path, "--repos", synthetic_inputs["repos"]]
    line = _error(run_cli(*args, "--predictions", "gold", "--out", out))
    assert "3.4" in line and "pyenv install 3.4" in line
    assert not out.exists()


@pytest.mark.slow
def test_a_spec_is_needed_for_a_repository_swebench_lacks(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    line = _error(run_cli(synthetic_inputs["instances"], "--predictions", "gold", "--out", tmp_path / "o"))
    assert "no spec for repository synthetic/calc" in line and "--specs FILE" in line


@pytest.mark.slow
def test_predictions_and_model_are_exclusive(synthetic_inputs: dict[str, Path], tmp_path: Path) -> None:
    line = _error(run_cli(synthetic_inputs["instances"], "--out", tmp_path / "o"))
    assert "exactly one of --predictions" in line
