"""Which starting-tree lines make a test the task's, for each kind of edit (the probes)."""

from agents.roles.verifier.changed_code import probe
from agents.roles.verifier.patchset import FileChange, parse_patch

BEFORE = (
    "def mean(xs):\n"  # 1
    "    if not xs:\n"  # 2
    "        return 0.0\n"  # 3
    "    total = sum(xs)\n"  # 4
    "    return total / (len(xs) - 1)\n"  # 5
)
BODY = frozenset(range(2, 6))


def _lines(hunk: str, after: str, before: str = BEFORE) -> frozenset[int]:
    """The probe's lines for the change `hunk` makes to `calc.py`, giving `after`."""
    (change,) = parse_patch("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n" + hunk)
    assert isinstance(change, FileChange)
    return probe(change, before, after).lines


def test_a_replaced_statement_counts_itself_not_its_function() -> None:
    """Reaching the new line means reaching the place of the old one: a test that calls mean()
    and returns at line 3 executes neither."""
    hunk = "@@ -5 +5 @@\n-    return total / (len(xs) - 1)\n+    return total / len(xs)\n"
    assert _lines(hunk, BEFORE.replace("(len(xs) - 1)", "len(xs)")) == {5}


def test_a_statement_replaced_by_a_block_nested_in_its_place_counts_itself() -> None:
    new = "    if len(xs) > 0:\n        return total / len(xs)\n    return 0.0\n"
    hunk = "@@ -5 +5,3 @@\n-    return total / (len(xs) - 1)\n" + "".join(
        f"+{line}\n" for line in new.splitlines()
    )
    assert _lines(hunk, BEFORE.replace("    return total / (len(xs) - 1)\n", new)) == {5}


def test_a_line_inserted_between_statements_counts_its_whole_function() -> None:
    hunk = "@@ -4,0 +5 @@\n+    xs = list(xs)\n"
    assert _lines(hunk, BEFORE.replace("    return total", "    xs = list(xs)\n    return total")) == BODY


def test_a_replacement_dedented_out_of_the_removed_block_counts_its_whole_function() -> None:
    """Line 3 runs only for an empty list; its replacement at the function's level runs for all."""
    hunk = "@@ -3 +3,2 @@\n-        return 0.0\n+        pass\n+    xs = xs or [0.0]\n"
    after = BEFORE.replace("        return 0.0\n", "        pass\n    xs = xs or [0.0]\n")
    assert _lines(hunk, after) == BODY


def test_a_replaced_line_no_tracer_reports_counts_its_whole_function() -> None:
    """A docstring compiles to nothing: no test is ever seen executing it."""
    before = 'def mean(xs):\n    """Mean."""\n    return sum(xs) / len(xs)\n'
    hunk = '@@ -2 +2 @@\n-    """Mean."""\n+    """The arithmetic mean."""\n'
    assert _lines(hunk, before.replace("Mean.", "The arithmetic mean."), before) == {2, 3}


def test_a_replaced_elif_counts_its_whole_function() -> None:
    """A test taking the `if` branch never executes the `elif` line, but runs the statement that
    replaces it at the function's level."""
    before = "def sign(x):\n    if x > 0:\n        s = 1\n    elif x < 0:\n        s = -1\n    return s\n"
    hunk = "@@ -4,2 +4 @@\n-    elif x < 0:\n-        s = -1\n+    s = s if x >= 0 else -1\n"
    after = before.replace("    elif x < 0:\n        s = -1\n", "    s = s if x >= 0 else -1\n")
    assert _lines(hunk, after, before) == {2, 3, 4, 5, 6}


def _probe(hunk: str, after: str, before: str = BEFORE):
    (change,) = parse_patch("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n" + hunk)
    assert isinstance(change, FileChange)
    return probe(change, before, after)


def test_an_import_added_for_a_changed_function_counts_only_that_function() -> None:
    """`import math` at the top serves the changed body: a test that merely imports the module
    (every test, in a test runner's own suite) is not the task's, and the import alone is no
    reason to run the whole suite."""
    after = "import math\n" + BEFORE.replace("(len(xs) - 1)", "math.fsum([len(xs)])")
    hunk = (
        "@@ -1 +1,2 @@\n+import math\n def mean(xs):\n"
        "@@ -5 +6 @@\n-    return total / (len(xs) - 1)\n+    return total / math.fsum([len(xs)])\n"
    )
    found = _probe(hunk, after)
    assert found.lines == {5} and not found.module_wide and not found.at_import


def test_an_import_that_is_all_the_patch_adds_counts_the_whole_module() -> None:
    """An import alone may change behaviour by what importing does: every test executing the module
    counts, and the suite runs with the patch."""
    found = _probe("@@ -1 +1,3 @@\n+import math\n+\n def mean(xs):\n", "import math\n\n" + BEFORE)
    assert found.module_wide and found.at_import and found.lines == frozenset(range(1, 7))
