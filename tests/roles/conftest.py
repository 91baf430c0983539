"""Custom roles end to end: plug-in roles as packages on the path, review stages, pipelines from the
configuration, discovery. Real nats-server, real roles and tool servers; only models are scripted."""

import importlib
import os
import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.processes import processes_mentioning

ROOT = Path(__file__).resolve().parents[2]
SECURITY_REVIEWER = ROOT / "examples" / "roles" / "security_reviewer"
FIXTURE_ROLES = Path(__file__).resolve().parent / "fixture_roles"
SECURE = ["plan:planner", "retrieve:retriever", "code:coder", "review:security-reviewer", "verify:verifier"]


def _dist_info(project: Path, into: Path) -> None:
    """The distribution metadata `pip install PROJECT` would leave (name, version, entry points),
    written under `into`: on a path, it makes the project's roles discoverable there only."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    info = into / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    groups = meta.get("entry-points", {})
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
            for group, points in groups.items()
        )
    )


@pytest.fixture(scope="session")
def plug_ins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The plug-in role packages (the security reviewer, the tests' own `scripted-coder` and
    `slow-reviewer`) on this test process's path and on PYTHONPATH for the processes it starts,
    as if installed, without installing anything into the virtualenv: `pip list` stays the same."""
    metadata = tmp_path_factory.mktemp("plug-ins")
    for project in (SECURITY_REVIEWER, FIXTURE_ROLES):
        _dist_info(project, metadata)
    paths = [str(metadata), str(SECURITY_REVIEWER), str(FIXTURE_ROLES)]
    with pytest.MonkeyPatch.context() as patch:
        for path in reversed(paths):
            patch.syspath_prepend(path)
        patch.setenv("PYTHONPATH", os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])]))
        importlib.invalidate_caches()
        yield


def _discoverable(name: str) -> None:
    assert any(ep.name == name for ep in entry_points(group="codeloop.roles")), name


@pytest.fixture(scope="session")
def security_reviewer_installed(plug_ins: None) -> None:
    _discoverable("security-reviewer")


@pytest.fixture(scope="session")
def fixture_roles_installed(plug_ins: None) -> None:
    """The tests' own plug-in package (`scripted-coder`, `slow-reviewer`)."""
    _discoverable("slow-reviewer")


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    yield
    assert processes_mentioning(tmp_path) == []
