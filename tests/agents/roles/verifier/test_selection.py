"""Test selection: which tests run first for a patch."""

from pathlib import Path

from agents.roles.verifier.patchset import parse_patch
from agents.roles.verifier.selection import edited_tests, select_tests
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import CALC, CALC_FIXED, TEST_CALC, make_patch


def test_targets_changed_tests_and_tests_of_changed_modules_are_targeted(tmp_path: Path) -> None:
    """Plan targets first, then tests the patch adds, then tests related by name or import;
    unrelated test files are left to the whole suite."""
    repo = make_repo(
        tmp_path / "r",
        {
            "pkg/__init__.py": "",
            "pkg/calc.py": CALC,
            "pkg/other.py": "X = 1\n",
            "tests/test_calc.py": TEST_CALC.replace("from calc", "from pkg.calc"),
            "tests/test_uses_calc.py": "from pkg import calc\n\n\ndef test_it():\n    assert calc.add(1, 1) == 2\n",
            "tests/test_other.py": "from pkg.other import X\n\n\ndef test_x():\n    assert X == 1\n",
            "tests/test_target.py": "def test_t():\n    pass\n",
        },
    )
    new = "from pkg.calc import mul\n\n\ndef test_zero():\n    assert mul(0, 3) == 0\n"
    changes = parse_patch(make_patch(repo, {"pkg/calc.py": CALC_FIXED, "tests/test_new.py": new}))
    # The selection is computed on the patched tree.
    (repo / "tests" / "test_new.py").write_text(new)
    selection = select_tests(repo, changes, ["tests/test_target.py::test_t", "tests/test_gone.py::test_g"])
    assert selection.files == [
        "tests/test_target.py",
        "tests/test_new.py",
        "tests/test_calc.py",
        "tests/test_uses_calc.py",
    ]
    assert selection.missing_targets == ["tests/test_gone.py::test_g"]
    assert selection.is_task_test("tests/test_target.py::test_t")
    assert selection.is_task_test("tests/test_new.py::test_zero")
    assert not selection.is_task_test("tests/test_calc.py::test_add")


def test_a_selection_of_every_test_module_covers_the_suite_unless_pytest_collects_more(
    tmp_path: Path,
) -> None:
    """Our choice: the whole suite is not run a second time when the targeted files are all of it;
    a pytest option that may collect other files keeps the suite run."""
    files = {"calc.py": CALC, "tests/test_calc.py": TEST_CALC}
    repo = make_repo(tmp_path / "small", files)
    changes = parse_patch(make_patch(repo, {"calc.py": CALC_FIXED}))
    assert select_tests(repo, changes, []).covers_suite
    doctests = make_repo(
        tmp_path / "doctests", files | {"pytest.ini": "[pytest]\naddopts = --doctest-modules\n"}
    )
    assert not select_tests(
        doctests, parse_patch(make_patch(doctests, {"calc.py": CALC_FIXED})), []
    ).covers_suite


def test_only_the_tests_a_patch_adds_or_edits_are_its_own() -> None:
    """Decorators and methods count as part of a test; an untouched neighbour is not edited."""
    before = (
        "import pytest\n\n\ndef test_old():\n    assert 1\n\n\n"
        "class TestBox:\n    def test_kept(self):\n        assert 1\n\n    def test_changed(self):\n        assert 1\n"
    )
    after = (
        before.replace("def test_old", "@pytest.mark.slow\ndef test_old").replace(
            "    def test_changed(self):\n        assert 1\n",
            "    def test_changed(self):\n        assert 2\n",
        )
        + "\n\ndef test_new():\n    assert 1\n"
    )
    assert edited_tests(before, after) == {"test_old", "TestBox::test_changed", "test_new"}
    assert edited_tests("", "def test_a():\n    pass\n") == {"test_a"}
    assert edited_tests(before, "def test_a(:\n") is None


def test_a_failure_in_an_edited_file_is_the_patchs_only_for_the_tests_it_touched(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    (repo / "tests").mkdir(parents=True)
    before = "def test_old():\n    assert 0\n"
    after = before + "\n\ndef test_new():\n    assert 1\n"
    (repo / "tests" / "test_x.py").write_text(after)
    patch = (
        "diff --git a/tests/test_x.py b/tests/test_x.py\n--- a/tests/test_x.py\n+++ b/tests/test_x.py\n"
        "@@ -1,2 +1,5 @@\n def test_old():\n     assert 0\n+\n+\n+def test_new():\n+    assert 1\n"
    )
    changes = parse_patch(patch)
    selection = select_tests(repo, changes, [], before={"tests/test_x.py": before})
    assert selection.is_task_test("tests/test_x.py::test_new")
    assert selection.is_task_test("tests/test_x.py::test_new[1]")
    assert not selection.is_task_test("tests/test_x.py::test_old")
    # Without the starting text nothing can be told apart: the whole file is the patch's.
    assert select_tests(repo, changes, []).is_task_test("tests/test_x.py::test_old")
