"""The exec server's tests run in the project's environment, through the real MCP client, and
say honestly why a suite could not run."""

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult
from pydantic import JsonValue

from sandbox.backend import BackendChoice
from sandbox.environments import EnvironmentSettings
from tests.sandbox.environments.conftest import needs_gvisor, write
from tests.support.releases import FLASK, project
from tool_servers.exec.server import build_exec_server
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions

pytestmark = pytest.mark.anyio
GRANT = ServerOptions(scopes=frozenset({Scope.READ, Scope.EXECUTE}))


async def _call(
    root: Path, settings: EnvironmentSettings, tool: str, args: dict[str, JsonValue], backend: BackendChoice
) -> CallToolResult:
    server = build_exec_server(root, GRANT, backend=backend, environment=settings)
    with anyio.fail_after(900):
        async with Client(server) as session:
            return await session.call_tool(tool, args)


def _flask_checkout(target: Path) -> Path:
    """Flask 2.2.5 from its released sdist (tests/support/releases.py), a git repository whose one
    commit carries the release's date."""
    return project(FLASK, target)


@pytest.mark.slow
@needs_gvisor
async def test_flasks_suite_runs_in_its_environment_and_the_second_use_pays_no_build(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    """The issue's case: Flask (src/ layout, tests needing Flask, Werkzeug, Jinja2, pytest) gets an
    environment from its own files, and run_tests in gVisor reports the suite's real counts. Its
    loose requirements resolve as of its dependency files' last commit, the release's date
    (today's Werkzeug 3 no longer has what this Flask imports)."""
    settings = settings.model_copy(update={"index_date": "git"})
    first_tree = _flask_checkout(tmp_path / "first")
    first = (await _call(first_tree, settings, "run_tests", {"timeout_s": 900}, "gvisor")).structured_content
    assert first["setup_error"] is None, first["output_tail"]
    assert first["passed"] >= 200 and first["backend"] == "gvisor", first["output_tail"]
    environment = first["environment"]
    assert environment["kind"] == "requirements" and "requirements/tests.txt" in environment["source"]

    second_tree = _flask_checkout(tmp_path / "second")
    second = (
        await _call(second_tree, settings, "run_tests", {"timeout_s": 900}, "gvisor")
    ).structured_content
    assert second["environment"]["key"] == environment["key"]
    assert second["environment"]["built"] is False
    assert (second["passed"], second["failed"]) == (first["passed"], first["failed"])


@pytest.mark.slow
async def test_an_environment_that_cannot_be_built_is_env_setup_for_tests_and_commands(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    project = write(
        tmp_path,
        {"requirements.txt": "codeloop-no-such-package-7d1e0b\n", "test_a.py": "def test_a(): pass\n"},
    )
    server = build_exec_server(project, GRANT, backend="process", environment=settings)
    with anyio.fail_after(300):
        async with Client(server) as session:
            tests = (await session.call_tool("run_tests", {})).structured_content
            command = await session.call_tool("run_command", {"argv": ["python", "-c", "print(1)"]})
    problem = tests["setup_error"]
    assert problem["failure_class"] == "env.setup"
    assert (problem["step"], problem["missing"]) == (
        "uv pip install -r requirements.txt",
        "codeloop-no-such-package-7d1e0b",
    )
    assert tests["report_found"] is False and tests["passed"] == 0
    assert command.is_error and "env.setup" in command.content[0].text  # pyright: ignore[reportAttributeAccessIssue] - a tool server's error result is text content


async def test_a_missing_module_is_env_setup_and_a_broken_module_a_collection_error(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    """Never "no tests were collected" for a suite that cannot import: the module and the file."""
    project = write(
        tmp_path,
        {
            "tests/test_needs_dep.py": "import codeloop_absent_dependency\n\ndef test_a():\n    pass\n",
            "tests/test_broken_code.py": "from mypkg import broken\n\ndef test_b():\n    pass\n",
            "mypkg/__init__.py": "",
            "mypkg/broken.py": "def oops(:\n",
        },
    )
    run = (await _call(project, settings, "run_tests", {}, "process")).structured_content
    classes = {f["file"]: (f["failure_class"]) for f in run["failures"]}
    assert classes == {
        "tests/test_needs_dep.py": "env.setup",
        "tests/test_broken_code.py": "test.collection_error",
    }
    problem = run["setup_error"]
    assert problem["file"] in classes and problem["failure_class"] == classes[problem["file"]]


async def test_a_name_an_installed_release_does_not_define_says_so_and_how_to_pin_it(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    """A project whose loose requirements resolved to a release that removed a name (Flask's code
    importing a name Werkzeug 3 no longer has): not "the environment lacks it" — the installed
    package lacks the name, the project was written for another release, pin or bound it."""
    project = write(
        tmp_path,
        {"tests/test_old_api.py": "from pytest import codeloop_removed_name\n\ndef test_a():\n    pass\n"},
    )
    run = (await _call(project, settings, "run_tests", {}, "process")).structured_content
    problem = run["setup_error"]
    assert problem["failure_class"] == "env.setup" and problem["file"] == "tests/test_old_api.py"
    message = problem["message"]
    assert "cannot import 'codeloop_removed_name' from 'pytest'" in message
    assert "written for another release of pytest" in message and "[environment] install" in message
    assert "the environment lacks it" not in message


async def test_a_conftest_that_cannot_import_names_the_module_and_the_file(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    project = write(
        tmp_path,
        {
            "tests/conftest.py": "import codeloop_absent_werkzeug\n",
            "tests/test_a.py": "def test_a():\n    pass\n",
        },
    )
    run = (await _call(project, settings, "run_tests", {}, "process")).structured_content
    # pytest stops at the conftest, before any test: there is no report to read.
    assert (run["report_found"], run["passed"], run["failed"]) == (False, 0, 0), run
    problem = run["setup_error"]
    assert problem is not None
    assert (problem["failure_class"], problem["module"], problem["file"]) == (
        "env.setup",
        "codeloop_absent_werkzeug",
        "tests/conftest.py",
    )
