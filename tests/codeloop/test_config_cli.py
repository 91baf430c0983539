"""`codeloop config show|check` and the checks `run`, `submit` and `eval` make before starting
anything, through the real CLI in subprocesses (and a real `codeloop serve` for the task record)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from codeloop.testing import make_repo
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve
from tests.e2e.conftest import SCRIPTED
from tests.processes import processes_mentioning
from tests.support.repos import CALC

pytestmark = pytest.mark.anyio


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A private home, user configuration directory and temporary directory (where an embedded
    bus would keep its store), and no provider credentials."""
    env = codeloop_env(tmp_path / "home")
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OLLAMA_BASE_URL"):
        env.pop(variable, None)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return env | {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path / "tmp")} | extra


async def _codeloop(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([*CODELOOP, *args], env=env, cwd=cwd, check=False)


BAD = [
    (
        ["--model", "nosuchprovider:model-x"],
        "model 'nosuchprovider:model-x': unknown provider 'nosuchprovider'; use one of",
    ),
    (
        ["--model", "function:{tmp}/missing.py:fix"],
        "the file {tmp}/missing.py does not exist; give the path of a Python file (from --model)",
    ),
    (["--coder-model", f"function:{SCRIPTED}:nosuch"], "defines no 'nosuch'; its functions: fix,"),
    (
        ["--model", "anthropic:claude-sonnet-4-5"],
        "needs ANTHROPIC_API_KEY set in the environment of this command; set it, or choose another model",
    ),
    (["--max-steps", "-1"], "--max-steps: Input should be greater than or equal to 1 (got -1)"),
    (
        ["--model", f"function:{SCRIPTED}:fix", "--cost-budget", "2"],
        "--cost-budget needs a price for every model",
    ),
]


@pytest.mark.parametrize("command", ["run", "submit", "eval"])
@pytest.mark.slow
async def test_a_bad_name_is_a_usage_error_before_anything_starts(tmp_path: Path, command: str) -> None:
    """Issue acceptance: each bad name, and a malformed project file, exits 2 with one `error:` line
    naming the value and the fix; no NATS process, store, snapshot or home state is left (nothing
    was started)."""
    repo = make_repo(tmp_path / "repo", CALC)
    env = _env(tmp_path)
    head = {
        "run": ["run", "fix add", "--repo", str(repo)],
        "submit": ["submit", "fix add", "--repo", str(repo)],
        "eval": ["eval", str(tmp_path / "taskset"), "--out", str(tmp_path / "out")],
    }[command]
    took = []
    for args, fragment in BAD:
        if command == "eval" and args[0] in ("--max-steps",):
            continue  # eval takes budgets from the configuration only
        started = time.monotonic()
        result = await _codeloop(env, *head, *[a.format(tmp=tmp_path) for a in args])
        took.append(time.monotonic() - started)
        message = result.stderr.decode().strip()
        assert result.returncode == 2, message
        assert len(message.splitlines()) == 1 and message.startswith("error: "), message
        assert fragment.format(tmp=tmp_path) in message
    (repo / "codeloop.toml").write_text("[budgets]\nmax_stepz = 3\n")
    result = await _codeloop(env, *head, cwd=repo)  # eval reads the current directory's file
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        f"error: {repo / 'codeloop.toml'} line 2: unknown key 'budgets.max_stepz'; allowed here: max_steps, "
        "max_revisions, max_tool_failures, max_repeated_calls, deadline_s, max_tokens, max_cost_usd, attempts"
    )
    assert processes_mentioning(tmp_path) == []
    assert list((tmp_path / "tmp").iterdir()) == []  # an embedded bus would have its store here
    assert not (tmp_path / "home").exists() or list((tmp_path / "home").rglob("*")) == []
    assert not (tmp_path / "out").exists()
    sys.stderr.write(f"{command}: refused in {', '.join(f'{t:.2f}' for t in took)} s\n")


