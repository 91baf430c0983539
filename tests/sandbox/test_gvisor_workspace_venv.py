"""A virtualenv inside the workspace in the gVisor sandbox: bound read-only from the host, not
copied into the workspace mirror (real runsc)."""

import os
import sys
from pathlib import Path

import anyio
import pytest

from sandbox.bundle import PAYLOAD_UID
from sandbox.limits import GvisorOptions
from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]

PAYLOAD_MB = 24
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


async def _make_venv(workspace: Path) -> Path:
    """A real virtualenv holding a package with a PAYLOAD_MB data file (non-zero bytes, so no
    copy can make it sparse)."""
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")])
    package = workspace / ".venv" / SITE / "weighty"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 42\n")
    (package / "data.bin").write_bytes(b"\x01" * (PAYLOAD_MB * 1024 * 1024))
    return workspace / ".venv"


def _mirror_used_bytes(work_dir: Path) -> int:
    """Host RAM held by the sandbox's workspace mirror: the tmpfs mounted under `work_dir`."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    (mirror,) = [m for m in mounts if m.startswith(str(work_dir))]
    st = os.statvfs(mirror)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


async def test_a_workspace_virtualenv_is_usable_read_only_and_not_copied_into_the_mirror(
    workspace: Path, gvisor_options: GvisorOptions, open_gvisor: OpenGvisor
) -> None:
    """Our choice: the workspace's virtualenv is bound read-only from the host, not mirrored. Its
    packages import; writes into it fail at both of its paths and never reach the host; the
    mirror's RAM stays far below the virtualenv's size; the rest of the workspace stays writable."""
    venv = await _make_venv(workspace)
    # Owned by the sandbox's user, so only the read-only mount can refuse its writes.
    for path in [venv, *venv.rglob("*")]:
        os.lchown(path, PAYLOAD_UID, PAYLOAD_UID)
    before = sorted(p.relative_to(venv) for p in venv.rglob("*"))
    write = (
        f"echo evil > .venv/{SITE}/weighty/__init__.py; touch .venv/planted {venv}/planted2;"
        "rm -rf .venv/bin; echo kept > made.txt"
    )
    async with open_gvisor() as sandbox:
        imported = await sandbox.exec(
            ["python", "-c", "import weighty, sys; print(weighty.VALUE, sys.prefix)"]
        )
        used = await anyio.to_thread.run_sync(_mirror_used_bytes, gvisor_options.work_dir)
        written = await sandbox.exec(["sh", "-c", write])
        reread = await sandbox.exec(["python", "-c", "import weighty; print(weighty.VALUE)"])
    assert imported.exit_code == 0, imported.stderr
    assert imported.stdout.split() == ["42", "/workspace/.venv"]
    assert used < PAYLOAD_MB * 1024 * 1024 // 8
    assert written.stderr.count("Read-only file system") >= 3, written.stderr
    assert reread.stdout == "42\n"
    assert (venv / SITE / "weighty" / "__init__.py").read_text() == "VALUE = 42\n"
    assert sorted(p.relative_to(venv) for p in venv.rglob("*")) == before
    assert (workspace / "made.txt").read_text() == "kept\n"


async def test_a_package_installed_into_the_workspace_virtualenv_between_commands_is_seen(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """Our choice: the virtualenv mount revalidates with the host (no share=container hint), so
    a `pip install` made on the host between two commands is importable by the next one."""
    venv = await _make_venv(workspace)
    code = "import added_later; print(added_later.X)"
    async with open_gvisor() as sandbox:
        missing = await sandbox.exec(["python", "-c", code])
        (venv / SITE / "added_later.py").write_text("X = 7\n")
        found = await sandbox.exec(["python", "-c", code])
    assert "ModuleNotFoundError" in missing.stderr
    assert found.exit_code == 0, found.stderr
    assert found.stdout == "7\n"
