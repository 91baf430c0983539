"""`codeloop run` tests a repository in its project environment: the `[environment]` of its
`codeloop.toml` decides the recipe, the scratch workspace resolves requirements as of the date
the checkout last changed them, and a second task on the same tree builds nothing."""

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.cli import codeloop

pytestmark = pytest.mark.slow
DEPENDENCY_DATE = "2023-06-01T12:00:00+00:00"
"""iniconfig 2.0.0 (January 2023) was the newest then; 2.1.0 came in 2025."""
FILES = {
    "codeloop.toml": """\
        [environment]
        install = [
            "uv pip install -r requirements.txt",
            "python -c \\"import pathlib, site; pathlib.Path(site.getsitepackages()[0], 'configured_marker.py').write_text('VALUE = 42')\\"",
        ]
        """,
    "requirements.txt": "iniconfig\n",
    "tests/test_environment.py": """\
        from importlib.metadata import version

        import configured_marker


        def test_the_configured_install_ran():
            assert configured_marker.VALUE == 42


        def test_requirements_resolve_as_of_their_last_commit():
            assert version("iniconfig") == "2.0.0"
        """,
    "README.md": "# marker\n\nThe configured environment's marker module.\n",
}


def _git(repo: Path, *args: str, date: str | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _repository(root: Path) -> Path:
    """The files, their dependency files committed on DEPENDENCY_DATE and the rest today."""
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "codeloop.toml", "requirements.txt")
    _git(root, "commit", "-qm", "dependencies", date=DEPENDENCY_DATE)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "tests")
    return root


def _diagnose(env: dict[str, str], repo: Path) -> dict[str, Any]:
    done = codeloop(
        env, "run", "check the tests", "--repo", str(repo), "--mode", "execute", "--json", timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_configured_environment_serves_two_tasks_on_the_same_tree_and_is_built_once(
    tmp_path: Path, private_cache_dir: Path
) -> None:
    """The environments issue: `[environment] install` replaces detection; the record and the
    test-run spans name the environment; the second task's says `built: false`; the key is the
    one `codeloop env show` gives the checkout, so the scratch workspace dated its requirements
    as the checkout does."""
    repo = _repository(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env |= {"CODELOOP_HOME": str(tmp_path / "home"), "CODELOOP_CACHE_DIR": str(private_cache_dir)}
    spans_file = tmp_path / "spans.jsonl"
    env["CODELOOP_TRACE_FILE"] = str(spans_file)

    first = _diagnose(env, repo)
    assert first["status"] == "diagnosed", first["report"]
    verification = first["verification"]
    assert verification["failures"] == [], verification
    assert any(c["ok"] and c["summary"].startswith("2 passed") for c in verification["checks"]), verification
    environment = verification["environment"]
    assert environment["kind"] == "configured" and environment["source"] == "[environment] in codeloop.toml"
    assert environment["built"] is True

    shown = codeloop(env, "env", "show", "--repo", str(repo), "--json", timeout=900)
    assert shown.returncode == 0, shown.stderr
    checkout = json.loads(shown.stdout)
    assert checkout["recipe"]["index_date"] == DEPENDENCY_DATE
    assert checkout["key"] == environment["key"] and checkout["built"] is True

    # The test run's span (the exec server's `tools/call run_tests`) names the environment too.
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    runs = [s["attributes"] for s in spans if s["name"] == "tools/call run_tests"]
    assert runs and all(a["codeloop.environment.key"] == environment["key"] for a in runs), runs
    assert any(a["codeloop.environment.built"] is True for a in runs)
    assert {a["codeloop.environment.source"] for a in runs} == {"[environment] in codeloop.toml"}

    second = _diagnose(env, repo)
    assert second["verification"]["failures"] == []
    assert second["verification"]["environment"]["key"] == environment["key"]
    assert second["verification"]["environment"]["built"] is False


@pytest.mark.anyio
async def test_the_workspace_service_tests_in_the_repositorys_environment_and_holds_it_while_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_cache_dir: Path
) -> None:
    """The workspace service (docs/deployment.md) builds the environment of a workspace's
    repository for the workers that test through it, and holds it (a lease: never evicted) for
    as long as the workspace is open."""
    from agents.runtime.tools import HttpTarget, mcp_client
    from agents.workspace.messages import (
        OPEN_SUBJECT,
        WorkspaceClose,
        WorkspaceClosed,
        WorkspaceOpen,
        WorkspaceOpened,
        service_subject,
    )
    from bus.config import BusConfig
    from bus.connection import open_bus
    from bus.requests import request
    from codeloop.config.serve_note import client_config_for
    from codeloop.services.workspace_service import WorkspaceHosting
    from codeloop.snapshots import capture_repository
    from codeloop.wiring.process import Hosting, Workers, serve
    from sandbox.environments import EnvironmentSettings, EnvironmentStore

    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(private_cache_dir))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    repo = _repository(tmp_path / "repo")
    config = BusConfig(state_dir=tmp_path / "state")
    hosting = Hosting(metrics=None, workspace_service=WorkspaceHosting())
    store = EnvironmentStore(EnvironmentSettings(cache_dir=private_cache_dir / "environments"))
    stop = anyio.Event()
    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            note = await tg.start(
                lambda task_status: serve(
                    config, stop=stop, workers=Workers(roles=()), hosting=hosting, task_status=task_status
                )
            )
            async with open_bus(client_config_for(config, note)) as bus:
                snapshot = await capture_repository(bus, repo)
                ask = WorkspaceOpen(
                    task_id="t-env", label="verify", snapshot=snapshot, scopes=["read", "execute"]
                )
                opened = await request(bus, OPEN_SUBJECT, ask, timeout_s=60)
                assert isinstance(opened, WorkspaceOpened), opened
                async with mcp_client(HttpTarget(opened.urls["exec"], opened.token)) as client:
                    result = await client.call_tool("run_tests", {"timeout_s": 600})
                run = result.structured_content
                assert (run["passed"], run["failed"]) == (2, 0), run["output_tail"]
                environment = run["environment"]
                assert environment["kind"] == "configured" and environment["built"] is True
                assert store.in_use(environment["key"])
                closing = WorkspaceClose(workspace=opened.workspace)
                closed = await request(bus, service_subject(opened.service, "close"), closing, timeout_s=60)
                assert isinstance(closed, WorkspaceClosed) and closed.existed
                assert not store.in_use(environment["key"])
            stop.set()
