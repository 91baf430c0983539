"""Finding the interpreter a recipe asks for on this machine.

Where it looks, in order: the configured interpreters (`EnvironmentSettings.python_paths`), the
interpreter running codeloop (preferred whenever it satisfies the request), pyenv's versions
(`pyenv root`/versions/*), `uv python find`, and `python3.X` on PATH. pyenv's shims are skipped:
a shim of a version that is not the active one fails when run. A request nothing satisfies is
`PythonNotFound`, naming the version and how to install it.

Answers are cached for the life of the process: one lookup costs a few subprocesses (pyenv,
uv, the chosen interpreter), and an exec server asks for every task.
"""

import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from sandbox.errors import PythonNotFound, RecipeInvalid

QUERY_TIMEOUT_S = 20.0
_QUERY = "import json, sys; print(json.dumps([sys.version.split()[0], sys.base_prefix, sys.executable]))"
_VERSION_DIR = re.compile(r"^\d+\.\d+(\.\d+)?$")
_SPECIFIER_CHARS = set("<>=!~,")
_MINORS = [f"3.{minor}" for minor in range(16, 5, -1)]


@dataclass(frozen=True)
class Interpreter:
    """A Python found on the machine."""

    executable: Path
    """The binary to create virtualenvs with (symlinks resolved)."""
    version: str
    """Its full version, e.g. `3.9.18`."""
    base_prefix: Path
    """Its installation prefix (sys.base_prefix): what a sandbox must show for it to run."""


def satisfies(version: str, request: str | None) -> bool:
    """Whether a full version meets a request: None (anything), a version prefix (`3.9`) or a specifier."""
    if request is None:
        return True
    try:
        if _SPECIFIER_CHARS & set(request):
            return Version(version) in SpecifierSet(request, prereleases=True)
        wanted = request.split(".")
        return version.split(".")[: len(wanted)] == wanted
    except (InvalidVersion, InvalidSpecifier):
        return False


def normalize_request(request: str | None) -> str | None:
    """A recipe's Python as a version prefix, a specifier, a path, or None (anything).

    Accepts what `.python-version` and configuration files hold: `3.9`, `3.9.18`, `python3.9`,
    `cpython-3.9`, `system` (None), `>=3.8`; an absolute path stays a path.

    Raises:
        RecipeInvalid: the request is none of those.
    """
    if request is None or not request.strip() or request.strip() == "system":
        return None
    text = request.strip()
    if text.startswith("/"):
        return text
    if _SPECIFIER_CHARS & set(text):
        try:
            SpecifierSet(text)
        except InvalidSpecifier as exc:
            raise RecipeInvalid(
                f"Python request {request!r} is not a valid version specifier: {exc}"
            ) from exc
        return text.replace(" ", "")
    match = re.search(r"(\d+(?:\.\d+){0,2})$", text)
    if match is None:
        raise RecipeInvalid(
            f"Python request {request!r} is not a version (3.9), a specifier (>=3.8) or an interpreter path"
        )
    return match.group(1)


@functools.lru_cache(maxsize=64)
def query_interpreter(executable: str) -> Interpreter | None:
    """Runs the interpreter once to learn its version and prefix; None when it does not run."""
    try:
        done = subprocess.run(
            [executable, "-I", "-c", _QUERY],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        version, prefix, exe = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if done.returncode != 0:
        return None
    return Interpreter(Path(exe or executable).resolve(), version, Path(prefix))


def running_interpreter() -> Interpreter:
    """The interpreter running codeloop (its base installation, not codeloop's virtualenv)."""
    version = ".".join(str(part) for part in sys.version_info[:3])
    return Interpreter(Path(sys.executable).resolve(), version, Path(sys.base_prefix).resolve())


@functools.lru_cache(maxsize=1)
def pyenv_versions_dir() -> Path | None:
    """`$(pyenv root)/versions` when pyenv is installed (else `~/.pyenv/versions` if it exists)."""
    pyenv = shutil.which("pyenv")
    root: Path | None = None
    if pyenv is not None:
        try:
            done = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
            root = Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired):
            root = None
    root = root or Path.home() / ".pyenv"
    versions = root / "versions"
    return versions if versions.is_dir() else None


def _pyenv_candidates() -> Iterator[tuple[str, Path]]:
    """(version, binary) of each pyenv version, newest first; the version from its directory name."""
    versions = pyenv_versions_dir()
    if versions is None:
        return
    found = []
    for entry in versions.iterdir():
        binary = entry / "bin" / "python"
        if _VERSION_DIR.match(entry.name) and binary.exists():
            found.append((Version(entry.name), binary))
    for version, binary in sorted(found, reverse=True):
        yield str(version), binary


def _uv_candidate(request: str) -> Path | None:
    """What `uv python find REQUEST` answers (it also knows uv-managed interpreters)."""
    try:
        import uv  # the `uv` package ships the binary

        binary = uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        binary = shutil.which("uv")
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, "python", "find", "--no-python-downloads", request],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = done.stdout.strip()
    return Path(path) if done.returncode == 0 and path else None


def _path_candidates(request: str | None) -> Iterator[Path]:
    """`python3.X` programs on PATH (pyenv shims left out), the likeliest minor first."""
    minors = [m for m in _MINORS if request is None or satisfies(f"{m}.99", request) or satisfies(m, request)]
    for minor in minors:
        found = shutil.which(f"python{minor}")
        if found and "/shims/" not in found:
            yield Path(found)


def _suggestion(request: str) -> str:
    """The version to name in `pyenv install X` for a request."""
    if _SPECIFIER_CHARS & set(request):
        for minor in _MINORS:
            if satisfies(f"{minor}.0", request) or satisfies(f"{minor}.99", request):
                return minor
        return request
    return ".".join(request.split(".")[:2])


@functools.lru_cache(maxsize=64)
def find_python(request: str | None, *, configured: Sequence[Path] = ()) -> Interpreter:
    """The interpreter for a recipe's Python request (see `normalize_request`).

    Raises:
        RecipeInvalid: the request cannot be read.
        PythonNotFound: nothing on this machine satisfies it; the message says how to install it.
    """
    request = normalize_request(request)
    if request is not None and request.startswith("/"):
        found = query_interpreter(request)
        if found is None:
            raise PythonNotFound(
                f"the configured Python {request} does not exist or does not run", requested=request
            )
        return found
    for path in configured:
        found = query_interpreter(str(path))
        if found is not None and satisfies(found.version, request):
            return found
    running = running_interpreter()
    if satisfies(running.version, request):
        return running
    for version, binary in _pyenv_candidates():
        if satisfies(version, request) and (found := query_interpreter(str(binary))) is not None:
            return found
    if request is not None and (path := _uv_candidate(request)) is not None:
        found = query_interpreter(str(path))
        if found is not None and satisfies(found.version, request):
            return found
    for path in _path_candidates(request):
        found = query_interpreter(str(path))
        if found is not None and satisfies(found.version, request):
            return found
    assert request is not None  # the running interpreter satisfies None
    versions = pyenv_versions_dir()
    looked = [
        *(f"{p}" for p in configured),
        f"the running interpreter ({running.version})",
        f"pyenv versions in {versions}" if versions else "pyenv (not installed)",
        "`uv python find`",
        "python3.X on PATH",
    ]
    wanted = _suggestion(request)
    raise PythonNotFound(
        f"Python {request} is not installed here (looked at: {', '.join(looked)}); install it with "
        f"`pyenv install {wanted}` or `uv python install {wanted}`, or set [environment] python to an "
        "interpreter's path",
        requested=request,
    )
