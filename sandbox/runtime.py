"""Which host paths a sandbox shows read-only: the system directories and the Python runtime the
workspace's code needs, found from the workspace's own virtualenv and the interpreter it links to."""

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.environments.environment import Environment

# Shown whole: programs and libraries. Everything else of the host stays invisible.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only what dynamic linking, name lookup and TLS need from /etc: never shadow, ssh keys or the like.
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "ssl",
    "ca-certificates",
    "mime.types",
)
VENV_NAMES = (".venv", "venv", "env", ".env")


def workspace_venvs(workspace: Path) -> list[Path]:
    """Virtualenvs directly inside the workspace (a directory holding a pyvenv.cfg)."""
    return [workspace / name for name in VENV_NAMES if (workspace / name / "pyvenv.cfg").is_file()]


def mounted_venvs(workspace: Path) -> list[Path]:
    """The workspace virtualenvs the gVisor sandbox binds read-only from the host instead of
    mirroring: real directories only. A `.venv` symlink stays a symlink, resolved inside the
    sandbox, so it cannot expose a host directory outside the workspace."""
    return [venv for venv in workspace_venvs(workspace) if not venv.is_symlink()]


def _venv_home_prefix(venv: Path) -> Path | None:
    """The installation prefix of the interpreter a virtualenv was made from."""
    for line in (venv / "pyvenv.cfg").read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip()).resolve().parent
    python = venv / "bin" / "python"
    return python.resolve().parent.parent if python.exists() else None


def _interpreter_prefixes() -> list[Path]:
    """The interpreter running codeloop: the sandbox's supervisor runs on it."""
    prefixes = [Path(sys.base_prefix).resolve()]
    return prefixes


def runtime_paths(workspace: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """Host paths to show read-only at the same path inside the sandbox, outermost first.

    System directories that are symlinks (merged /usr) are recreated as symlinks instead.
    """
    wanted: list[Path] = [Path(d) for d in SYSTEM_DIRS if Path(d).is_dir() and not Path(d).is_symlink()]
    wanted += [Path("/etc", e) for e in ETC_ENTRIES if Path("/etc", e).exists()]
    wanted += _interpreter_prefixes()
    for venv in workspace_venvs(workspace):
        prefix = _venv_home_prefix(venv)
        if prefix is not None:
            wanted.append(prefix)
    wanted += [Path(p).resolve() for p in extra]
    return _outermost(wanted)


def _outermost(paths: list[Path]) -> list[Path]:
    """Drops paths already inside another wanted path; keeps a stable, parent-first order."""
    unique = sorted({p for p in paths if p.exists()}, key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(path == k or path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def system_symlinks() -> dict[str, str]:
    """Top-level system directories that are symlinks on the host (/bin -> usr/bin)."""
    links = {}
    for d in SYSTEM_DIRS:
        path = Path(d)
        if path.is_symlink():
            links[d] = str(path.readlink())
    return links


def python_for_supervisor() -> Path:
    """The real interpreter binary behind sys.executable (venvs link to it)."""
    return Path(sys.executable).resolve()


def environment_paths(environment: "Environment | None") -> tuple[Path, ...]:
    """Host paths a project environment needs shown read-only: its directory (virtualenv, tools,
    the build's copy of the project), a layer's parents' too, and its base interpreter's
    installation."""
    if environment is None:
        return ()
    return (*(env.path for env in environment.chain()), environment.base_prefix)


def environment_bins(environment: "Environment | None") -> list[str]:
    """The environment's bin, first on the commands' PATH (a layer's, then its parents')."""
    return [] if environment is None else [str(env.venv / "bin") for env in environment.chain()]


def environment_variables(environment: "Environment | None") -> dict[str, str]:
    """VIRTUAL_ENV for the commands of a sandbox with a project environment."""
    return {} if environment is None else {"VIRTUAL_ENV": str(environment.venv)}


def project_aliases(environment: "Environment | None", workspace: Path) -> tuple[Path, ...]:
    """Where the sandbox also shows the workspace: the environment's project path, unless that
    is the workspace itself."""
    if environment is None or environment.project_path is None or environment.project_path == workspace:
        return ()
    return (environment.project_path,)


def process_import_roots(environment: "Environment | None", workspace: Path) -> list[str]:
    """For the process backend: the workspace's directories the environment's editable install
    imports from (absolute), to put first on PYTHONPATH."""
    if environment is None or environment.project_path is None:
        return []
    return [str((workspace / root).resolve()) for root in environment.import_roots]


def product_mounts(environment: "Environment | None", workspace: Path) -> dict[str, bool]:
    """The environment's build products to show over the workspace at its project path: relative
    path -> is a directory. Left out: a path the workspace has itself (its own file wins), one
    whose parent directory the workspace lacks, and anything not under the project copy."""
    if environment is None or environment.project_path is None or not project_aliases(environment, workspace):
        return {}
    shown = {}
    for rel in environment.build_products:
        source = environment.project_path / rel
        target = workspace / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute() or target.exists() or target.is_symlink():
            continue
        if (
            not target.parent.is_dir()
            or target.parent.is_symlink()
            or source.is_symlink()
            or not source.exists()
        ):
            continue
        shown[rel] = source.is_dir()
    return shown
