"""Grading is SWE-bench's own: on logs in the shape codeloop's eval script prints (written here for
the synthetic instance, tests/swebench/synthetic.py), codeloop's grade equals what swebench 4.1.0's
`make_test_spec` + `get_eval_report` give (the official harness's own calls), and the per-test
outcomes tell the gold patch from the test patch alone."""

import json
from pathlib import Path

import pytest

from codeloop.swebench.grade import grade, not_passing, status_map
from codeloop.swebench.instances import Instance, load_instances
from codeloop.swebench.official import swebench
from codeloop.swebench.specs import register_specs
from codeloop.swebench.unrunnable import ABSENT, NETWORK, OTHER, reasons, sections
from tests.swebench import synthetic

ADD = "tests/test_core.py::test_add"
MUL = "tests/test_core.py::test_mul"


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Instance:
    """synthetic__calc-1 (FAIL_TO_PASS test_add, PASS_TO_PASS test_mul), its spec registered."""
    register_specs(synthetic.specs(), where="synthetic specs")
    path = tmp_path_factory.mktemp("instances") / "calc.jsonl"
    path.write_text(json.dumps(synthetic.instances("0" * 40)[0]) + "\n")
    (found,) = load_instances(path)
    return found


def _log(tmp_path: Path, name: str, outcomes: dict[str, str]) -> Path:
    """An eval log as codeloop's eval script writes it: the shell trace around `pytest -rA`, whose
    short summary gives each test's outcome (`PASSED`, `FAILED`, ...)."""
    summary = "".join(f"{outcome} {test}\n" for test, outcome in outcomes.items())
    failed = sum(o == "FAILED" for o in outcomes.values())
    text = (
        "+ git apply -v -\nChecking patch tests/test_core.py...\nApplied patch tests/test_core.py cleanly.\n"
        "+ : '>>>>> Start Test Output'\n+ pytest -rA tests/test_core.py\n"
        "============================= test session starts ==============================\n"
        f"collected {len(outcomes)} items\n\n"
        "=========================== short test summary info ============================\n"
        f"{summary}"
        f"========================= {failed} failed, {len(outcomes) - failed} passed in 0.02s =========================\n"
        "+ : '>>>>> End Test Output'\n+ git checkout 0000000000000000000000000000000000000000 tests/test_core.py\n"
    )
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    return path


LOGS = {
    "gold": {ADD: "PASSED", MUL: "PASSED"},
    "empty": {ADD: "FAILED", MUL: "PASSED"},  # the test patch alone: add still subtracts
    "wrong": {MUL: "PASSED", ADD: "FAILED"},
}


def _prediction(instance: Instance, patch: str) -> dict:
    return {"instance_id": instance.instance_id, "model_name_or_path": "test", "model_patch": patch}


def test_the_grade_is_the_official_harness_own(instance: Instance, tmp_path: Path) -> None:
    log = _log(tmp_path, "gold", LOGS["gold"])
    official_spec = swebench().test_spec.make_test_spec(instance.as_swebench())
    official = swebench().grading.get_eval_report(
        official_spec, _prediction(instance, instance.patch), str(log), True
    )
    ours = grade(instance, _prediction(instance, instance.patch), log)
    assert ours == official
    assert ours[instance.instance_id]["resolved"] is True
    assert ours[instance.instance_id]["tests_status"]["FAIL_TO_PASS"]["success"] == instance.FAIL_TO_PASS


@pytest.mark.parametrize(("log", "resolved"), [("gold", True), ("empty", False), ("wrong", False)])
def test_gold_and_the_test_patch_alone_differ_by_the_parsers_per_test_outcomes(
    instance: Instance, tmp_path: Path, log: str, resolved: bool
) -> None:
    path = _log(tmp_path, log, LOGS[log])
    statuses, found = status_map(instance, path)
    assert found
    assert statuses[MUL] == "PASSED"
    assert statuses[ADD] == ("PASSED" if resolved else "FAILED")
    report = grade(instance, _prediction(instance, "x"), path)[instance.instance_id]
    assert report["resolved"] is resolved
    failing = [] if resolved else [ADD]
    assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == failing
    assert not_passing(instance, statuses) == failing


def test_a_log_without_the_markers_or_with_an_apply_failure_grades_as_not_applied(
    instance: Instance, tmp_path: Path
) -> None:
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


def test_tests_left_out_are_not_graded(instance: Instance, tmp_path: Path) -> None:
    path = _log(tmp_path, "empty", LOGS["empty"])
    left_out = frozenset({ADD})
    report = grade(instance, _prediction(instance, "x"), path, left_out=left_out)[instance.instance_id]
    assert report["resolved"] is True
    assert ADD not in json.dumps(report["tests_status"])


def test_a_failure_is_put_down_to_the_network_only_when_its_section_shows_a_refused_connection(
    instance: Instance,
) -> None:
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
