"""The exec server's `run_example` through the real MCP client, in a real sandbox: the code a
task's text shows, run statement by statement in the root, with what each statement did."""

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from sandbox.backend import BackendChoice
from sandbox.gvisor import probe_runsc
from tests.tool_servers.ts_conformance import assert_valid
from tool_servers.exec.server import build_exec_server

pytestmark = pytest.mark.anyio

GVISOR = probe_runsc().works
BACKENDS = [
    pytest.param(
        "gvisor",
        marks=[pytest.mark.gvisor, pytest.mark.skipif(not GVISOR, reason="runsc does not work here")],
    ),
    "process",
]

ISSUE = """\
`ratio` crashes on an empty range:

```python
>>> from frac import ratio, scale
>>> scale(2, 3)
6
>>> ratio(0, 0)
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
ZeroDivisionError: division by zero
```

I expected 0.
"""


@pytest.fixture(autouse=True)
def _no_sandbox_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODELOOP_SANDBOX", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "frac"
    root.mkdir()
    (root / "frac.py").write_text(
        "def ratio(a, b):\n    return a / b\n\n\ndef scale(a, b):\n    return a * b\n"
    )
    return root


async def _run_example(root: Path, backend: BackendChoice, text: str) -> dict[str, Any]:
    with anyio.fail_after(90):
        async with Client(build_exec_server(root, backend=backend)) as session:
            schemas = {t.name: t.output_schema for t in (await session.list_tools()).tools}
            result = await session.call_tool("run_example", {"text": text, "timeout_s": 30})
    assert not result.is_error, result.content
    assert_valid(result.structured_content, schemas["run_example"])
    return result.structured_content


@pytest.mark.parametrize("backend", BACKENDS)
async def test_each_statement_says_what_it_printed_or_raised_and_where(
    project: Path, backend: BackendChoice
) -> None:
    """The session's statements run in order in the root: the import works, the expression prints
    its value beside the output the text shows, and the failing call raises in the repository's
    code the exception the text shows."""
    out = await _run_example(project, backend, ISSUE)
    assert out["ran"] and not out["timed_out"]
    assert out["shown_exceptions"] == ["ZeroDivisionError"]
    statements = {s["source"]: s for s in out["statements"]}
    assert list(statements) == ["from frac import ratio, scale", "scale(2, 3)", "ratio(0, 0)"]
    assert statements["scale(2, 3)"]["output"].strip() == "6"
    assert statements["scale(2, 3)"]["shown_output"] == "6"
    crash = statements["ratio(0, 0)"]
    assert crash["raised"].startswith("ZeroDivisionError: division by zero")
    assert crash["in_repository"] and not crash["import_error"]


async def test_an_exception_outside_the_repository_is_told_apart(project: Path) -> None:
    """A statement that fails in the example's own code (not the project's) is not the project's
    crash; a missing module is an import error."""
    text = "```python\nimport frac\nint('x')\nimport not_installed_anywhere\n```\n"
    out = await _run_example(project, "process", text)
    statements = out["statements"]
    assert [s["source"] for s in statements] == ["import frac", "int('x')", "import not_installed_anywhere"]
    assert statements[1]["raised"].startswith("ValueError") and not statements[1]["in_repository"]
    assert statements[2]["import_error"]


async def test_a_text_without_code_runs_nothing(project: Path) -> None:
    out = await _run_example(project, "process", "The ratio is wrong when both numbers are zero.")
    assert not out["ran"] and out["statements"] == []
    assert out["note"]


async def test_an_expression_is_displayed_as_a_notebook_displays_it(project: Path) -> None:
    """An object drawn for its picture (a plot) fails only when a notebook displays it: the
    rich form its type defines is computed after the repr, and what it raises is the statement's;
    an object answering every attribute is not taken for one with rich forms."""
    (project / "chart.py").write_text(
        "class Chart:\n"
        "    def __repr__(self):\n        return '<Chart>'\n\n"
        "    def _repr_png_(self):\n        return draw()\n\n\n"
        "class SpecError(Exception):\n    pass\n\n\n"
        "def draw():\n    try:\n        None - 1\n    except TypeError as err:\n"
        "        raise SpecError('Scale setup failed') from err\n\n\n"
        "class Anything:\n"
        "    def __repr__(self):\n        return '<Anything>'\n\n"
        "    def __getattr__(self, name):\n        return lambda: 1 / 0\n"
    )
    text = "```python\nfrom chart import Chart, Anything\nChart()\nAnything()\n```\n"
    statements = (await _run_example(project, "process", text))["statements"]
    chart, anything = statements[1], statements[2]
    assert chart["output"].strip() == "<Chart>"
    assert chart["raised"] == "SpecError: Scale setup failed" and chart["in_repository"]
    assert chart["causes"] == ["TypeError"]
    assert anything["raised"] is None and anything["output"].strip() == "<Anything>"


async def test_a_name_the_example_never_imports_is_bound_as_the_repository_imports_it(
    project: Path,
) -> None:
    """`fr.ratio(0, 0)` with no import (issues leave them out): the statement runs again after
    the import the repository's own files use for `fr`, and says which; a name nothing in the
    repository binds stays a NameError."""
    (project / "tests").mkdir()
    (project / "tests" / "test_frac.py").write_text(
        "import frac as fr\n\n\ndef test_scale():\n    assert fr.scale(2, 3) == 6\n"
    )
    (project / "README.md").write_text("```python\n>>> import frac as fr\n>>> fr.scale(1, 1)\n1\n```\n")
    text = "```python\nfr.ratio(0, 0)\nnowhere.ratio(0, 0)\n```\n"
    statements = (await _run_example(project, "process", text))["statements"]
    bound, unbound = statements
    assert bound["bound"] == "import frac as fr"
    assert bound["raised"].startswith("ZeroDivisionError") and bound["in_repository"]
    assert unbound["raised"] == "NameError: name 'nowhere' is not defined" and unbound["bound"] is None
