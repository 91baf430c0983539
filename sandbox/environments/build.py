"""Making a recipe real in its directory: copy the project, create the virtualenv, run the
install commands, add the test tools the project lacks, record the result.

A layered recipe (`Recipe.base`) gets a virtualenv of its parent's interpreter, without pip of
its own, whose site-packages adds the parent's after itself (`LAYER_PTH`, `site.addsitedir`: the
parent's own .pth files, its editable installs and tools, apply too), and the parent's console
scripts re-pointed at the layer's interpreter (so `pip`, `tox`, `pytest` run with the layer's
packages, and `pip install` installs into the layer). pip never removes a distribution outside
the environment it runs in: an install that wants another version of a parent's package puts
it in the layer, ahead of the parent's, and the parent is never changed.

Everything runs on the host with the package index reachable (tests never do: they run in the
sandbox). The directory is the environment's final place — a virtualenv is not relocatable —
and its manifest is written last, so a build that stops half-way leaves a directory the store
recognises as unfinished and rebuilds (`store.py`).
"""

import ast
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import anyio
from packaging.requirements import InvalidRequirement, Requirement

from sandbox.environments.environment import MANIFEST, Environment
from sandbox.environments.pythons import Interpreter
from sandbox.environments.recipe import Recipe
from sandbox.environments.steps import StepRunner
from sandbox.errors import BuildFailed

VENV, PROJECT, TOOLS, BUILDER = "venv", "project", "tools", ".builder"
LOG = "build.log"
TOOLS_PTH = "zz_codeloop_tools.pth"
"""Appends the tools directory to sys.path; site-packages' own .pth files come first."""
LAYER_PTH = "codeloop-base-environment.pth"
"""In a layer's site-packages: adds its parent's site-packages (and so the parent's .pth files)."""
_NOT_REPOINTED = ("python", "activate", "Activate", "deactivate")
# Left out of the project's copy: other environments, caches and build output, which the install
# commands do not read and which can be large. `.git` stays when the version comes from it.
_NOT_COPIED = {".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
_NOT_COPIED |= {".codeloop", "node_modules", "build", "dist"}
_SCM_VERSION = re.compile(rb"setuptools[_-]scm|hatch-vcs|versioneer|dunamai|use_scm_version|pbr")
_FIND_MISSING = (
    "import importlib.util, sys\n"
    "print(' '.join(n for n in sys.argv[1:] if importlib.util.find_spec(n) is None))\n"
)


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


def _uv() -> str | None:
    try:
        import uv  # the `uv` package ships the binary

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def step_environment(
    base: Mapping[str, str], venv: Path, *, home: Path, extra_bins: tuple[Path, ...] = ()
) -> dict[str, str]:
    """The variables of a build step: the host's passed variables, the virtualenv active."""
    env = dict(base)
    host_path = env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *(str(b) for b in extra_bins), host_path])
    env["VIRTUAL_ENV"] = str(venv)
    env.setdefault("HOME", str(home))
    env["PIP_NO_INPUT"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    # uv: never download an interpreter (building reaches the package index, nothing else), and
    # `uv sync` installs into this virtualenv.
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    for name in ("PYTHONHOME", "PYTHONPATH", "CONDA_PREFIX"):
        env.pop(name, None)
    # uv reads no pip configuration: the indexes pip was told about through the environment
    # apply to `uv pip` too (configuration files are pip's alone).
    for pip_name, uv_name in (
        ("PIP_INDEX_URL", "UV_INDEX_URL"),
        ("PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL"),
    ):
        if pip_name in env and uv_name not in env:
            env[uv_name] = env[pip_name]
    return env


def _copy_project(project: Path, target: Path) -> None:
    keep_git = any(
        (project / name).is_file() and _SCM_VERSION.search((project / name).read_bytes())
        for name in ("pyproject.toml", "setup.cfg", "setup.py")
    )
    skipped = _NOT_COPIED if keep_git else _NOT_COPIED | {".git"}

    # The cache may live inside the project (a repository holding its own cache directory):
    # never copy the environment into itself.
    inside = {target, *target.parents}

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) == project
        return {
            n for n in names if (top and n in skipped) or n == "__pycache__" or Path(directory, n) in inside
        }

    shutil.copytree(project, target, symlinks=True, ignore=ignore, ignore_dangling_symlinks=True)


def site_packages(venv: Path) -> Path:
    """The purelib directory of a POSIX virtualenv.

    Raises:
        BuildFailed: it has none.
    """
    return _site_packages(venv)


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise BuildFailed(
            f"the virtualenv at {venv} has no site-packages", step="create the virtualenv", log_tail=""
        )
    return found[0]


def _tool_modules(tools: tuple[str, ...]) -> dict[str, str]:
    """Importable module name -> requirement, for the tools of a recipe."""
    modules = {}
    for spec in tools:
        try:
            name = Requirement(spec).name
        except InvalidRequirement:
            name = spec
        modules[name.lower().replace("-", "_")] = spec
    return modules


