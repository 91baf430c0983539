"""verify_answer: a read-mode answer's citations must exist in the tree."""

from pathlib import Path

import pytest

from agents.failures import FailureClass
from agents.roles.verifier.verify import verify_answer
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import CALC, TEST_CALC

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "calc", {"calc.py": CALC, "tests/test_calc.py": TEST_CALC})


async def test_an_answer_citing_real_files_lines_and_symbols_passes(repo: Path) -> None:
    """Every cited file, line and symbol exists: the answer is supported."""
    answer = "The bug is in `mul()` at calc.py:5-6; tests/test_calc.py:9 shows it (`test_mul`)."
    report = await verify_answer(workspace=repo, answer=answer)
    assert report.verdict == "passed", report.failures
    assert report.checks[0].name == "answer" and report.checks[0].ok


async def test_an_answer_citing_a_missing_file_is_unsupported(repo: Path) -> None:
    """A cited file that does not exist is `answer.unsupported`, naming the file."""
    report = await verify_answer(workspace=repo, answer="See calc/core.py:3 for `mul()`.")
    assert report.verdict == "failed"
    assert [(f.failure_class, f.path) for f in report.failures] == [
        (FailureClass.ANSWER_UNSUPPORTED, "calc/core.py")
    ]


async def test_an_answer_citing_a_line_past_the_end_or_an_unknown_symbol_is_unsupported(repo: Path) -> None:
    """A line beyond the file's end and a symbol nowhere in the repository are both unsupported."""
    report = await verify_answer(workspace=repo, answer="calc.py:40 defines `multiply_numbers()`.")
    assert report.verdict == "failed"
    messages = sorted(f.message for f in report.failures)
    assert len(messages) == 2
    assert "line 40 of calc.py" in messages[0] and "multiply_numbers" in messages[1]


async def test_an_answer_citing_a_path_outside_the_workspace_is_unsupported(
    repo: Path, tmp_path: Path
) -> None:
    """Citations are confined to the workspace: a path leading out of it is not found there."""
    (tmp_path / "outside.py").write_text("x = 1\n")
    report = await verify_answer(workspace=repo, answer="Look at ../outside.py:1.")
    assert report.verdict == "failed"
    assert {f.failure_class for f in report.failures} == {FailureClass.ANSWER_UNSUPPORTED}


async def test_an_answer_citing_nothing_is_unverified(repo: Path) -> None:
    """Nothing to check is not a pass."""
    report = await verify_answer(workspace=repo, answer="It is probably a typo somewhere.")
    assert report.verdict == "unverified"
