"""A SWE-bench spec made into an environment recipe (a Python version, the files the install
reads, ordered shell commands run with the virtualenv active in a copy of the repository at the
environment commit) and the per-instance steps that follow it.

The official harness builds two layers: an environment image per (repository, version) holding
the interpreter and the dependencies, and an instance image per instance that clones the
repository at the instance's base commit, runs the spec's `pre_install` and `install` there
(`pip install -e .`: entry points, generated version files and dependency changes of that very
commit). Here the first layer is a cached environment (`sandbox.environments`) and the second a
per-instance layer (`codeloop.swebench.layer`); the recipe holds the first, `pre_install` and
`install` the second.

What the official environment image does, and what stands for it here:
- `conda create python=X PACKAGES` → a virtualenv of Python X with the base tools a conda
  environment of the images' time had (`BASE_TOOLS`: pip below 24, whose stricter metadata rules
  refuse some of these old projects' editable installs), then `pip install PACKAGES`.
- `packages = "requirements.txt"` → the spec's requirement files read from the environment
  commit's tree out of the repository (the official harness fetches them from GitHub), merged and
  cleaned by SWE-bench's own `clean_requirements` (which replaces the yanked `types-pkg_resources`).
- `packages = "environment.yml"` → its conda dependencies installed from the package index one by
  one, constrained by the spec's pinned `pip_packages`; a conda-only package (no wheel or sdist
  on the index) is skipped and named in the build log.
- `pip_packages` → the same command; `pre_install` and `install` → the same commands in the
  instance's tree; `apt-get` steps cannot run in a virtualenv and are skipped, named in the
  recipe's `skipped`.
"""

import re
import shlex

import yaml
from pydantic import BaseModel, ConfigDict, JsonValue

from codeloop.swebench.errors import SpecError
from codeloop.swebench.instances import Instance
from codeloop.swebench.official import Spec, swebench
from codeloop.swebench.repositories import RepoSource
from sandbox.environments import Recipe

RECIPE_FORMAT = 2
INPUTS_DIR = ".codeloop-swebench"
"""Where a recipe's input files are written in the environment commit's tree, relative to it."""
CONSTRAINTS_PATH = f"{INPUTS_DIR}/constraints.txt"
BASE_TOOLS = ("pip==23.3.2", "setuptools==69.5.1", "wheel==0.43.0")
# Conda packages with another name on the package index, or none (non-Python libraries that
# wheels on the index bundle themselves).
CONDA_TO_PYPI = {"matplotlib-base": "matplotlib", "iris": "scitools-iris", "pytables": "tables"}
# Releases newer than SWE-bench's published images that break these old repositories: what the
# images had is pinned (pip reads PIP_CONSTRAINT in the environment's build and in every
# instance's install). docutils 0.22 (2025) removed docutils.utils.roman, which Sphinx 3.x's
# LaTeX writer imports; the images (2024) had 0.21. sphinxcontrib-jsmath 2 requires Sphinx 5; the
# images had 1.0.1 (its release of 2019).
IMAGE_ERA_CONSTRAINTS = ("docutils<0.22", "sphinxcontrib-jsmath<2")
# Pins of one repository's instance install (its layer), added to the spec's install command as
# requirements: Sphinx 3.x requires docutils unbounded (4.0 and later bound it below 0.18 to 0.21),
# and its man-page tests expect the `.nf`/`.ft C` literal blocks docutils wrote before 0.21
# (which writes `.EX`/`.EE`); SWE-bench's validation environments had 0.20.
INSTALL_PINS = {"sphinx-doc/sphinx": ("docutils<0.21",)}
# A non-editable install (requests' `pip install .`) copies the tree into site-packages before
# the prediction: the official eval script installs again after applying it, which here would
# run the prediction's setup.py on the host. Installed editable instead, the patched tree is what
# is imported, as after the official re-install.
_NON_EDITABLE = re.compile(r"^(python -m pip install) \.$")
CONDA_ONLY = {"python", "pip", "hdf5", "libnetcdf", "cdms2", "pynio", "esmpy"}


class EnvRecipe(BaseModel):
    """How to build one environment; its `key` names the built environment in the cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    """`OWNER/NAME@VERSION`, for messages."""
    repo: str
    env_commit: str
    python: str
    """The Python version, e.g. `3.9`."""
    files: dict[str, str]
    """Input files by name, written to `INPUTS_DIR` in the repository copy before the commands."""
    commands: list[str]
    """Shell commands run in order with the virtualenv active, in the repository copy."""
    pre_install: list[str]
    """The spec's commands that change the repository's files, run on each instance's tree, as
    the official instance image ran them."""
    constraints: str = "\n".join(IMAGE_ERA_CONSTRAINTS) + "\n"
    """`IMAGE_ERA_CONSTRAINTS`, for the instance's install too."""
    install: str | None
    """The spec's install command (e.g. `python -m pip install -e .`), run in each instance's
    tree into its layer, with the version setuptools_scm cannot find in a history-less tree."""
    skipped: list[str]
    """Spec steps that cannot run here (system packages), for the report."""

    def to_recipe(self) -> Recipe:
        """The recipe for `sandbox.environments` (its store builds and caches it)."""
        return Recipe(
            kind="custom",
            source=f"SWE-bench spec of {self.repo} {self.label.rsplit('@', 1)[1]}",
            python=self.python,
            install=tuple(self.commands),
            inputs=tuple(f"{INPUTS_DIR}/{name}" for name in sorted(self.files)),
            tools=(),
            copy_project=True,
            env={"PIP_CONSTRAINT": CONSTRAINTS_PATH},
            key_extra={
                "swebench": "4.1.0",
                "recipe_format": str(RECIPE_FORMAT),
                "env_commit": self.env_commit,
            },
        )


