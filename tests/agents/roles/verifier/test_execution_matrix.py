"""The verdict by what the tests execute, over repository shapes: each a real tree, a correct and a
wrong patch, through a real exec server session and the sandbox. The task names no test and the
plan no target, as real issues rarely do; the starting tree's coverage is measured once per shape
(the second patch reuses it from the verifier's cache)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.failures import FailureClass
from agents.feedback import revision_feedback
from tests.agents.roles.verifier.conftest import FAST_PYTEST, make_patch, make_repo, verify_for_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TEXT = "mean() in the calc package returns the wrong value: mean([2, 4, 6]) gives 6.0, not 4.0."
OPS = "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n"
TEST_MEAN = (
    "from calc.ops import mean\n\n\ndef test_mean():\n    assert mean([2, 4, 6]) == 4.0, 'mean of 2, 4, 6'\n"
)

SETTINGS = "import json\nimport os\n\n\ndef settings():\n    return json.loads(os.environ.get('CALC_SETTINGS', '{broken'))\n\n\n"


@dataclass(frozen=True)
class Shape:
    """A repository, the file a fix changes, and what the verifier must say about each patch."""

    files: dict[str, str]
    changed: str = "calc/ops.py"
    tests: tuple[str, ...] = ("tests/test_ops.py::test_mean",)
    """The tests that execute the changed line and fail before the fix."""
    preexisting: tuple[str, ...] = ()
    environmental: tuple[str, ...] = ()
    """Tests that execute the changed line but fail before and after with the environment's crash."""
    message: str = "mean of 2, 4, 6"
    unverified: bool = False
    """No test executes the changed code: both patches are `unverified`, saying so."""
    fix: tuple[str, str, str] = ("len(xs) - 1)", "len(xs))", "len(xs) + 1)")
    """The buggy text, its correct replacement, and a wrong one."""


def _pkg(ops: str = OPS, tests: str = TEST_MEAN, **more: str) -> dict[str, str]:
    return {
        "pytest.ini": FAST_PYTEST,
        "calc/__init__.py": "",
        "calc/ops.py": ops,
        "tests/test_ops.py": tests,
        **more,
    }


