"""Which commands the exec server runs without asking a human (tool_servers/exec/allowlist.py)."""

import pytest

from tool_servers.exec.allowlist import confirmation_action, why_not_allowed

ROUTINE = [
    ["python", "-m", "pytest", "-q"],
    ["python3.11", "-c", "print(1)"],
    ["pytest", "tests/test_x.py::test_y"],
    ["ruff", "check", "."],
    ["ls", "-la", "src"],
    ["grep", "-rn", "def main", "src"],
    ["find", ".", "-name", "*.py"],
    ["sed", "-n", "1,20p", "app.py"],
    ["git", "status"],
    ["git", "log", "--oneline", "-5"],
    ["git", "diff", "HEAD~1"],
]
ASKED = {
    "rm -rf build": (["rm", "-rf", "build"], "rm is not on the exec allowlist"),
    "a shell": (["bash", "-c", "ls"], "bash is not on the exec allowlist"),
    "pip install": (["pip", "install", "requests"], "pip is not on the exec allowlist"),
    "program by path": (["./run.sh"], "named by path"),
    "venv program by path": ([".venv/bin/python", "-V"], "named by path"),
    "find -delete": (["find", ".", "-name", "*.pyc", "-delete"], "find -delete"),
    "find -exec": (["find", ".", "-exec", "rm", "{}", ";"], "find -exec"),
    "sed -i": (["sed", "-i", "s/a/b/", "app.py"], "sed -i"),
    "sed -ni bundled": (["sed", "-ni", "s/a/b/p", "app.py"], "sed -i"),
    "sed --in-place": (["sed", "--in-place=.bak", "s/a/b/", "app.py"], "sed -i"),
    "git commit": (["git", "commit", "-am", "x"], "git commit is not a read-only"),
    "git -c": (["git", "-c", "core.pager=evil", "log"], "options before the subcommand"),
    "git diff --output": (["git", "diff", "--output=patch.diff"], "--output writes a file"),
}


@pytest.mark.parametrize("argv", ROUTINE, ids=[" ".join(a) for a in ROUTINE])
def test_routine_commands_of_a_python_edit_test_loop_run_without_asking(argv: list[str]) -> None:
    """Allowlisted programs (python tooling, read-only file and git commands) run at once."""
    assert why_not_allowed(argv) is None
    assert confirmation_action(argv) is None


@pytest.mark.parametrize(("argv", "reason"), ASKED.values(), ids=list(ASKED))
def test_other_commands_and_writing_arguments_need_a_human(argv: list[str], reason: str) -> None:
    """A command outside the allowlist, or a routine program told to write, asks first; the prompt shows the command."""
    assert reason in (why_not_allowed(argv) or "")
    action = confirmation_action(argv) or ""
    assert action.startswith(f"run `{argv[0]}") and "in the sandbox" in action


def test_the_prompt_shows_the_command_as_a_shell_would_and_stays_short() -> None:
    """Our choice: the human sees the exact argv, quoted, capped at 300 characters."""
    assert "run `sh -c 'rm -rf /workspace/*'`" in (
        confirmation_action(["sh", "-c", "rm -rf /workspace/*"]) or ""
    )
    assert len(confirmation_action(["rm", *["x" * 50] * 20]) or "") < 400