def make_recipe(instance: Instance, spec: Spec, source: RepoSource) -> EnvRecipe:
    """The recipe of the instance's environment.

    Raises:
        SpecError: a requirement file the spec names is not in the environment commit's tree.
        RepositoryNotFound: the environment commit is not in the source.
    """
    source.resolve(instance.env_commit)
    files: dict[str, str] = {"constraints.txt": "\n".join(IMAGE_ERA_CONSTRAINTS) + "\n"}
    commands = [f"python -m pip install {' '.join(BASE_TOOLS)}"]
    packages = spec.get("packages", "")
    pins = _strings(spec.get("pip_packages"))
    if packages == "requirements.txt":
        files["requirements.txt"] = _requirements(instance, source)
        commands.append(f'python -m pip install -r "{INPUTS_DIR}/requirements.txt"')
    elif packages == "environment.yml":
        files["environment.yml"] = _environment_yml(instance, source)
        files["pins.txt"] = "\n".join(pins) + "\n"
        for name in _conda_dependencies(files["environment.yml"]):
            quoted = shlex.quote(name)
            commands.append(
                f'python -m pip install -c "{INPUTS_DIR}/pins.txt" {quoted} '
                f"|| echo 'codeloop: skipped {name}: not installable from the package index'"
            )
    elif packages:
        commands.append(f"python -m pip install {packages}")
    if pins:
        commands.append("python -m pip install " + " ".join(shlex.quote(p) for p in pins))
    pre_install, skipped = [], []
    for command in _strings(spec.get("pre_install")):
        (skipped if "apt-get" in command else pre_install).append(command)
    install = None
    given_install = spec.get("install")
    if given_install:
        name = re.sub(r"[^A-Za-z0-9]", "_", instance.repo.split("/")[1]).upper()
        # setuptools_scm finds no tags in the scratch tree; give the version the spec stands for.
        version = f"{instance.version}.0"
        command = _NON_EDITABLE.sub(r"\1 -e .", str(given_install))
        pins = " ".join(shlex.quote(pin) for pin in INSTALL_PINS.get(instance.repo, ()))
        if pins and command.startswith("python -m pip install "):
            command = f"{command} {pins}"
        install = (
            f"export SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{name}={version} "
            f"SETUPTOOLS_SCM_PRETEND_VERSION={version}; {command}"
        )
    return EnvRecipe(
        label=f"{instance.repo}@{instance.version}",
        repo=instance.repo,
        env_commit=instance.env_commit,
        python=str(spec["python"]),
        files=files,
        commands=commands,
        pre_install=pre_install,
        install=install,
        skipped=skipped,
    )


def _strings(value: JsonValue) -> list[str]:
    """A spec's list of strings (`pip_packages`, `pre_install`), each as text; none when absent."""
    return [str(item) for item in value] if isinstance(value, list) else []


def _requirements(instance: Instance, source: RepoSource) -> str:
    """SWE-bench's `get_requirements_by_commit`, reading the files from the repository instead of
    GitHub, then its `clean_requirements`."""
    modules = swebench()
    paths = modules.constants.MAP_REPO_TO_REQS_PATHS.get(instance.repo, [])
    for req_path in paths:
        text = source.read_file(instance.env_commit, req_path)
        if text is not None:
            break
    else:
        raise SpecError(
            f"{instance.instance_id}: none of the requirement files {paths} is in {instance.repo} "
            f"at {instance.env_commit}"
        )
    req_dir = "/".join(req_path.split("/")[:-1])

    def excluded(line: str) -> bool:
        return any(line.strip().startswith(x) for x in ["-e .", "#", ".[test"])

    original, additional = [], []
    for line in text.split("\n"):
        if line.strip().startswith("-r"):
            name = line[len("-r") :].strip()
            nested = source.read_file(instance.env_commit, f"{req_dir}/{name}" if req_dir else name)
            if nested is not None:
                additional += [extra for extra in nested.split("\n") if not excluded(extra)]
        elif not excluded(line):
            original.append(line)
    additional.append("\n".join(original))
    return modules.test_spec_python.clean_requirements("\n".join(additional))


def _environment_yml(instance: Instance, source: RepoSource) -> str:
    """SWE-bench's `get_environment_yml`, reading the file from the repository, then its
    `clean_environment_yml`."""
    modules = swebench()
    paths = modules.constants.MAP_REPO_TO_ENV_YML_PATHS.get(instance.repo, [])
    for path in paths:
        text = source.read_file(instance.env_commit, path)
        if text is not None:
            lines = ["name: testbed" if line.startswith("name:") else line for line in text.split("\n")]
            return modules.test_spec_python.clean_environment_yml("\n".join(lines))
    raise SpecError(f"{instance.instance_id}: none of {paths} is in {instance.repo} at {instance.env_commit}")


def _conda_dependencies(text: str) -> list[str]:
    """The environment file's packages as package-index names: conda ones renamed or dropped,
    the `pip:` section as it is."""
    data = yaml.safe_load(text) or {}
    names: list[str] = []
    for entry in data.get("dependencies", []):
        if isinstance(entry, dict):
            names += [str(p) for p in entry.get("pip", [])]
            continue
        name = re.split(r"[=<>! ]", str(entry).strip(), maxsplit=1)[0]
        spec = str(entry).strip()[len(name) :]
        if name in CONDA_ONLY:
            continue
        pinned = spec if spec and not spec.startswith("=") or spec.startswith("==") else ""
        names.append(CONDA_TO_PYPI.get(name, name) + pinned)
    return names
