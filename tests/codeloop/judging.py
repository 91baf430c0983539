"""A repository made in the test and three patches for one task, for judging patches from outside
(`codeloop verify`, the tasks server's `verify_patch`): a correct one, a wrong one, an untested one.

`mean` divides by one less than the count and tests/test_ops.py::test_mean shows it; `top` is
right and tested; `scale` is tested by nothing.
"""

import subprocess
from pathlib import Path

from codeloop.testing import make_repo

FAST_PYTEST = "[pytest]\naddopts = -p no:hypothesispytest -p no:anyio\n"
OPS = (
    "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n\n\n"
    "def top(xs):\n    return max(xs)\n\n\n"
    "def scale(xs, k):\n    return [x * k for x in xs]\n"
)
TEST_OPS = """\
from ops import mean, top


def test_mean():
    assert mean([1, 2, 3]) == 2, "mean of 1, 2, 3"


def test_top():
    assert top([1, 5, 2]) == 5
"""
TASK = "mean() is wrong: mean([1, 2, 3]) should be 2."
MEAN_TEST = "tests/test_ops.py::test_mean"
TOP_TEST = "tests/test_ops.py::test_top"


def ops_repo(root: Path) -> Path:
    return make_repo(root, {"ops.py": OPS, "pytest.ini": FAST_PYTEST, "tests/test_ops.py": TEST_OPS})


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def diff_of(root: Path, new_ops: str) -> str:
    """The `git diff` turning ops.py into `new_ops`; the checkout is left as it was."""
    (root / "ops.py").write_text(new_ops)
    patch = _git(root, "diff")
    _git(root, "checkout", "--", "ops.py")
    return patch


def patches(root: Path) -> dict[str, str]:
    """`correct` fixes mean; `wrong` fixes mean and breaks top (test_top regresses); `untested`
    changes only `scale`, which no test executes."""
    fixed = OPS.replace("len(xs) - 1", "len(xs)")
    return {
        "correct": diff_of(root, fixed),
        "wrong": diff_of(root, fixed.replace("return max(xs)", "return min(xs)")),
        "untested": diff_of(root, OPS.replace("[x * k for x in xs]", "[k * x for x in xs]")),
    }