def import_roots(site_packages: Path, project_copy: Path) -> tuple[str, ...]:
    """Project-relative directories the editable installs in `site_packages` import from: path
    lines of `.pth` files, the package directories of setuptools' editable finders, egg-links."""
    found: list[str] = []

    def add(raw: str) -> None:
        path = Path(raw.strip())
        if path.is_absolute() and path.is_relative_to(project_copy):
            rel = path.relative_to(project_copy).as_posix() or "."
            if rel not in found:
                found.append(rel)

    for pth in sorted(site_packages.glob("*.pth")):
        for line in pth.read_text(errors="replace").splitlines():
            if line.strip() and not line.startswith(("#", "import ", "import\t")):
                add(line)
    for finder in sorted(site_packages.glob("__editable___*finder.py")):
        match = re.search(r"^MAPPING\s*(?::[^=\n]*)?=\s*(\{.*?\})\s*$", finder.read_text(), re.M | re.S)
        if match:
            try:
                mapping = ast.literal_eval(match.group(1))
            except (ValueError, SyntaxError):
                continue
            for location in mapping.values():
                add(str(Path(location).parent))
    for link in sorted(site_packages.glob("*.egg-link")):
        add(link.read_text(errors="replace").splitlines()[0] if link.stat().st_size else "")
    return tuple(found)


def tree_paths(root: Path) -> frozenset[str]:
    """Every file and directory under `root`, relative, `__pycache__` left out."""
    found = set()
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(directory).relative_to(root)
        found.update((rel / name).as_posix() for name in [*dirs, *files])
    return frozenset(found)


def new_roots(before: frozenset[str], after: frozenset[str]) -> tuple[str, ...]:
    """The paths of `after` not in `before` whose parent was there before: one entry per new
    file, and one for each new directory (not its contents)."""
    new = after - before
    return tuple(sorted(p for p in new if p.rpartition("/")[0] not in new))


