"""Detecting a project's recipe from its own files, most specific first.

1. the project's own virtualenv (`.venv`, `venv`) when it holds a working interpreter: the user
   already built it; it is used as it is, read-only, and nothing is built;
2. `uv.lock` (`uv sync --frozen`), `poetry.lock` (`poetry install`), `pdm.lock` (`pdm sync`);
3. pyproject.toml's PEP 735 dependency groups and `[project.optional-dependencies]` named
   test/tests/testing/dev (the project installed editable with those extras, the groups' requirements);
4. requirement files: `requirements.txt` with its dev/test variant at the root, or a
   `requirements/` folder's test (else dev) file, then the project itself when it is installable;
5. setup.cfg / setup.py test/dev extras;
6. tox.ini's `[testenv]` deps;
7. an installable project that declares dependencies, with none of the above (installed editable);
8. only a `.python-version` the running interpreter does not satisfy: a bare virtualenv.

Detected recipes install with `uv pip install` (uv ships with codeloop): a build takes seconds
instead of a minute, and `--exclude-newer` bounds an old checkout's loose requirements to the
releases of its time (`Recipe.index_date`). uv reads PIP_INDEX_URL/PIP_EXTRA_INDEX_URL passed on
by the build, but not pip's configuration files: a machine whose index is set only in pip.conf
sets `[environment] install` with `pip install ...` commands instead.

The Python comes from `.python-version`, else `requires-python`. Every dependency file the recipe
reads is one of its inputs, hashed into the key. Nothing here runs the project's code: setup.py
is read as text.
"""

import ast
import configparser
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from layout import SOURCE_DATES
from sandbox.environments.pythons import normalize_request, query_interpreter, running_interpreter, satisfies
from sandbox.environments.recipe import DEFAULT_TOOLS, Recipe
from sandbox.environments.settings import EnvironmentSettings
from sandbox.errors import RecipeInvalid

TEST_NAMES = ("test", "tests", "testing", "dev")
"""Extras and dependency groups that hold what a test run needs, in order of preference."""
ROOT_REQUIREMENT_VARIANTS = (
    "requirements-test.txt",
    "requirements-tests.txt",
    "requirements_test.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "test-requirements.txt",
    "dev-requirements.txt",
    "requirements-testing.txt",
)
FOLDER_BASE = ("base.txt", "main.txt", "requirements.txt", "install.txt")
FOLDER_TEST = ("tests.txt", "test.txt", "testing.txt", "dev.txt", "development.txt")
DEPENDENCY_FILES = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
)
VENV_DIRS = (".venv", "venv")
INSTALL = "uv pip install"
GIT_TIMEOUT_S = 20.0
_PIP = re.compile(r"\bpip3?\s+(?:install|sync)\b")
_INCLUDE = re.compile(r"^\s*(?:-r|-c|--requirement|--constraint)\s*=?\s*(\S+)", re.M)


def _read_toml(path: Path) -> dict[str, object]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RecipeInvalid(f"cannot read {path.name} to choose the project's environment: {exc}") from exc


def python_request(project: Path, pyproject: dict[str, Any]) -> str | None:
    """`.python-version`'s first line, else `requires-python`; None when neither says."""
    pinned = project / ".python-version"
    if pinned.is_file():
        for line in pinned.read_text(errors="replace").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                return normalize_request(line.strip())
    requires = pyproject.get("project", {}).get("requires-python")
    return normalize_request(requires) if isinstance(requires, str) else None


def existing_venv(project: Path) -> str | None:
    """The project's own virtualenv when its interpreter runs (a broken symlink is no venv)."""
    for name in VENV_DIRS:
        venv = project / name
        if (venv / "pyvenv.cfg").is_file() and not venv.is_symlink() and (venv / "bin" / "python").exists():
            if query_interpreter(str(venv / "bin" / "python")) is not None:
                return name
    return None


def _included(project: Path, files: list[str]) -> list[str]:
    """`files` and the requirement files they include (`-r`, `-c`), project-relative, in order."""
    seen: list[str] = []
    queue = list(files)
    while queue:
        rel = queue.pop(0)
        if rel in seen:
            continue
        seen.append(rel)
        path = project / rel
        if not path.is_file():
            continue
        for include in _INCLUDE.findall(path.read_text(errors="replace")):
            target = (path.parent / include).resolve()
            if target.is_relative_to(project.resolve()) and "://" not in include:
                queue.append(target.relative_to(project.resolve()).as_posix())
    return seen


def _installable(project: Path, pyproject: dict[str, object]) -> bool:
    return (
        "project" in pyproject
        or "build-system" in pyproject
        or (project / "setup.py").is_file()
        or (
            (project / "setup.cfg").is_file()
            and "[metadata]" in (project / "setup.cfg").read_text(errors="replace")
        )
    )


