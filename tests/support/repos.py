"""The repositories the tests start from, made with `codeloop.testing.make_repo`."""

import subprocess
from pathlib import Path

from codeloop.testing import make_repo

# A calculator with a bug (`add` subtracts) and the tests that catch it: the task of most
# end-to-end tests.
CALC = {
    "calc/__init__.py": '"""Tiny arithmetic."""\n\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
    "calc/stats.py": '"""Averages over the arithmetic."""\n\nfrom calc import add\n\n\ndef mean(values):\n'
    "    total = 0\n    for v in values:\n        total = add(total, v)\n    return total / len(values)\n",
    "tests/test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n",
    "tests/test_stats.py": "from calc.stats import mean\n\n\ndef test_mean_of_one():\n    assert mean([4]) == 4\n",
    "README.md": "# calc\n\nSmall arithmetic helpers.\n",
}


def dirty_repo(root: Path) -> Path:
    """A small git repository with a commit, then uncommitted, untracked and ignored changes."""
    make_repo(
        root,
        {
            "src/app.py": "def add(a, b):\n    return a - b\n",
            "README.md": "# demo\n",
            "gone.txt": "deleted in the working tree\n",
            ".gitignore": "*.log\nbuild/\n",
        },
        branch="main",
    )
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b  # fixed, not committed\n")
    (root / "notes.txt").write_text("untracked, not ignored\n")
    (root / "debug.log").write_text("ignored\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\0ignored")
    (root / "gone.txt").unlink()
    return root


def head_commit(root: Path) -> str:
    """The commit `root`'s HEAD names."""
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()