def disk_usage(path: Path) -> int:
    """Bytes of disk used under `path` (allocated blocks, symlinks not followed)."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                continue
    return total


class Builder:
    """Builds one recipe into one directory."""

    def __init__(
        self,
        recipe: Recipe,
        project: Path,
        target: Path,
        *,
        key: str,
        interpreter: Interpreter,
        build_env: Mapping[str, str],
        base: Environment | None = None,
    ) -> None:
        self.recipe = recipe
        self.base = base
        self.project = project
        self.target = target
        self.key = key
        self.interpreter = interpreter
        self.venv = target / VENV
        self.project_copy = target / PROJECT
        self.env = step_environment(build_env, self.venv, home=target / ".home")

    async def build(self, *, timeout_s: float, progress: Callable[[str], None]) -> Environment:
        """Runs every step and writes the manifest; returns the finished environment.

        Raises:
            BuildFailed: a step failed or the build ran past `timeout_s`.
        """
        started = time.monotonic()
        await anyio.to_thread.run_sync(lambda: self.target.mkdir(parents=True, exist_ok=True))
        log_path = self.target / LOG
        log = await anyio.to_thread.run_sync(open, log_path, "ab")
        try:
            steps = StepRunner(log, log_path, deadline=anyio.current_time() + timeout_s, progress=progress)  # pyright: ignore[reportArgumentType] - opened in binary mode, so a BinaryIO
            await self._project(progress)
            await self._venv(steps)
            env = await self._builder(steps)
            before = await anyio.to_thread.run_sync(tree_paths, self.project_copy)
            for command in self.recipe.install:
                await steps.run(command, [*_shell(), command], cwd=self.project_copy, env=env)
            after = await anyio.to_thread.run_sync(tree_paths, self.project_copy)
            tools = await self._tools(steps)
        finally:
            log.close()
        site = await anyio.to_thread.run_sync(_site_packages, self.venv)
        roots = await anyio.to_thread.run_sync(import_roots, site, self.project_copy)
        await anyio.to_thread.run_sync(shutil.rmtree, self.target / BUILDER, True)
        environment = Environment(
            key=self.key,
            recipe=self.recipe,
            path=self.target,
            venv=self.venv,
            python=self.venv / "bin" / "python",
            python_version=self.interpreter.version,
            base_prefix=self.interpreter.base_prefix,
            project_path=self.project_copy if self.recipe.copy_project else None,
            import_roots=roots,
            build_products=new_roots(before, after) if self.recipe.copy_project else (),
            tools_path=tools,
            base=self.base,
            built_at=datetime.now(UTC),
            build_s=round(time.monotonic() - started, 3),
            size_bytes=await anyio.to_thread.run_sync(disk_usage, self.target),
        )
        await anyio.to_thread.run_sync(write_manifest, environment)
        return environment

    async def _venv(self, steps: StepRunner) -> None:
        """The virtualenv; for a layer, one over its parent (see the module's docstring)."""
        if self.base is None:
            argv = [str(self.interpreter.executable), "-m", "venv", str(self.venv)]
            await steps.run("create the virtualenv", argv, cwd=self.target, env=self.env)
            return
        # The parent's interpreter makes it (its own base, one level more); pip comes from the
        # parent through the .pth, at the version the parent pinned.
        argv = [str(self.base.python), "-m", "venv", "--without-pip", str(self.venv)]
        await steps.run("create the layer's virtualenv", argv, cwd=self.target, env=self.env)
        base = self.base

        def link() -> None:
            parent_site = _site_packages(base.venv)
            line = f"import site; site.addsitedir({str(parent_site)!r})\n"
            (_site_packages(self.venv) / LAYER_PTH).write_text(line)
            repoint_scripts(base.venv / "bin", self.venv / "bin")

        await anyio.to_thread.run_sync(link)

    async def _project(self, progress: Callable[[str], None]) -> None:
        if self.recipe.copy_project:
            progress(f"[copy the project from {self.project}]")
            await anyio.to_thread.run_sync(_copy_project, self.project, self.project_copy)
        else:
            await anyio.to_thread.run_sync(lambda: self.project_copy.mkdir(exist_ok=True))

    async def _builder(self, steps: StepRunner) -> dict[str, str]:
        """The step variables, with a throw-away virtualenv of `build_requires` on PATH if any."""
        uv = _uv()
        bins = [Path(uv).parent] if uv else []
        if self.recipe.build_requires:
            builder = self.target / BUILDER
            await steps.run(
                "create the build tools' virtualenv",
                [str(self.interpreter.executable), "-m", "venv", str(builder)],
                cwd=self.target,
                env=self.env,
            )
            await steps.run(
                f"install the build tools ({', '.join(self.recipe.build_requires)})",
                [str(builder / "bin" / "python"), "-m", "pip", "install", *self.recipe.build_requires],
                cwd=self.target,
                env=self.env,
            )
            bins.insert(0, builder / "bin")
        env = step_environment(self.env, self.venv, home=self.target / ".home", extra_bins=tuple(bins))
        if self.recipe.index_date:
            env["UV_EXCLUDE_NEWER"] = self.recipe.index_date
            env["PIP_UPLOADED_PRIOR_TO"] = self.recipe.index_date
        env.update(self.recipe.env)
        return env

    async def _tools(self, steps: StepRunner) -> Path | None:
        """Installs the recipe's test tools the environment cannot import into `tools/`."""
        modules = _tool_modules(self.recipe.tools)
        if not modules:
            return None
        python = str(self.venv / "bin" / "python")
        output = await steps.run(
            "check codeloop's test tools",
            [python, "-I", "-c", _FIND_MISSING, *modules],
            cwd=self.target,
            env=self.env,
        )
        missing = [modules[name] for name in output.split() if name in modules]
        if not missing:
            return None
        tools = self.target / TOOLS
        step = f"install codeloop's test tools ({', '.join(missing)})"
        uv = _uv()
        try:
            if uv is None:
                raise BuildFailed("uv is not installed", step=step, log_tail="")
            argv = [uv, "pip", "install", "--compile-bytecode", "--target", str(tools), "--python", python]
            await steps.run(step, [*argv, *missing], cwd=self.target, env=self.env)
        except BuildFailed:
            # uv cannot serve every interpreter or index configuration (it ignores pip.conf): pip can.
            await anyio.to_thread.run_sync(shutil.rmtree, tools, True)
            argv = [python, "-m", "pip", "install", "--target", str(tools), *missing]
            await steps.run(f"{step} with pip", argv, cwd=self.target, env=self.env)
        site = await anyio.to_thread.run_sync(_site_packages, self.venv)
        await anyio.Path(site / TOOLS_PTH).write_text(f"{tools}\n")
        return tools


def repoint_scripts(source: Path, target: Path) -> None:
    """Copies the console scripts of `source` (a virtualenv's bin) into `target` with `target`'s
    interpreter in their shebang; scripts `target` has already, and binaries, are left."""
    python = target / "python"
    for script in sorted(source.iterdir()):
        if script.name.startswith(_NOT_REPOINTED) or not script.is_file() or (target / script.name).exists():
            continue
        try:
            first, _, rest = script.read_text(encoding="utf-8").partition("\n")
        except (UnicodeDecodeError, OSError):
            continue  # a binary: nothing to re-point
        if not first.startswith("#!") or "python" not in first:
            continue
        (target / script.name).write_text(f"#!{python}\n{rest}", encoding="utf-8")
        (target / script.name).chmod(0o755)


def write_manifest(environment: Environment) -> None:
    """Writes the manifest atomically: the environment exists for readers from this moment on."""
    manifest = environment.path / MANIFEST
    partial = manifest.with_suffix(".partial")
    # Unset fields left out: a manifest then reads in codeloop versions older than a field
    # (a plain environment's `base`, say), which share this cache on one machine.
    partial.write_text(environment.model_dump_json(indent=2, exclude_none=True))
    os.replace(partial, manifest)
