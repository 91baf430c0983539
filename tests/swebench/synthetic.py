"""A small repository made in the test, with SWE-bench instances of it and a spec for it
(`--specs`): the harness end to end without a foreign repository.

`calc` has a bug in `add`; instance `synthetic__calc-1` fixes it (FAIL_TO_PASS `test_add`),
`synthetic__calc-2` adds a feature whose test also connects to an outside address (TEST-NET-1,
never routed), which can only fail in the sandbox: a test this environment cannot run.
"""

import json
from pathlib import Path

from codeloop.testing import make_repo
from tests.support.repos import head_commit

REPO = "synthetic/calc"
VERSION = "1.0"


def _diff(text: str) -> str:
    """A diff written with `~` for its blank context lines (a lone space, which editors strip)."""
    return "\n".join(" " if line == "~" else line for line in text.split("\n"))


BASE_FILES = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "calc"\nversion = "1.0"\n\n[tool.setuptools]\npackages = ["calc"]\n'
    ),
    "calc/__init__.py": "from calc.core import add, mul\n",
    "calc/core.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/test_core.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n",
}

GOLD_1 = _diff("""diff --git a/calc/core.py b/calc/core.py
--- a/calc/core.py
+++ b/calc/core.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
~
~
 def mul(a, b):
""")

WRONG_1 = _diff("""diff --git a/calc/core.py b/calc/core.py
--- a/calc/core.py
+++ b/calc/core.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a * b
~
~
 def mul(a, b):
""")

NOT_APPLYING_1 = _diff("""diff --git a/calc/core.py b/calc/core.py
--- a/calc/core.py
+++ b/calc/core.py
@@ -1,5 +1,5 @@
 def add(x, y):
-    return x - y
+    return x + y
~
~
 def mul(x, y):
""")

TEST_1 = _diff("""diff --git a/tests/test_core.py b/tests/test_core.py
--- a/tests/test_core.py
+++ b/tests/test_core.py
@@ -1,5 +1,9 @@
-from calc import mul
+from calc import add, mul
~
~
 def test_mul():
     assert mul(3, 4) == 12
+
+
+def test_add():
+    assert add(2, 3) == 5
""")

GOLD_2 = _diff("""diff --git a/calc/core.py b/calc/core.py
--- a/calc/core.py
+++ b/calc/core.py
@@ -4,3 +4,7 @@ def add(a, b):
~
 def mul(a, b):
     return a * b
+
+
+def neg(a):
+    return -a
""")

TEST_2 = _diff("""diff --git a/tests/test_neg.py b/tests/test_neg.py
new file mode 100644
--- /dev/null
+++ b/tests/test_neg.py
@@ -0,0 +1,12 @@
+import socket
+
+from calc.core import neg
+
+
+def test_neg():
+    assert neg(2) == -2
+
+
+def test_neg_over_network():
+    socket.create_connection(("192.0.2.1", 80), timeout=5).close()
+    assert neg(0) == 0
""")


def base_repo(root: Path) -> str:
    """A git repository of `calc` at `root`; returns its base commit."""
    return head_commit(make_repo(root, BASE_FILES))


def instances(base: str) -> list[dict]:
    """The two instances, in SWE-bench's published form (test lists as JSON strings)."""
    common = {"repo": REPO, "base_commit": base, "environment_setup_commit": base, "version": VERSION}
    return [
        {
            **common,
            "instance_id": "synthetic__calc-1",
            "patch": GOLD_1,
            "test_patch": TEST_1,
            "problem_statement": "calc.add(2, 3) returns -1; it must return 5.",
            "FAIL_TO_PASS": json.dumps(["tests/test_core.py::test_add"]),
            "PASS_TO_PASS": json.dumps(["tests/test_core.py::test_mul"]),
        },
        {
            **common,
            "instance_id": "synthetic__calc-2",
            "patch": GOLD_2,
            "test_patch": TEST_2,
            "problem_statement": "Add calc.core.neg(a) returning -a.",
            "FAIL_TO_PASS": json.dumps(
                ["tests/test_neg.py::test_neg", "tests/test_neg.py::test_neg_over_network"]
            ),
            "PASS_TO_PASS": json.dumps([]),
        },
    ]


def specs() -> dict:
    """The `--specs` file's content: Python 3.11, pytest from the index, an editable install."""
    return {
        REPO: {
            VERSION: {
                "python": "3.11",
                "packages": "pytest",
                "install": "python -m pip install -e .",
                "test_cmd": "pytest -rA",
                "log_parser": "pytest-dev/pytest",
            }
        }
    }


def write_inputs(tmp: Path) -> dict[str, Path]:
    """The repository (under `repos/calc`), the instances file and the specs file."""
    base = base_repo(tmp / "repos" / "calc")
    paths = {"repos": tmp / "repos", "instances": tmp / "instances.jsonl", "specs": tmp / "specs.json"}
    paths["instances"].write_text("".join(json.dumps(i) + "\n" for i in instances(base)))
    paths["specs"].write_text(json.dumps(specs()))
    return paths
