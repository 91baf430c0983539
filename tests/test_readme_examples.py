"""The README's own shell examples, run as a newcomer runs them on a fresh clone: each command is
read from README.md (not copied here), its placeholders (`DIR`, `/path/to/repo`, `TASK_ID`,
`@issue.md`) filled with real paths, and run through a shell with `.venv/bin` on PATH.

Left out, each for its reason: `make run` / `make test` (the set-up itself and the whole suite),
commands that need a hosted LLM and its key (`--model openai-chat:...`), `--apply` of a real
model's patch, and the MCP client configurations (JSON/TOML for other programs to read)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.codeloop.serve_support import codeloop_env, running_serve

REPO_ROOT = Path(__file__).parents[1]
README = REPO_ROOT / "README.md"

pytestmark = pytest.mark.slow


def readme_commands(containing: str) -> list[str]:
    """The commands of the README's `sh` block that contains `containing`: comments dropped,
    continuation lines joined, `[--optional]` brackets left out (the command as typed plainly)."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    found = [block for block in blocks if containing in block]
    assert len(found) == 1, f"README has {len(found)} sh blocks containing {containing!r}"
    joined = found[0].replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        command = re.sub(r"\s+#\s.*$", "", line).strip()
        command = re.sub(r"\s*\[[^\]]*\]", "", command)
        if command:
            commands.append(re.sub(r"\s+", " ", command))
    return commands


def shell(command: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`command` through bash, as typed at a prompt, with this checkout's `codeloop` on PATH."""
    path = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _example_project(tmp_path: Path) -> Path:
    """A copy of the README's example project, as a git repository of its own."""
    project = tmp_path / "bugfix"
    shutil.copytree(
        REPO_ROOT / "examples" / "bugfix", project, ignore=shutil.ignore_patterns(".*cache*", "__pycache__")
    )
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    return project


def test_the_sandbox_examples_behave_like_the_command(tmp_path: Path) -> None:
    """README "Running code in the sandbox": pytest's own output and status (the example project
    fails two tests), in the workspace's environment; `--version` prints the version."""
    commands = readme_commands("codeloop sandbox exec --workspace DIR -- python -m pytest -q")
    assert commands[0] == "codeloop sandbox exec --workspace DIR -- python -m pytest -q"
    assert commands[-1] == "codeloop --version"
    project = _example_project(tmp_path)
    env = codeloop_env(tmp_path / "home") | {"CODELOOP_CACHE_DIR": str(tmp_path / "cache")}
    tested = shell(commands[0].replace("DIR", str(project)), cwd=tmp_path, env=env)
    version = shell(commands[-1], cwd=tmp_path, env=env)
    assert tested.returncode == 1, tested.stdout + tested.stderr
    assert re.search(r"^2 failed, 15 passed in [\d.]+s$", tested.stdout, re.M), tested.stdout[-1000:]
    assert "FAILED tests/test_discounts.py::test_discount_applies_at_the_tier_minimum" in tested.stdout
    assert version.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\S*\n", version.stdout)


def test_the_example_task_with_the_scripted_model_ends_done_with_a_verified_patch(tmp_path: Path) -> None:
    """README "A real task, no LLM": the bug report, the example project, the scripted model; run
    from the repository's root as shown. Its live view shows no failed tool look-ups."""
    (command,) = readme_commands("--repo examples/bugfix --mode execute --model function:")
    env = codeloop_env(tmp_path / "home")
    env.pop("CODELOOP_MODEL", None)
    done = shell(command, cwd=REPO_ROOT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[0].endswith(": done")
    assert "verification: passed" in done.stdout and "invoicing/discounts.py" in done.stdout
    assert " error" not in done.stderr, done.stderr  # e.g. `search.find_symbol error` for a file name
    assert shell("git status --porcelain examples/bugfix", cwd=REPO_ROOT, env=env).stdout == ""


def test_search_examples_find_the_file_a_bug_report_is_about(tmp_path: Path, private_cache_dir: Path) -> None:
    """README "Searching code": index, a query, and a bug report as the query (`@issue.md`)."""
    commands = readme_commands("codeloop index /path/to/repo")
    project = _example_project(tmp_path)
    shutil.copyfile(REPO_ROOT / "examples" / "bugfix-report.md", tmp_path / "issue.md")
    env = codeloop_env(tmp_path / "home") | {"CODELOOP_CACHE_DIR": str(private_cache_dir)}
    files = sum(1 for p in project.rglob("*") if p.is_file() and ".git" not in p.relative_to(project).parts)
    runnable = [c for c in commands if "--run-examples" not in c]  # its sandboxed run: tested in tests/search
    assert len(runnable) == 3
    results = [shell(c.replace("/path/to/repo", str(project)), cwd=tmp_path, env=env) for c in runnable]
    for command, result in zip(runnable, results, strict=True):
        assert result.returncode == 0, (command, result.stderr[-2000:])
    assert results[0].stdout.startswith(f"indexed {project}: {files} files, "), results[0].stdout
    by_file = [line.split()[0] for line in results[2].stdout.splitlines() if not line.startswith(" ")]
    assert by_file[0].startswith("invoicing/discounts.py"), results[2].stdout


def test_serve_submit_watch_trace_status_and_schema_as_the_readme_shows(tmp_path: Path) -> None:
    """README "The bus and the actors": a task submitted to `codeloop serve`, followed by id."""
    commands = readme_commands("codeloop serve  ")
    assert commands[0] == "codeloop serve"
    home, repo = tmp_path / "home", _example_project(tmp_path)
    env = codeloop_env(home)
    env.pop("CODELOOP_MODEL", None)

    async def main() -> list[subprocess.CompletedProcess[str]]:
        with anyio.fail_after(400):
            async with running_serve(home, "--pipeline", "auto", "--no-mcp"):
                done = [await anyio.to_thread.run_sync(lambda: shell(commands[1], cwd=repo, env=env))]
                task_id = done[0].stdout.strip()
                for command in commands[2:]:
                    line = command.replace("TASK_ID", task_id)
                    done.append(
                        await anyio.to_thread.run_sync(lambda line=line: shell(line, cwd=repo, env=env))
                    )
                return done

    submitted, watched, traced, status, schema = anyio.run(main, backend="asyncio")
    for done in (submitted, watched, traced, status, schema):
        assert done.returncode == 0, done.stderr[-2000:]
    task_id = submitted.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", task_id)
    listed = [line.split("\t") for line in status.stdout.splitlines()]  # piped: tab-separated rows
    assert any(task_id in row and "diagnosed" in row for row in listed), status.stdout
    assert task_id in traced.stdout and watched.stdout.strip()
    schema_file = json.loads((repo / "codeloop-schema.json").read_text())
    assert {"envelope", "payloads"} <= set(schema_file) and "task_submitted" in schema_file["payloads"]


def test_the_commands_are_found_where_the_readme_says(tmp_path: Path) -> None:
    """Every `codeloop ...` command of the README's shell blocks names a command `--help` knows."""
    known = {line.split()[0] for line in _help(tmp_path).splitlines() if line.startswith("  ")}
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    used = {m for block in blocks for m in re.findall(r"^codeloop (\w[\w-]*)", block, re.M)}
    assert used and used - {"--version"} <= known, used - known


def _help(tmp_path: Path) -> str:
    return shell("codeloop --help", cwd=tmp_path, env=dict(os.environ)).stdout
