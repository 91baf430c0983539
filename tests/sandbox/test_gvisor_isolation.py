"""What a command in the gVisor sandbox cannot see or reach."""

import socket
from pathlib import Path

import anyio
import pytest

from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]


async def test_writes_outside_the_workspace_fail_and_tmp_is_private(open_gvisor: OpenGvisor) -> None:
    """The root and the runtime are read-only; /tmp is a private tmpfs, not the host's."""
    script = (
        "for p in /usr/evil /etc/evil /evil /root/evil; do (echo x > $p) 2>/dev/null && echo WROTE $p; done;"
        "echo private > /tmp/codeloop-private-marker; echo done"
    )
    async with open_gvisor() as sandbox:
        result = await sandbox.exec(["sh", "-c", script])
    assert result.exit_code == 0 and "done" in result.stdout
    assert "WROTE" not in result.stdout
    for path in ("/tmp/codeloop-private-marker", "/usr/evil", "/evil"):
        assert not await anyio.Path(path).exists()


async def test_host_files_outside_the_mounts_and_symlinks_to_them_are_not_readable(
    tmp_path: Path, workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """Host files outside the mounts stay invisible, also through a symlink in the workspace."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    (workspace / "link").symlink_to(secret)
    (workspace / "shadow").symlink_to("/etc/shadow")
    async with open_gvisor() as sandbox:
        direct = await sandbox.exec(["cat", str(secret)])
        through_link = await sandbox.exec(["cat", "link"])
        shadow = await sandbox.exec(["cat", "shadow", "/etc/shadow", "/root/.bash_history"])
    assert secret.read_text() == "TOP-SECRET-VALUE"
    for result in (direct, through_link, shadow):
        assert result.exit_code != 0
        assert "TOP-SECRET" not in result.stdout
    assert "No such file" in through_link.stderr
    assert shadow.stdout == ""


async def test_a_variable_of_the_callers_environment_is_not_visible(
    monkeypatch: pytest.MonkeyPatch, open_gvisor: OpenGvisor
) -> None:
    """A clean environment; only variables passed to exec reach the command."""
    monkeypatch.setenv("CODELOOP_CALLER_SECRET", "leaked-value")
    async with open_gvisor() as sandbox:
        result = await sandbox.exec(["env"], env={"PASSED": "yes"})
    assert result.exit_code == 0
    assert "leaked-value" not in result.stdout and "CODELOOP_CALLER_SECRET" not in result.stdout
    assert "PASSED=yes" in result.stdout


async def test_a_tcp_connect_to_a_host_loopback_listener_fails(open_gvisor: OpenGvisor) -> None:
    """No network; a service listening on the host's 127.0.0.1 is unreachable."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    print('CONNECTED')\n"
            "except OSError as exc:\n"
            "    print('refused', exc)\n"
        )
        async with open_gvisor() as sandbox:
            result = await sandbox.exec(["python3", "-c", code])
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached the host listener
    assert "refused" in result.stdout and "CONNECTED" not in result.stdout


async def test_commands_run_unprivileged_and_cannot_reach_the_supervisor(open_gvisor: OpenGvisor) -> None:
    """Our choice: only the supervisor (pid 1) is root; a command can neither write to its
    channel nor signal it, so it cannot forge a result or end the sandbox."""
    script = "id -u; echo forged > /proc/1/fd/1; kill -9 1; echo made > mine.txt"
    async with open_gvisor() as sandbox:
        result = await sandbox.exec(["sh", "-c", script])
        after = await sandbox.exec(["cat", "mine.txt"])
    assert result.stdout.splitlines()[0] == "1000"
    assert "Permission denied" in result.stderr and "not permitted" in result.stderr
    assert after.stdout == "made\n"


async def test_writes_under_git_and_codeloop_do_not_reach_the_host_workspace(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """Our choice: a hook planted in .git/ would run on the host at the next git call, and
    .codeloop/ holds the audit log, so a command's writes there are undone; other writes land."""
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / ".codeloop").mkdir()
    (workspace / ".codeloop" / "audit.jsonl").write_text("record\n")
    script = (
        "echo evil > .git/hooks/pre-commit; echo evil >> .git/config; rm .codeloop/audit.jsonl;"
        "echo kept > result.txt"
    )
    async with open_gvisor() as sandbox:
        first = await sandbox.exec(["sh", "-c", script])
        second = await sandbox.exec(["sh", "-c", "cat .git/config .codeloop/audit.jsonl; ls .git/hooks"])
    assert first.exit_code == 0
    assert (workspace / "result.txt").read_text() == "kept\n"
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert (workspace / ".codeloop" / "audit.jsonl").read_text() == "record\n"
    assert "evil" not in second.stdout and "record" in second.stdout
