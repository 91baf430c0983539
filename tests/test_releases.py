"""The released-project helper the real-project tests use (tests/support/releases.py): a cached
sdist is used only when its hash is the pinned one, nothing is fetched when it is, and the made
repository carries the release's date, so those tests run offline once the sdist is cached."""

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support.releases import Release, ReleaseUnavailable, project, sdist


def _tarball(files: dict[str, str], top: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of the test's own, and a pip that can reach no index: any download fails."""
    cache = tmp_path / "downloads"
    cache.mkdir()
    monkeypatch.setenv("CODELOOP_TEST_DOWNLOADS", str(cache))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-links"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return cache


def test_a_cached_sdist_with_the_pinned_hash_is_used_offline(offline: Path, tmp_path: Path) -> None:
    data = _tarball({"setup.py": "", "tests/test_a.py": "def test_a():\n    pass\n"}, "demo-1.0")
    (offline / "demo-1.0.tar.gz").write_bytes(data)
    release = Release(
        name="demo",
        version="1.0",
        filename="demo-1.0.tar.gz",
        sha256=hashlib.sha256(data).hexdigest(),
        released="2023-05-02T12:00:00+00:00",
    )
    assert sdist(release) == offline / "demo-1.0.tar.gz"
    tree = project(release, tmp_path / "demo")
    assert (tree / "tests" / "test_a.py").read_text() == "def test_a():\n    pass\n"
    dated = subprocess.run(
        ["git", "-C", str(tree), "log", "--format=%cI"], capture_output=True, text=True, check=True
    )
    assert dated.stdout.strip() == "2023-05-02T12:00:00+00:00"


def test_a_cached_file_with_another_hash_is_not_used(offline: Path) -> None:
    (offline / "demo-1.0.tar.gz").write_bytes(b"not the release")
    release = Release("demo", "1.0", "demo-1.0.tar.gz", "0" * 64, "2023-05-02T12:00:00+00:00")
    with pytest.raises(ReleaseUnavailable, match="cannot download demo-1.0.tar.gz with pip"):
        sdist(release)
