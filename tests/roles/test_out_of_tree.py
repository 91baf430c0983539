"""A plug-in written against each supported import path of the role API loads and runs.

Three role packages, each written as a plug-in author would (its own `pyproject.toml`, a
`codeloop.roles` entry point, no test helper), are built and installed with pip into a throwaway
virtual environment — never into the one the tests run in — and a pipeline runs each package's
coder and reviewer on a real bus there. `agents.api` is the public path; `agents.runtime.api`
(where the last release's documentation pointed) keeps working; `agents.role_api` (the path before
it) keeps working with a `DeprecationWarning` naming `agents.api`.
"""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# slug: (the module the package imports the role API from, where it takes its messages from)
PATHS = {
    "new": ("agents.api", "agents.api"),
    "runtime": ("agents.runtime.api", "agents.messages"),
    "old": ("agents.role_api", "agents.messages"),
}

MODULE = '''\
"""A plug-in role package written against `{api}`."""

from {messages} import CodeRequest, ReviewRequest
from {api} import RoleContext, StepError, define_role

API = "{api}"


async def code(request: CodeRequest, ctx: RoleContext) -> dict:
    _, found, patch = request.task.text.partition("patch:\\n")
    if not found:
        raise StepError("agent.format", "the task carries no patch")
    return {{"patch": patch, "files_changed": ["NEWS.txt"], "answer": "from " + API}}


async def review(request: ReviewRequest, ctx: RoleContext) -> dict:
    if request.patch is None or "NEWS.txt" not in request.patch:
        return {{"verdict": "reject", "feedback": "no patch to review"}}
    return {{"verdict": "approve", "feedback": "reviewed by a role written against " + API}}


CODER = define_role("{slug}-coder", "code", code, version="1.0.0")
REVIEWER = define_role("{slug}-reviewer", "review", review, version="1.0.0")
'''

PYPROJECT = """\
[build-system]
requires = ["setuptools>=70"]
build-backend = "setuptools.build_meta"

[project]
name = "codeloop-oot-{slug}"
version = "1.0.0"
requires-python = ">=3.11"
dependencies = ["codeloop"]

[project.entry-points."codeloop.roles"]
{slug}-coder = "codeloop_oot_{slug}:CODER"
{slug}-reviewer = "codeloop_oot_{slug}:REVIEWER"

[tool.setuptools]
py-modules = ["codeloop_oot_{slug}"]
"""

PATCH = """\
diff --git a/NEWS.txt b/NEWS.txt
new file mode 100644
--- /dev/null
+++ b/NEWS.txt
@@ -0,0 +1 @@
+a plug-in was here
"""

# Runs inside the throwaway environment: loads the installed roles (recording the warnings their
# imports raise), runs one task through each package's pipeline and prints what it saw as JSON.
RUNNER = """\
import json, sys, warnings
from pathlib import Path

import anyio

from codeloop.testing import make_repo, running_pipeline
from agents.runtime.plugins import load_roles

SLUGS = sys.argv[2:]
PATCH = {patch!r}


async def main(tmp: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry = load_roles()
    deprecations = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    roles = [f"{{slug}}-{{kind}}" for slug in SLUGS for kind in ("coder", "reviewer")]
    repo = make_repo(tmp / "repo", {{"app.py": "x = 1\\n"}})
    seen = {{"deprecations": deprecations, "broken": [b.name for b in registry.broken], "results": {{}}}}
    async with running_pipeline(tmp / "state", roles=("orchestrator", *roles), registry=registry) as runner:
        for slug in SLUGS:
            result = await runner.run(
                f"add a news entry\\npatch:\\n{{PATCH}}",
                repo,
                stages=[f"code:{{slug}}-coder", f"review:{{slug}}-reviewer"],
                pipeline=slug,
                timeout_s=120,
            )
            seen["results"][slug] = result.model_dump(mode="json")
    print(json.dumps(seen))


anyio.run(main, Path(sys.argv[1]))
"""


def _package(root: Path, slug: str) -> Path:
    api, messages = PATHS[slug]
    project = root / f"oot-{slug}"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT.format(slug=slug))
    (project / f"codeloop_oot_{slug}.py").write_text(MODULE.format(api=api, messages=messages, slug=slug))
    return project


def _throwaway_environment(where: Path) -> Path:
    """A new virtual environment whose site-packages sees this checkout first, then (through a
    `.pth` file) the dev environment's packages: codeloop's dependencies, pip and setuptools are
    there to use, and whatever pip installs lands in the new environment only."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dev = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "codeloop_dev.pth").write_text(f"{ROOT}\nimport site; site.addsitedir({dev!r})\n")
    return python


def _env(home: Path) -> dict[str, str]:
    """The environment of the throwaway interpreter: no PYTHONPATH (only what is installed counts),
    the dev environment's programs (nats-server) on PATH, a home, cache and codeloop home of the
    test's own."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        PATH=path, HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), CODELOOP_HOME=str(home / "codeloop")
    )
    return env


def test_plug_ins_written_against_each_import_path_install_and_run(tmp_path: Path) -> None:
    python = _throwaway_environment(tmp_path / "venv")
    env = _env(tmp_path / "home")
    projects = [str(_package(tmp_path / "src", slug)) for slug in PATHS]
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            *projects,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    # Installed there, not in the environment the tests run in.
    with pytest.raises(ModuleNotFoundError):
        __import__("codeloop_oot_new")

    listed = subprocess.run(
        [str(python), "-m", "codeloop", "roles", "--json"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    roles = json.loads(listed.stdout)
    installed = {r["name"]: r["distribution"] for r in roles["installed"]}
    assert roles["broken"] == []
    for slug in PATHS:
        assert installed[f"{slug}-coder"] == installed[f"{slug}-reviewer"] == f"codeloop-oot-{slug}"

    runner = tmp_path / "run_pipelines.py"
    runner.write_text(RUNNER.format(patch=PATCH))
    done = subprocess.run(
        [str(python), str(runner), str(tmp_path / "work"), *PATHS],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["broken"] == []
    # Only the old path warns, and the warning says where to go.
    (warning,) = seen["deprecations"]
    assert "agents.role_api is deprecated" in warning and "agents.api" in warning
    for slug, (api, _) in PATHS.items():
        result = seen["results"][slug]
        assert result["status"] == "done", result
        assert result["answer"] == f"from {api}"
        assert "+a plug-in was here" in result["patch"]
        assert [(r["role"], r["verdict"], r["feedback"]) for r in result["reviews"]] == [
            (f"{slug}-reviewer", "approve", f"reviewed by a role written against {api}")
        ]


def test_the_old_path_is_the_public_api_with_a_warning() -> None:
    import agents.api as api

    with pytest.warns(DeprecationWarning, match=r"agents\.role_api is deprecated: import from agents\.api"):
        sys.modules.pop("agents.role_api", None)
        import agents.role_api as old
    assert {name: getattr(old, name) for name in api.__all__} == {
        name: getattr(api, name) for name in api.__all__
    }


def test_the_public_api_names_what_a_role_needs() -> None:
    import agents.api as api
    from agents.runtime import api as runtime

    assert {"define_role", "RoleContext", "StepError", "ReviewRequest", "ReviewResult", "Finding"} <= set(
        api.__all__
    )
    assert api.define_role is runtime.define_role and api.RoleContext is runtime.RoleContext
