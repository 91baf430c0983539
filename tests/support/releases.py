"""Real projects for the tests that need one: a released source distribution from the package
index, fetched at test time with pip, cached and checked by its sha256, made into a git repository
in the test's own directory.

The repository holds none of another project's code: a test names a release (`FLASK`) and gets
its sdist (Flask's and Requests' hold their tests) from the index pip is configured with. The
cache is `.pytest_cache/codeloop-releases/` in this checkout (or `$CODELOOP_TEST_DOWNLOADS`),
never the user's codeloop cache nor `$XDG_CACHE_HOME`: once a release is there, the tests that
use it run offline. A file whose hash is not the pinned one is never used.
"""

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Release:
    """One release's source distribution, as published."""

    name: str
    version: str
    filename: str
    sha256: str
    released: str
    """The release's date (ISO 8601): the made repository's commit carries it, so that loose
    requirements resolve as of the release (`[environment] index_date = "git"`)."""


FLASK = Release(
    name="flask",
    version="2.2.5",
    filename="Flask-2.2.5.tar.gz",
    sha256="edee9b0a7ff26621bd5a8c10ff484ae28737a2410d99b0bb9a6850c7fb977aa0",
    released="2023-05-02T12:00:00+00:00",
)
"""Flask 2.2.5 (setup.py, tests and requirement files in its sdist). An older 2.2 would build with
a setuptools of its date, before editable installs (PEP 660) came in setuptools 64."""


class ReleaseUnavailable(RuntimeError):
    """The sdist is neither cached nor downloadable, or what was downloaded is not the release."""


def cache_dir() -> Path:
    return Path(os.environ.get("CODELOOP_TEST_DOWNLOADS") or ROOT / ".pytest_cache" / "codeloop-releases")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sdist(release: Release) -> Path:
    """The release's sdist in the cache, downloaded with pip if it is not there yet.

    Raises:
        ReleaseUnavailable: pip could not get it (offline and not cached), or its hash differs.
    """
    cached = cache_dir() / release.filename
    if cached.is_file() and _sha256(cached) == release.sha256:
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
            + ["--no-build-isolation", "-d", tmp, f"{release.name}=={release.version}"],
            capture_output=True,
            text=True,
        )
        got = Path(tmp) / release.filename
        if done.returncode != 0 or not got.is_file():
            raise ReleaseUnavailable(
                f"cannot download {release.filename} with pip (and it is not cached in {cached.parent}): "
                f"{done.stderr.strip()[-800:]}"
            )
        if (digest := _sha256(got)) != release.sha256:
            raise ReleaseUnavailable(f"{release.filename} has sha256 {digest}, not {release.sha256}")
        os.replace(got, cached)  # atomic: a concurrent worker sees the whole file or none
    return cached


def project(release: Release, target: Path) -> Path:
    """The release's source tree at `target`, a git repository of one commit dated as the release."""
    target.mkdir(parents=True)
    with tarfile.open(sdist(release)) as archive:
        top = f"{Path(release.filename).name.removesuffix('.tar.gz')}/"
        for member in archive.getmembers():
            if member.name.startswith(top):
                member.name = member.name.removeprefix(top)
                archive.extract(member, target, filter="data")
    dated = {**os.environ, "GIT_AUTHOR_DATE": release.released, "GIT_COMMITTER_DATE": release.released}
    git = ["git", "-C", str(target), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", f"{release.name} {release.version}"], check=True, env=dated)
    return target