SHAPES = {
    "assertion_in_test_body": Shape(_pkg()),
    "exception_raised_through_the_source": Shape(
        _pkg(
            ops="def mean(xs):\n    if len(xs) < 3:\n        raise ValueError('too short')\n"
            "    return sum(xs) / len(xs)\n",
            tests="from calc.ops import mean\n\n\ndef test_mean_of_two():\n    assert mean([1, 3]) == 2.0\n",
        ),
        tests=("tests/test_ops.py::test_mean_of_two",),
        message="too short",
        fix=("len(xs) < 3", "len(xs) < 1", "len(xs) <= 2"),
    ),
    "parametrized_test": Shape(
        _pkg(
            tests="import pytest\n\nfrom calc.ops import mean\n\n\n@pytest.mark.parametrize('xs, want', "
            "[([2, 4, 6], 4.0), ([1, 2, 3, 6], 3.0)])\ndef test_mean(xs, want):\n    assert mean(xs) == want, 'mean'\n",
        ),
        tests=("tests/test_ops.py::test_mean[xs0-4.0]", "tests/test_ops.py::test_mean[xs1-3.0]"),
        message="mean",
    ),
    "unittest_test_case": Shape(
        _pkg(
            tests="import unittest\n\nfrom calc.ops import mean\n\n\nclass TestMean(unittest.TestCase):\n"
            "    def test_mean(self):\n        self.assertEqual(mean([2, 4, 6]), 4.0, 'mean of 2, 4, 6')\n",
        ),
        tests=("tests/test_ops.py::TestMean::test_mean",),
    ),
    "src_package_and_tests_elsewhere": Shape(
        {
            "pytest.ini": FAST_PYTEST + "pythonpath = src\n",
            "src/calc/__init__.py": "",
            "src/calc/ops.py": OPS,
            "checks/test_ops.py": TEST_MEAN,
        },
        changed="src/calc/ops.py",
        tests=("checks/test_ops.py::test_mean",),
    ),
    "fixture_calls_the_changed_code": Shape(
        _pkg(
            tests="def test_mean(average):\n    assert average == 4.0, 'mean of 2, 4, 6'\n",
            **{
                "tests/conftest.py": "import pytest\n\nfrom calc.ops import mean\n\n\n@pytest.fixture\n"
                "def average():\n    return mean([2, 4, 6])\n"
            },
        ),
    ),
    "unrelated_failure_before": Shape(
        _pkg(
            **{
                "tests/test_legacy.py": "def test_legacy_format():\n    assert 'a' == 'b', 'broken for years'\n"
            }
        ),
        preexisting=("tests/test_legacy.py::test_legacy_format",),
    ),
    "test_returning_before_the_replaced_line": Shape(
        # test_mean_of_nothing calls mean() but returns before the line the fix replaces: no
        # patch of that line changes its outcome, so its old failure is listed, never blamed.
        _pkg(
            ops="def mean(xs):\n    if not xs:\n        return 0.0\n    return sum(xs) / (len(xs) - 1)\n",
            tests=TEST_MEAN + "\n\ndef test_mean_of_nothing():\n    assert mean([]) is None, 'no mean'\n",
        ),
        preexisting=("tests/test_ops.py::test_mean_of_nothing",),
    ),
    "environment_failure_shared_by_unrelated_tests": Shape(
        # The settings the tests read are missing from this environment: every test that reads
        # them fails in the json module, whatever the patch does.
        _pkg(
            tests=SETTINGS + TEST_MEAN + "\n\ndef test_mean_with_settings():\n    assert mean([3, 3]) > 0\n"
            "    assert settings()\n",
            **{
                "tests/test_settings.py": SETTINGS
                + "\n\ndef test_precision():\n    assert settings()['precision'] == 2\n"
                "\n\ndef test_rounding():\n    assert settings()['rounding'] == 'half-even'\n",
            },
        ),
        environmental=("tests/test_ops.py::test_mean_with_settings",),
        preexisting=(
            "tests/test_ops.py::test_mean_with_settings",
            "tests/test_settings.py::test_precision",
            "tests/test_settings.py::test_rounding",
        ),
    ),
    "module_no_test_imports": Shape(
        _pkg(ops="def mean(xs):\n    return sum(xs) / len(xs)\n", **{"calc/unused.py": OPS}),
        changed="calc/unused.py",
        tests=(),
        unverified=True,
    ),
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("coverage-cache")


async def _verify(repo: Path, patch: str, cache_dir: Path):
    return await verify_for_text(repo, patch, TEXT, cache_dir)


@pytest.mark.parametrize("name", SHAPES)
async def test_the_tests_executing_the_changed_code_decide_the_verdict(
    name: str, tmp_path: Path, cache_dir: Path
) -> None:
    """Our contract (docs/verification.md): the correct fix is `passed` with the tests that executed
    the changed line and failed before as evidence; the wrong fix is `failed` with those tests
    `test.still_failing`, named with their message in the coder's feedback; an old failure that
    executes none of the changed code is listed, unblamed; a change no test executes is
    `unverified`, saying so."""
    shape = SHAPES[name]
    repo = make_repo(tmp_path / name, shape.files)
    source, (bug, fixed, broken) = shape.files[shape.changed], shape.fix
    right = await _verify(repo, make_patch(repo, {shape.changed: source.replace(bug, fixed)}), cache_dir)
    wrong = await _verify(repo, make_patch(repo, {shape.changed: source.replace(bug, broken)}), cache_dir)
    if shape.unverified:
        for report in (right, wrong):
            assert report.verdict == "unverified"
            assert {f.failure_class for f in report.errors} == {FailureClass.TEST_NO_REPRODUCTION}
            assert report.summary.startswith(
                f"unverified: no test executes the code the patch changes ({shape.changed})"
            )
        return
    assert right.verdict == "passed", right.failures
    assert right.evidence == list(shape.tests)
    assert right.covering == sorted([*shape.tests, *shape.environmental])
    assert right.preexisting == list(shape.preexisting)
    assert wrong.verdict == "failed"
    assert wrong.still_failing == list(shape.tests) and wrong.regressions == []
    assert wrong.preexisting == list(shape.preexisting)
    feedback = revision_feedback(wrong)
    assert all(f"[test.still_failing] {test}" in feedback for test in shape.tests)
    assert shape.message in feedback
    for report in (right, wrong):
        unblamed = [c.summary for c in report.checks if c.name == "environment_failures"]
        assert bool(unblamed) == bool(shape.environmental)
        assert all("json/decoder.py" in s and "JSONDecodeError" in s for s in unblamed), unblamed
    coverage = [c for c in wrong.checks if c.name == "coverage"]
    assert coverage and coverage[0].summary.startswith("the starting tree's coverage")


async def test_a_change_only_environment_failing_tests_execute_is_unverified_saying_so(
    tmp_path: Path, cache_dir: Path
) -> None:
    """Our choice (docs/verification.md): a test that fails before and after from the environment
    shows nothing either way, so a patch whose only tests are such is `unverified`, naming them and
    the crash, not `passed` on their say."""
    files = _pkg(
        tests=SETTINGS + "from calc.ops import mean\n\n\ndef test_mean_with_settings():\n"
        "    assert mean([3, 3]) > 0\n    assert settings()\n",
        **{"tests/test_settings.py": SETTINGS + "\n\ndef test_precision():\n    assert settings()\n"},
    )
    repo = make_repo(tmp_path / "repo", files)
    report = await _verify(
        repo, make_patch(repo, {"calc/ops.py": OPS.replace("len(xs) - 1)", "len(xs))")}), cache_dir
    )
    assert report.verdict == "unverified", report.failures
    assert report.preexisting == [
        "tests/test_ops.py::test_mean_with_settings",
        "tests/test_settings.py::test_precision",
    ]
    assert report.summary.startswith(
        "unverified: 1 test(s) that execute the changed code fail here before and after the patch from the "
        "environment (json/decoder.py:"
    ), report.summary


async def test_an_old_failure_beside_the_tests_the_patch_adds_is_not_blamed(
    tmp_path: Path, cache_dir: Path
) -> None:
    """A test the patch leaves alone in a test file it edits, executing none of the changed code
    and failing exactly as before (here a test written for a format long gone), is listed,
    unblamed; when the edit makes it fail differently, it is the patch's."""
    legacy = "\n\nFORMAT = 'b'\n\n\ndef test_legacy_format():\n    assert 'a' == FORMAT, 'broken for years'\n"
    repo = make_repo(tmp_path / "repo", _pkg(tests=TEST_MEAN + legacy))
    fix = OPS.replace("len(xs) - 1)", "len(xs))")
    added = "\n\ndef test_mean_of_two():\n    assert mean([1, 3]) == 2.0\n"
    report = await _verify(
        repo,
        make_patch(repo, {"calc/ops.py": fix, "tests/test_ops.py": TEST_MEAN + legacy + added}),
        cache_dir,
    )
    assert report.verdict == "passed", report.failures
    assert report.preexisting == ["tests/test_ops.py::test_legacy_format"]
    assert "tests/test_ops.py::test_mean" in report.evidence
    moved = legacy.replace("FORMAT = 'b'", "FORMAT = 'c'")
    report = await _verify(
        repo,
        make_patch(repo, {"calc/ops.py": fix, "tests/test_ops.py": TEST_MEAN + moved + added}),
        cache_dir,
    )
    assert report.verdict == "failed" and report.still_failing == ["tests/test_ops.py::test_legacy_format"]


async def test_test_modules_the_repository_names_in_python_files_are_its_tests(
    tmp_path: Path, cache_dir: Path
) -> None:
    """A repository whose pytest configuration collects `check_*.py` (pytest's own collects
    `testing/*/*.py`): a test the patch adds there is the task's like one in `test_*.py` — with
    the fix it is evidence; without the fix (the test alone) it is still failing, by name."""
    check = "from calc.ops import mean\n\n\ndef test_mean():\n    assert mean([1, 2]) > 0\n"
    added = "\n\ndef test_mean_of_two():\n    assert mean([1, 3]) == 2.0, 'mean of 1, 3'\n"
    files = {
        "pytest.ini": FAST_PYTEST + "python_files = check_*.py\n",
        "calc/__init__.py": "",
        "calc/ops.py": OPS,
        "checks/check_ops.py": check,
    }
    repo = make_repo(tmp_path / "repo", files)
    fix = OPS.replace("len(xs) - 1)", "len(xs))")
    both = await _verify(
        repo, make_patch(repo, {"calc/ops.py": fix, "checks/check_ops.py": check + added}), cache_dir
    )
    assert both.verdict == "passed", both.failures
    assert both.evidence == ["checks/check_ops.py::test_mean_of_two"], [c.summary for c in both.checks]
    alone = await _verify(repo, make_patch(repo, {"checks/check_ops.py": check + added}), cache_dir)
    assert alone.verdict == "failed"
    assert alone.still_failing == ["checks/check_ops.py::test_mean_of_two"]
    assert "mean of 1, 3" in revision_feedback(alone)