@pytest.mark.slow
async def test_config_show_reports_each_source_and_the_task_record_carries_the_result(tmp_path: Path) -> None:
    """Issue acceptance: the project file sets the coder, the user file the default; `config show
    --json` says where each came from; a flag overrides both; the task's record carries the models
    and budgets it ran with, and `trace` shows them."""
    repo = make_repo(tmp_path / "repo", CALC)
    (tmp_path / "xdg" / "codeloop").mkdir(parents=True)
    user = tmp_path / "xdg" / "codeloop" / "config.toml"
    user.write_text(f'[models]\ndefault = "function:{SCRIPTED}:explain"\n\n[budgets]\nmax_steps = 9\n')
    (repo / "models").mkdir()
    (repo / "models" / "scripted.py").write_text(SCRIPTED.read_text())
    (repo / "codeloop.toml").write_text(
        '[models]\ncoder = ["function:models/scripted.py:fix", "openai-chat:gpt-4o"]\n\n'
        '[model_settings."openai-chat:gpt-4o"]\nmax_attempts = 1\ntemperature = 0.2\n'
    )
    env = _env(tmp_path, OPENAI_API_KEY="sk-config-test-0123456789abcdef")
    explain, fix = (
        f"function:{SCRIPTED.resolve()}:explain",
        f"function:{(repo / 'models' / 'scripted.py').resolve()}:fix",
    )

    shown = await _codeloop(env, "config", "show", "--json", "--repo", str(repo))
    assert shown.returncode == 0, shown.stderr.decode()
    report = json.loads(shown.stdout)
    values = report["values"]
    assert (report["user_file"], report["project_file"]) == (str(user), str(repo / "codeloop.toml"))
    assert values["models.default"] == {"value": explain, "source": "user file", "where": str(user)}
    assert values["models.planner"]["source"] == "user file"
    assert values["models.coder"] == {
        "value": [fix, "openai-chat:gpt-4o"],
        "source": "project file",
        "where": str(repo / "codeloop.toml"),
    }
    assert values["model_settings.openai-chat:gpt-4o.temperature"]["value"] == 0.2
    assert values["budgets.max_steps"] == {"value": 9, "source": "user file", "where": str(user)}
    assert values["budgets.max_tokens"]["source"] == "default"
    assert report["credentials"] == {"OPENAI_API_KEY": "set", "OPENAI_BASE_URL": "not set"}
    assert "sk-config-test" not in shown.stdout.decode()
    checked = await _codeloop(env, "config", "check", "--repo", str(repo))
    assert checked.returncode == 0 and checked.stdout.decode().startswith("ok: 2 file(s)"), checked.stderr

    async with running_serve(tmp_path / "home"):  # the echo pipeline: the record is what matters here
        serve_env = env  # submit, watch and status find the serve through the home's serve.json
        records = []
        for flags in ([], ["--model", f"function:{SCRIPTED}:wrong_then_right", "--max-steps", "4"]):
            submitted = await _codeloop(serve_env, "submit", "explain add", "--repo", str(repo), *flags)
            assert submitted.returncode == 0, submitted.stderr.decode()
            task_id = submitted.stdout.decode().strip()
            with anyio.fail_after(60):
                await _codeloop(serve_env, "watch", task_id)
            status = await _codeloop(serve_env, "status", task_id, "--json")
            records.append(json.loads(status.stdout)["task"])
            traced = await _codeloop(serve_env, "trace", task_id, "--json")
            assert json.loads(traced.stdout)["configuration"]["models"] == records[-1]["models"]
            assert json.loads(traced.stdout)["configuration"]["budgets"] == records[-1]["budgets"]
        # Wide enough that no line wraps: the model's name holds the checkout's path, of any length.
        shown_tree = await _codeloop({**serve_env, "COLUMNS": "1000"}, "trace", task_id)
        assert f"coder: function:{SCRIPTED.resolve()}:wrong_then_right" in shown_tree.stdout.decode()
    plain, flagged = records
    assert (plain["models"]["default"], plain["models"]["planner"], plain["models"]["coder"]) == (
        explain,
        explain,
        fix,
    )
    assert plain["models"]["fallbacks"] == {"coder": ["openai-chat:gpt-4o"]}
    assert plain["models"]["options"]["openai-chat:gpt-4o"]["max_attempts"] == 1
    assert plain["budgets"]["max_steps"] == 9
    wrong = f"function:{SCRIPTED.resolve()}:wrong_then_right"
    assert (flagged["models"]["planner"], flagged["models"]["coder"], flagged["budgets"]["max_steps"]) == (
        wrong,
        wrong,
        4,
    )
    assert flagged["models"]["fallbacks"] == {}


@pytest.mark.slow
async def test_config_check_refuses_a_pipeline_that_cannot_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, CALC)
    (repo / "codeloop.toml").write_text(
        '[pipelines]\nbackwards = ["code:coder", "plan:planner"]\nlonely = ["code:coder", "review:nobody"]\n'
        'fine = ["plan:planner", "code:coder", "verify:verifier"]\n'
    )
    env = codeloop_env(tmp_path / "home")
    checked = await _codeloop(env, "config", "check", "--repo", str(repo))
    errors = checked.stderr.decode()
    assert checked.returncode == 2 and checked.stdout == b""
    assert "pipelines.backwards: " in errors and "cannot come after a code stage" in errors
    assert "pipelines.lonely: stage review:nobody: " in errors
    assert "pipelines.fine" not in errors
    (repo / "codeloop.toml").write_text(
        '[pipelines]\nfine = ["plan:planner", "code:coder", "verify:verifier"]\n'
    )
    checked = await _codeloop(env, "config", "check", "--repo", str(repo))
    assert checked.returncode == 0 and "1 pipeline(s)" in checked.stdout.decode(), checked.stderr
