"""Running an issue's examples in a real sandbox: which files' functions ran, what failed, what
ran out of time, and that the checkout is never written."""

import sys
from pathlib import Path

import pytest

from sandbox.backend import BackendChoice
from sandbox.gvisor import probe_runsc
from sandbox.limits import GvisorOptions
from tool_servers.search.examples.run import interpreter_paths, repository_python, trace_examples

pytestmark = pytest.mark.anyio

PACKAGE = {
    "calc/__init__.py": "from calc.printer import show\n",
    "calc/core.py": (
        "def add(a, b):\n    return a + b\n\n\ndef negate(a):\n    return -a\n\n\n"
        "def inverse(a):\n    return 1 / a\n"
    ),
    "calc/printer.py": (
        "from calc import core\n\n\ndef show(a):\n    return f'<{core.add(a, 0)}>'\n\n\n"
        "def explode(a):\n    return core.inverse(a)\n"
    ),
    "calc/unused.py": "def never():\n    return 0\n",
    "calc/optional.py": "import a_dependency_not_installed\n",
    "calc/tests/test_core.py": "from calc.core import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}


def _repo(root: Path) -> tuple[Path, list[str]]:
    for rel, text in PACKAGE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root, sorted(PACKAGE)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(params=["process", pytest.param("gvisor", marks=pytest.mark.gvisor)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[BackendChoice, GvisorOptions | None]:
    if request.param == "process":
        return "process", None
    status = probe_runsc()
    if not status.works:
        pytest.skip(f"runsc does not work here: {status.detail}")
    return "gvisor", GvisorOptions(state_dir=tmp_path / "runsc-state", work_dir=tmp_path / "sandboxes")


async def test_the_files_whose_functions_ran_are_counted_and_the_rest_left_out(
    tmp_path: Path, backend: tuple[BackendChoice, GvisorOptions | None]
) -> None:
    """The evidence `search --run-examples` ranks with: per file, the distinct functions that ran."""
    root, paths = _repo(tmp_path / "repo")
    run = await trace_examples(
        root, paths, ["show(2)"], setup="from calc import *", backend=backend[0], gvisor=backend[1]
    )
    assert run.backend == backend[0] and run.note is None and run.setup_error is None
    assert run.statements == 1 and run.failed == 0 and not run.timed_out
    assert run.files == {"calc/printer.py": 1, "calc/core.py": 1}  # the setup's imports are not traced


async def test_a_failing_statement_is_counted_and_the_next_ones_still_run(
    tmp_path: Path, backend: tuple[BackendChoice, GvisorOptions | None]
) -> None:
    """Our choice: the error an issue reports is often what its example raises; what follows it
    must still run."""
    root, paths = _repo(tmp_path / "repo")
    blocks = [
        "from calc.printer import explode\nexplode(0)\nundefined_name\nfrom calc import optional\n"
        "from calc.core import negate\nnegate(1)"
    ]
    run = await trace_examples(root, paths, blocks, backend=backend[0], gvisor=backend[1])
    assert run.statements == 6 and run.failed == 3
    assert set(run.files) == {"calc/printer.py", "calc/core.py"}
    # Where the error came from, innermost frame first. The undefined name raised in the example's
    # own code, so it has no repository frame; the failed import is the environment's, not a bug's.
    assert [(e.error, [(f.path, f.line, f.function) for f in e.frames]) for e in run.raised] == [
        ("ZeroDivisionError", [("calc/core.py", 10, "inverse"), ("calc/printer.py", 9, "explode")])
    ]


async def test_names_the_example_never_defined_come_from_the_repository_packages(
    tmp_path: Path, backend: tuple[BackendChoice, GvisorOptions | None]
) -> None:
    """Issue writers leave out the import of the very library the issue is about: the example
    still runs, without a setup, and says which names it borrowed."""
    root, paths = _repo(tmp_path / "repo")
    extra = {"tests/__init__.py": "def show(a):\n    return 'the test helper'\n"}  # not the project's
    for rel, text in extra.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    run = await trace_examples(
        root,
        [*paths, *extra],
        ["assert show(3) == '<3>'\nnot_defined_anywhere"],
        backend=backend[0],
        gvisor=backend[1],
    )
    assert run.statements == 2 and run.failed == 1  # the assert held; the unknown name still fails
    assert run.resolved == ["show"]
    assert run.files == {"calc/printer.py": 1, "calc/core.py": 1}  # importing calc is not traced


async def test_borrowed_names_never_shadow_builtins_and_a_src_layout_is_found(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = {
        "src/shadow/__init__.py": "def len(x):\n    raise RuntimeError('shadowed')\n\n\ndef area(w, h):\n    return w * h\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    run = await trace_examples(root, list(files), ["assert len([area(2, 3)]) == 1"], backend="process")
    assert run.failed == 0 and run.resolved == ["area"]
    assert run.files == {"src/shadow/__init__.py": 1}


async def test_names_the_projects_own_doctests_import_are_found_where_they_import_them(
    tmp_path: Path, backend: tuple[BackendChoice, GvisorOptions | None]
) -> None:
    """`x` is in no package's top level, but the project's doctests take it from `calc.abc` more
    often than from anywhere else (`>>> from calc.abc import x`); an alias (`import calc.core as
    cc`) is found the same way, and an import written in ordinary code is no doctest."""
    root, paths = _repo(tmp_path / "repo")
    extra = {
        "calc/abc.py": "x = 2\n",
        "calc/other.py": "x = 'the wrong x'\n",
        "calc/docs.py": (
            'def f():\n    """\n    >>> from calc.abc import x\n    >>> from calc.abc import x, y\n'
            '    >>> from calc.other import x\n    >>> import calc.core as cc\n    """\n'
        ),
        "calc/code.py": "from calc.other import x\nfrom calc.other import x\nimport calc.printer as cc\n",
    }
    for rel, text in extra.items():
        (root / rel).write_text(text)
    run = await trace_examples(
        root,
        [*paths, *extra],
        ["assert show(x) == '<2>'\nassert cc.negate(x) == -2"],
        backend=backend[0],
        gvisor=backend[1],
    )
    assert run.statements == 2 and run.failed == 0
    assert run.resolved == ["show", "x", "cc"]
    assert run.files == {"calc/printer.py": 1, "calc/core.py": 2}


async def test_the_examples_imports_are_not_traced(tmp_path: Path) -> None:
    """Importing a module runs what its body calls; that says the example imported it, not that
    the issue is about it."""
    root, paths = _repo(tmp_path / "repo")
    extra = {"calc/registry.py": "def register():\n    return 1\n\n\nREGISTERED = register()\n"}
    (root / "calc/registry.py").write_text(extra["calc/registry.py"])
    blocks = ["import calc.registry\nfrom calc.core import add\nadd(1, 2)"]
    run = await trace_examples(root, [*paths, *extra], blocks, backend="process")
    assert run.statements == 3 and run.failed == 0
    assert run.files == {"calc/core.py": 1}


async def test_an_example_that_hangs_is_stopped_and_what_ran_before_is_kept(
    tmp_path: Path, backend: tuple[BackendChoice, GvisorOptions | None]
) -> None:
    root, paths = _repo(tmp_path / "repo")
    blocks = [
        "from calc.core import add\nadd(1, 2)",
        "while True:\n    pass",
        "from calc.core import negate\nnegate(1)",
    ]
    run = await trace_examples(root, paths, blocks, timeout_s=1.5, backend=backend[0], gvisor=backend[1])
    assert run.timed_out and run.files == {"calc/core.py": 1}


async def test_the_checkout_is_never_written(
    tmp_path: Path, backend: tuple[BackendChoice, GvisorOptions | None]
) -> None:
    """A search has a read grant: whatever the example does runs on a scratch copy."""
    root, paths = _repo(tmp_path / "repo")
    before = _tree(root)
    blocks = [
        "import os, shutil\nopen('calc/core.py', 'w').write('broken')\nopen('new.txt', 'w').write('x')\n"
        "shutil.rmtree('calc/tests')\nos.makedirs('__pycache__/x')"
    ]
    run = await trace_examples(root, paths, blocks, backend=backend[0], gvisor=backend[1])
    assert run.failed == 0
    assert _tree(root) == before  # no edit, no new file, no deletion, no __pycache__


async def test_only_indexed_files_are_copied_for_the_examples(tmp_path: Path) -> None:
    """Files the index leaves out (secrets, ignored files) are not given to the issue's code."""
    root, paths = _repo(tmp_path / "repo")
    (root / ".env.local").write_text("TOKEN=secret\n")
    blocks = ["import os\nassert not os.path.exists('.env.local')\nassert os.path.exists('calc/core.py')"]
    run = await trace_examples(root, paths, blocks, backend="process")
    assert run.statements == 3 and run.failed == 0


async def test_a_setup_that_raises_is_reported_and_the_examples_still_run(tmp_path: Path) -> None:
    root, paths = _repo(tmp_path / "repo")
    run = await trace_examples(
        root, paths, ["from calc.core import add\nadd(1, 1)"], setup="import nothere", backend="process"
    )
    assert run.setup_error is not None and "nothere" in run.setup_error
    assert run.files == {"calc/core.py": 1}


async def test_no_example_code_means_nothing_runs(tmp_path: Path) -> None:
    root, paths = _repo(tmp_path / "repo")
    run = await trace_examples(root, paths, [], backend="process")
    assert run.backend is None and run.files == {} and run.note and "no example code" in run.note


async def test_an_interpreter_that_cannot_start_is_a_note_not_an_error(tmp_path: Path) -> None:
    root, paths = _repo(tmp_path / "repo")
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'no such interpreter' >&2\nexit 3\n")
    fake.chmod(0o755)
    run = await trace_examples(root, paths, ["print(1)"], python=str(fake), backend="process")
    assert run.files == {} and run.note and "exited with 3" in run.note and "no such interpreter" in run.note


def test_the_repository_virtualenv_is_preferred_and_shown_to_the_sandbox(tmp_path: Path) -> None:
    """The examples run on the project's own interpreter when it has a virtualenv."""
    assert repository_python(tmp_path) == sys.executable
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).resolve().parent}\n")
    (venv / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    python = repository_python(tmp_path)
    assert python == str(venv / "bin" / "python")
    assert venv.resolve() in interpreter_paths(python)
    assert Path(sys.executable).resolve().parent.parent in interpreter_paths(python)


async def test_a_report_forged_by_the_example_is_not_taken_as_evidence(tmp_path: Path) -> None:
    """The example can write to the real stdout; if the tracer never reports after it (killed at the
    limit), the forged line must not become the result, nor crash the search."""
    root, paths = _repo(tmp_path / "repo")
    forged = '@@codeloop-example-trace@@{"statements": "many", "files": {"calc/unused.py": 1}}'
    blocks = [f"import os\nos.write(1, b'\\n' + {forged!r}.encode() + b'\\n')\nos._exit(0)"]
    run = await trace_examples(root, paths, blocks, backend="process")
    assert run.files == {} and run.note and "could not be read" in run.note
