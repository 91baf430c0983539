"""The diff review: what reading a patch alone finds, each finding with a class and a location."""

from pathlib import Path

import pytest

from agents.failures import FailureClass
from agents.roles.verifier.diff_review import ReviewLimits, review_patch
from agents.roles.verifier.patchset import MalformedPatch, parse_patch
from agents.roles.verifier.secrets import find_secret
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import CALC, CALC_FIXED, TEST_CALC, make_patch


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "calc",
        {
            "calc.py": CALC,
            "tests/test_calc.py": TEST_CALC,
            "util.py": "X = 1\n",
            ".github/workflows/ci.yml": "on: push\n",
        },
    )


def _review(
    repo: Path, changes: dict[str, str | None], **options
) -> list[tuple[str, str | None, int | None, str]]:
    args = {"plan_files": ["calc.py"], "mode": "execute"} | options
    findings = review_patch(parse_patch(make_patch(repo, changes)), **args)
    return [(f.failure_class, f.path, f.line, f.severity) for f in findings]


def test_a_clean_fix_in_the_plan_has_no_findings(repo: Path) -> None:
    """Our choice: a plain source fix inside the plan's files is not worth a word."""
    assert _review(repo, {"calc.py": CALC_FIXED}) == []


def test_any_change_in_read_mode_is_out_of_scope(repo: Path) -> None:
    """Read mode allows no changes at all."""
    found = _review(repo, {"calc.py": CALC_FIXED}, mode="read")
    assert (FailureClass.PATCH_OUT_OF_SCOPE, "calc.py", None, "error") in found


def test_a_file_outside_the_plan_and_a_deleted_source_file_are_warnings(repo: Path) -> None:
    """The plan says where to look, not a fence: both are reported, neither fails the patch."""
    found = _review(repo, {"util.py": None})
    assert (FailureClass.PATCH_OUT_OF_SCOPE, "util.py", None, "warning") in found
    assert (FailureClass.PATCH_DELETED_FILE, "util.py", None, "warning") in found


def test_ci_configuration_is_a_protected_path(repo: Path) -> None:
    """Changing CI workflows is refused as `patch.protected_path`."""
    found = _review(repo, {".github/workflows/ci.yml": "on: [push, pull_request]\n"})
    assert (FailureClass.PATCH_PROTECTED_PATH, ".github/workflows/ci.yml", None, "error") in found


def test_binary_and_generated_files_are_flagged(repo: Path) -> None:
    """A binary blob and bytecode in a patch are each named with their path."""
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    patch = make_patch(repo, {"__pycache__/calc.cpython-311.pyc": "compiled"})  # logo.png too (git add -A)
    found = {
        (f.failure_class, f.path) for f in review_patch(parse_patch(patch), plan_files=[], mode="execute")
    }
    assert (FailureClass.PATCH_GENERATED, "__pycache__/calc.cpython-311.pyc") in found
    assert (FailureClass.PATCH_BINARY, "logo.png") in found


def test_removing_assertions_weakens_a_test(repo: Path) -> None:
    """Fewer assertions after the patch than before is `test.weakened`, at the first removed one."""
    weaker = TEST_CALC.replace("    assert mul(3, 4) == 12\n", "    mul(3, 4)\n")
    found = _review(repo, {"tests/test_calc.py": weaker})
    assert found == [(FailureClass.TEST_WEAKENED, "tests/test_calc.py", 9, "error")]


def test_renaming_a_test_keeps_it_and_deleting_one_weakens(repo: Path) -> None:
    """A test whose `def` line is replaced by another name, its body kept, is renamed, not removed
    (SWE-bench's flask-4992 test patch does this); a test deleted outright is `test.weakened`."""
    renamed = TEST_CALC.replace("def test_mul():", "def test_mul_of_ints():")
    assert _review(repo, {"tests/test_calc.py": renamed}) == []
    deleted = TEST_CALC.replace("\n\ndef test_mul():\n    assert mul(3, 4) == 12\n", "\n")
    assert [f[0] for f in _review(repo, {"tests/test_calc.py": deleted})][:1] == [FailureClass.TEST_WEAKENED]


def test_a_test_rewritten_where_it_stood_is_shown_but_not_refused(repo: Path) -> None:
    """A test replaced in place by a test of another name (the behaviour it checked changed, as in
    SWE-bench's flask-4045 test patch) is a warning naming both; its assertions still count, so a
    rewrite that asserts less is refused."""
    rewritten = TEST_CALC.replace(
        "def test_mul():\n    assert mul(3, 4) == 12\n",
        "def test_mul_refuses_text():\n    assert mul(3, 0) == 0\n",
    )
    found = _review(repo, {"tests/test_calc.py": rewritten})
    assert found == [(FailureClass.TEST_WEAKENED, "tests/test_calc.py", 8, "warning")]
    weaker = TEST_CALC.replace(
        "def test_mul():\n    assert mul(3, 4) == 12\n", "def test_mul_runs():\n    mul(3, 4)\n"
    )
    assert [(f[0], f[3]) for f in _review(repo, {"tests/test_calc.py": weaker})] == [
        (FailureClass.TEST_WEAKENED, "warning"),
        (FailureClass.TEST_WEAKENED, "error"),
    ]


def test_a_patch_over_the_size_caps_is_too_large(repo: Path) -> None:
    """Size caps bound what a reviewer is asked to read."""
    big = CALC_FIXED + "".join(f"V{i} = {i}\n" for i in range(50))
    found = _review(repo, {"calc.py": big}, limits=ReviewLimits(max_changed_lines=20))
    assert (FailureClass.PATCH_TOO_LARGE, None, None, "error") in found


def test_a_text_that_is_not_a_diff_is_malformed() -> None:
    """The patch must be a unified diff."""
    with pytest.raises(MalformedPatch):
        parse_patch("please apply my fix to calc.py\n")


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ('API_TOKEN = "q8Zr4LmV2pXa9KwT7nBc3YdE6fHj"', True),
        ("-----BEGIN RSA PRIVATE KEY-----", True),
        ('url = "postgres://admin:s3cr3tpw@db:5432/app"', True),
        ('password = "changeme"', False),
        ('digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"', False),
        ('token = os.environ["TOKEN"]', False),
    ],
)
def test_secrets_are_key_formats_or_random_values_given_secret_names(line: str, found: bool) -> None:
    """As secret scanners do: a credential format, or high entropy assigned to a secret-sounding name;
    a hash under another name or a placeholder is not a secret."""
    assert (find_secret(line) is not None) is found


def test_test_configuration_that_deselects_tests_weakens_them(tmp_path: Path) -> None:
    """Leaving the failing test out of the run through pytest's options is `test.weakened` too."""
    repo = make_repo(tmp_path / "cfg", {"calc.py": CALC, "pytest.ini": "[pytest]\n"})
    found = _review(
        repo, {"pytest.ini": "[pytest]\naddopts = --deselect tests/test_calc.py::test_mul\n"}, plan_files=[]
    )
    assert found == [(FailureClass.TEST_WEAKENED, "pytest.ini", 2, "error")]
