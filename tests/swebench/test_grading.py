"""Grading is SWE-bench's own: on recorded logs of codeloop's runs, codeloop's grade equals what
swebench 4.1.0's `make_test_spec` + `get_eval_report` give (the official harness's own calls),
and the per-test outcomes tell gold from the test patch alone."""

import json
from pathlib import Path

import pytest

from codeloop.swebench.grade import grade, not_passing, status_map
from codeloop.swebench.instances import load_instances
from codeloop.swebench.official import swebench
from codeloop.swebench.unrunnable import ABSENT, NETWORK, OTHER, reasons, sections

DATA = Path(__file__).parents[1] / "data" / "swebench"
LOGS = DATA / "logs"


def _instance(name: str):
    (instance,) = load_instances(DATA / f"{name}.jsonl")
    return instance


def _prediction(instance, patch: str) -> dict:
    return {"instance_id": instance.instance_id, "model_name_or_path": "test", "model_patch": patch}


def test_the_grade_is_the_official_harness_own_on_a_recorded_log() -> None:
    """pytest's specs need no network to make the official TestSpec: the harness's own call."""
    instance = _instance("pytest-dev__pytest-7168")
    log = LOGS / "pytest-dev__pytest-7168.gold.txt"
    official_spec = swebench().test_spec.make_test_spec(instance.as_swebench())
    official = swebench().grading.get_eval_report(
        official_spec, _prediction(instance, instance.patch), str(log), True
    )
    ours = grade(instance, _prediction(instance, instance.patch), log)
    assert ours == official
    assert ours[instance.instance_id]["resolved"] is True
    assert ours[instance.instance_id]["tests_status"]["FAIL_TO_PASS"]["success"] == instance.FAIL_TO_PASS


@pytest.mark.parametrize(("log", "resolved"), [("gold", True), ("empty", False), ("last-hunk-out", False)])
def test_gold_and_the_test_patch_alone_differ_by_the_parsers_per_test_outcomes(
    log: str, resolved: bool
) -> None:
    instance = _instance("pallets__flask-4992")
    path = LOGS / f"pallets__flask-4992.{log}.txt"
    statuses, found = status_map(instance, path)
    assert found
    assert statuses["tests/test_config.py::test_config_from_file_json"] == "PASSED"
    expected = "PASSED" if resolved else "FAILED"
    assert statuses["tests/test_config.py::test_config_from_file_toml"] == expected
    report = grade(instance, _prediction(instance, "x"), path)[instance.instance_id]
    assert report["resolved"] is resolved
    failing = [] if resolved else ["tests/test_config.py::test_config_from_file_toml"]
    assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == failing
    assert not_passing(instance, statuses) == failing


def test_a_log_without_the_markers_or_with_an_apply_failure_grades_as_not_applied(tmp_path: Path) -> None:
    instance = _instance("pallets__flask-4992")
    for text in ("no markers here\n", ">>>>> Patch Apply Failed:\nerror: corrupt patch\n"):
        path = tmp_path / "log.txt"
        path.write_text(text)
        report = grade(instance, _prediction(instance, "x"), path)[instance.instance_id]
        assert report == {
            "patch_is_None": False,
            "patch_exists": True,
            "patch_successfully_applied": False,
            "resolved": False,
        }


def test_tests_left_out_are_not_graded() -> None:
    instance = _instance("pallets__flask-4992")
    path = LOGS / "pallets__flask-4992.empty.txt"
    left_out = frozenset({"tests/test_config.py::test_config_from_file_toml"})
    report = grade(instance, _prediction(instance, "x"), path, left_out=left_out)[instance.instance_id]
    assert report["resolved"] is True
    assert "tests/test_config.py::test_config_from_file_toml" not in json.dumps(report["tests_status"])


def test_a_failure_is_put_down_to_the_network_only_when_its_section_shows_a_refused_connection() -> None:
    instance = _instance("pallets__flask-4992")
    log = (
        "_____ TestTimeout.test_connect _____\n    socket.create_connection(...)\n"
        "E   OSError: [Errno 113] No route to host\n"
        "_____ test_plain _____\nE   assert 1 == 2\n"
        # A title as long as the terminal is wide gets one underscore each side.
        "_ RequestsTestSuite.test_a_name_as_long_as_the_terminal_is_wide_minus_four_characters _\n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
        "E       socket.gaierror: [Errno -3] Temporary failure in name resolution\n"
    )
    long = "RequestsTestSuite.test_a_name_as_long_as_the_terminal_is_wide_minus_four_characters"
    assert set(sections(log)) == {"TestTimeout.test_connect", "test_plain", long}
    long_id = "t.py::" + long.replace(".", "::")
    why = reasons(
        instance, ["t.py::TestTimeout::test_connect", "t.py::test_plain", "t.py::test_absent", long_id], log
    )
    assert why == {
        long_id: NETWORK,
        "t.py::TestTimeout::test_connect": NETWORK,
        "t.py::test_plain": OTHER,
        "t.py::test_absent": ABSENT,
    }