def _editable(extras: list[str]) -> str:
    return f"{INSTALL} -e " + (shlex.quote(f".[{','.join(extras)}]") if extras else ".")


def _group_requirements(groups: dict[str, Any], name: str, seen: set[str] | None = None) -> list[str]:
    """A PEP 735 group's requirements, its `{include-group = ...}` entries expanded."""
    seen = seen or set()
    if name in seen:
        return []
    seen.add(name)
    found = []
    for item in groups.get(name, []):
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            found += _group_requirements(groups, item["include-group"], seen)
    return found


def _setup_extras(project: Path) -> list[str]:
    """Test/dev extras declared in setup.cfg or (read as text, never run) setup.py."""
    names: set[str] = set()
    cfg = project / "setup.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(cfg.read_text(errors="replace"))
        except configparser.Error as exc:
            raise RecipeInvalid(f"cannot read setup.cfg to choose the project's environment: {exc}") from exc
        if parser.has_section("options.extras_require"):
            names |= set(parser.options("options.extras_require"))
    setup = project / "setup.py"
    if setup.is_file():
        try:
            tree = ast.parse(setup.read_text(errors="replace"))
        except SyntaxError:
            tree = None
        for node in ast.walk(tree) if tree else []:
            if (
                isinstance(node, ast.keyword)
                and node.arg == "extras_require"
                and isinstance(node.value, ast.Dict)
            ):
                names |= {
                    k.value
                    for k in node.value.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
    return [name for name in TEST_NAMES if name in names][:1]


def _tox_deps(project: Path) -> list[str]:
    """tox.ini's `[testenv]` deps without factor-conditional lines, `{toxinidir}/` dropped."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string((project / "tox.ini").read_text(errors="replace"))
    except configparser.Error as exc:
        raise RecipeInvalid(f"cannot read tox.ini to choose the project's environment: {exc}") from exc
    if not parser.has_option("testenv", "deps"):
        return []
    deps = []
    for line in parser.get("testenv", "deps").splitlines():
        line = line.split("#", 1)[0].strip().replace("{toxinidir}/", "")
        if line and not re.match(r"^[\w,.-]+:\s", line) and "{" not in line:
            deps.append(line)
    return deps


def _requirement_files(project: Path) -> list[str]:
    """The requirement files a test run needs: root ones, else a `requirements/` folder's."""
    chosen = []
    if (project / "requirements.txt").is_file():
        chosen.append("requirements.txt")
    variant = next((n for n in ROOT_REQUIREMENT_VARIANTS if (project / n).is_file()), None)
    if variant:
        chosen.append(variant)
    folder = project / "requirements"
    if not chosen and folder.is_dir():
        chosen += [f"requirements/{n}" for n in FOLDER_BASE if (folder / n).is_file()][:1]
        chosen += [f"requirements/{n}" for n in FOLDER_TEST if (folder / n).is_file()][:1]
    return chosen


def _present(project: Path, names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(n for n in names if (project / n).is_file())


def _lock_recipe(project: Path, python: str | None, inputs: tuple[str, ...]) -> Recipe | None:
    if (project / "uv.lock").is_file():
        return Recipe(
            kind="uv", source="uv.lock", python=python, install=("uv sync --frozen",), inputs=inputs
        )
    if (project / "poetry.lock").is_file():
        return Recipe(
            kind="poetry",
            source="poetry.lock",
            python=python,
            install=("poetry install --no-interaction",),
            inputs=inputs,
            build_requires=("poetry",),
            env={"POETRY_VIRTUALENVS_CREATE": "false"},
        )
    if (project / "pdm.lock").is_file():
        return Recipe(
            kind="pdm",
            source="pdm.lock",
            python=python,
            install=("pdm sync --dev",),
            inputs=inputs,
            build_requires=("pdm",),
            env={"PDM_IGNORE_SAVED_PYTHON": "1"},
        )
    return None


def _pyproject_recipe(
    project: Path, pyproject: dict[str, Any], python: str | None, inputs: tuple[str, ...]
) -> Recipe | None:
    extras_table = pyproject.get("project", {}).get("optional-dependencies", {})
    extras = [n for n in TEST_NAMES if n in extras_table]
    groups_table = pyproject.get("dependency-groups", {})
    groups = [n for n in TEST_NAMES if n in groups_table]
    if not extras and not groups:
        return None
    install = [_editable(extras)] if _installable(project, pyproject) else []
    requirements = [req for group in groups for req in _group_requirements(groups_table, group)]
    if requirements:
        install.append(f"{INSTALL} " + " ".join(shlex.quote(r) for r in dict.fromkeys(requirements)))
    described = [f"extras {','.join(extras)}"] * bool(extras) + [f"groups {','.join(groups)}"] * bool(groups)
    return Recipe(
        kind="pyproject",
        source=f"pyproject.toml ({'; '.join(described)})",
        python=python,
        install=tuple(install),
        inputs=inputs,
    )


def detect_recipe(project: Path, *, use_venv: bool = True) -> Recipe | None:
    """The recipe the project's own files describe, most specific first; None when they describe
    none (then commands get codeloop's own interpreter). `use_venv`: consider the project's own
    virtualenv (first).

    Raises:
        RecipeInvalid: a dependency file that decides the recipe cannot be read.
    """
    project = project.resolve()
    if use_venv and (venv := existing_venv(project)):
        return Recipe(kind="venv", source=f"{venv}/ (the project's own virtualenv)", venv=venv, tools=())
    pyproject = _read_toml(project / "pyproject.toml")
    python = python_request(project, pyproject)
    inputs = _present(project, [*DEPENDENCY_FILES, ".python-version"])
    recipe = _lock_recipe(project, python, inputs) or _pyproject_recipe(project, pyproject, python, inputs)
    if recipe is not None:
        return recipe
    installable = _installable(project, pyproject)
    self_install = [_editable([])] if installable else []
    files = _requirement_files(project)
    if files:
        install = [f"{INSTALL} -r {shlex.quote(f)}" for f in files] + self_install
        every = _included(project, files)
        return Recipe(
            kind="requirements",
            source=", ".join(files) + (" + the project itself" if self_install else ""),
            python=python,
            install=tuple(install),
            inputs=tuple(dict.fromkeys([*every, *inputs])),
        )
    extras = _setup_extras(project) if installable else []
    if extras:
        return Recipe(
            kind="setup",
            source=f"setup extras {extras[0]}",
            python=python,
            install=(_editable(extras),),
            inputs=inputs,
        )
    if (project / "tox.ini").is_file() and (deps := _tox_deps(project)):
        reqs = [d.removeprefix("-r").strip() for d in deps if d.startswith("-r")]
        plain = [d for d in deps if not d.startswith("-")]
        install = [f"{INSTALL} -r {shlex.quote(r)}" for r in reqs]
        install += [f"{INSTALL} " + " ".join(shlex.quote(d) for d in plain)] if plain else []
        return Recipe(
            kind="tox",
            source="tox.ini [testenv] deps",
            python=python,
            install=tuple([*install, *self_install]),
            inputs=tuple(dict.fromkeys([*_included(project, reqs), *inputs])),
        )
    if installable and _declares_dependencies(project, pyproject):
        source = (
            "pyproject.toml" if pyproject else "setup.py" if (project / "setup.py").is_file() else "setup.cfg"
        )
        kind = "pyproject" if pyproject else "setup"
        return Recipe(kind=kind, source=source, python=python, install=tuple(self_install), inputs=inputs)
    # Nothing to install: codeloop's own interpreter (it has pytest) serves, unless it is not the
    # Python the project asks for.
    if python is not None and not satisfies(running_interpreter().version, python):
        source = ".python-version" if (project / ".python-version").is_file() else "requires-python"
        return Recipe(kind="python", source=source, python=python, inputs=inputs)
    return None


def _declares_dependencies(project: Path, pyproject: dict[str, Any]) -> bool:
    """Whether installing the project would install anything besides itself (a setup.py, which
    is not run here, is assumed to)."""
    if (project / "setup.py").is_file():
        return True
    table = pyproject.get("project", {})
    if table.get("dependencies") or "dependencies" in table.get("dynamic", []):
        return True
    poetry = pyproject.get("tool", {}).get("poetry", {}).get("dependencies", {})
    if set(poetry) - {"python"}:
        return True
    cfg = project / "setup.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(cfg.read_text(errors="replace"))
        except configparser.Error:
            return True
        return bool(parser.get("options", "install_requires", fallback="").strip())
    return False


def resolve_recipe(project: Path, settings: EnvironmentSettings) -> Recipe | None:
    """The recipe for `project` under `settings`: None when environments are disabled; the
    `[environment]` override (`settings.install`, `settings.python`) when given; else
    `detect_recipe`, its Python replaced by `settings.python` when that is set. Either way its
    requirements resolve as of `settings.index_date` (`git`: the inputs' last commit).

    Raises:
        RecipeInvalid: see `detect_recipe`.
    """
    if not settings.enabled:
        return None
    project = project.resolve()
    recipe = _configured(project, settings) if settings.install is not None else _detected(project, settings)
    if recipe is None or recipe.kind == "venv" or recipe.index_date or settings.index_date is None:
        return recipe
    date = settings.index_date if settings.index_date != "git" else inputs_commit_date(project, recipe.inputs)
    return recipe.model_copy(update={"index_date": date}) if date else recipe


def _configured(project: Path, settings: EnvironmentSettings) -> Recipe:
    """The recipe of `[environment] install`: those commands, the requirement files they (and the
    project) name as inputs."""
    install = settings.install or ()
    pyproject = _read_toml(project / "pyproject.toml")
    inputs = _present(project, [*DEPENDENCY_FILES, ".python-version"])
    files = _included(project, [*_requirement_files(project), *_install_files(install)])
    return Recipe(
        kind="configured",
        source=settings.configured_source,
        python=normalize_request(settings.python) if settings.python else python_request(project, pyproject),
        install=install,
        inputs=tuple(dict.fromkeys([*files, *inputs])),
        tools=DEFAULT_TOOLS,
    )


def _detected(project: Path, settings: EnvironmentSettings) -> Recipe | None:
    """`detect_recipe`, its Python replaced by `settings.python` when that is set."""
    recipe = detect_recipe(project, use_venv=settings.python is None)
    if settings.python is None:
        return recipe
    python = normalize_request(settings.python)
    if recipe is None:
        return Recipe(kind="configured", source=settings.configured_source, python=python)
    source = f"{recipe.source}; Python from {settings.configured_source}"
    return recipe.model_copy(update={"python": python, "source": source})


def _git(project: Path, *args: str) -> str | None:
    """`git -C project ARGS` stdout, or None when git is missing, fails or hangs."""
    git = shutil.which("git")
    if git is None:
        return None
    argv = [git, "-C", str(project), "-c", "core.quotepath=off", *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _dirty(project: Path, inputs: tuple[str, ...]) -> set[str] | None:
    """The inputs that differ from the last commit (changed, new, deleted); None without git."""
    status = _git(project, "status", "--porcelain", "--no-renames", "--", *inputs)
    if status is None:
        return None
    return {line[3:].strip('"') for line in status.splitlines() if len(line) > 3}


def recorded_dates(project: Path) -> dict[str, str] | None:
    """The source checkout's dates a scratch workspace carries (`layout.SOURCE_DATES` in its git
    directory); None when `project` is not such a workspace."""
    path = project / ".git" / SOURCE_DATES
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def input_dates(project: Path, inputs: tuple[str, ...]) -> dict[str, str]:
    """Per input of a git checkout: the committer date (ISO 8601) of the last commit that changed
    it, for the inputs that are as committed (what `capture` records for a scratch workspace)."""
    if not inputs or not (project / ".git").exists():
        return {}
    dirty = _dirty(project, inputs)
    if dirty is None:
        return {}
    dates = {}
    for rel in inputs:
        if rel not in dirty and (
            date := (_git(project, "log", "-1", "--format=%cI", "--", rel) or "").strip()
        ):
            dates[rel] = date
    return dates


def _latest(dates: list[str]) -> str:
    return max(dates, key=lambda d: datetime.fromisoformat(d.replace("Z", "+00:00")))


def inputs_commit_date(project: Path, inputs: tuple[str, ...]) -> str | None:
    """The committer date of the last commit that changed `inputs`, when `project` is the top of
    a git checkout and those files are as committed; None otherwise (or without git).

    A scratch workspace's history is one commit made when it was (`agents.workspace`): its dates
    are those the source checkout recorded (`recorded_dates`), and an input the checkout had not
    committed, or a checkout that was no git repository, means None, as it would there."""
    if not inputs or not (project / ".git").exists():
        return None
    dirty = _dirty(project, inputs)
    if dirty is None or dirty:
        return None
    recorded = recorded_dates(project)
    if recorded is not None:
        unrecorded = [rel for rel in inputs if rel not in recorded and (project / rel).exists()]
        dates = [recorded[rel] for rel in inputs if rel in recorded]
        return _latest(dates) if dates and not unrecorded else None
    return (_git(project, "log", "-1", "--format=%cI", "--", *inputs) or "").strip() or None


def _install_files(commands: tuple[str, ...]) -> list[str]:
    """Requirement files named in pip's and uv's install commands (`-r FILE`, `-c FILE`; the `-c`
    of `python -c` or `sh -c` is no constraint file)."""
    return [
        m
        for command in commands
        if _PIP.search(command)
        for m in _INCLUDE.findall(command.replace(" -r", "\n-r").replace(" -c", "\n-c"))
    ]
