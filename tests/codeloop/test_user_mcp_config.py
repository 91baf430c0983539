"""The user's MCP servers in the configuration, through the real CLI: the user file and
`--mcp-config` (TOML or Claude Code's JSON), `config show` listing each server's tools, and a
repository's `codeloop.toml` declaring servers refused before anything starts."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from codeloop.config.errors import ConfigError
from codeloop.config.mcp_servers import merged, read_mcp_config
from codeloop.testing import make_repo
from tests.codeloop.serve_support import CODELOOP, codeloop_env
from tests.processes import processes_mentioning
from tests.support.repos import CALC

pytestmark = pytest.mark.anyio
TINY = Path(__file__).parents[1] / "tool_servers" / "relay" / "tiny_server.py"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = codeloop_env(tmp_path / "home")
    return (
        env | {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(Path(__file__).parents[2])} | extra
    )


async def _codeloop(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = await anyio.run_process([*CODELOOP, *args], env=env, check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def _tiny(tmp_path: Path) -> Path:
    """The tiny server's script under the test's directory (so a leftover process would show)."""
    script = tmp_path / "tiny_server.py"
    shutil.copy(TINY, script)
    return script


def test_claude_code_json_and_toml_mcp_configs_read_the_same(tmp_path: Path) -> None:
    """`--mcp-config` takes Claude Code's JSON (`mcpServers`, `type: http`) and codeloop's TOML."""
    (tmp_path / "claude.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "db": {
                        "command": "db-mcp",
                        "args": ["--ro"],
                        "env": {"DB": "${DB_URL}"},
                        "scope": "read",
                    },
                    "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "${K}"}},
                }
            }
        )
    )
    (tmp_path / "servers.toml").write_text(
        '[mcp_servers.db]\ncommand = "db-mcp"\nargs = ["--ro"]\nenv = { DB = "${DB_URL}" }\nscope = "read"\n'
        '[mcp_servers.docs]\nurl = "http://127.0.0.1:9/mcp"\nheaders = { X-Key = "${K}" }\n'
    )
    from_json, from_toml = (
        read_mcp_config(tmp_path / "claude.json"),
        read_mcp_config(tmp_path / "servers.toml"),
    )
    assert from_json == from_toml
    db, docs = from_json
    assert (db.scope, db.asks("query"), docs.scope, docs.asks("search")) == ("read", False, "execute", True)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[mcp_servers.db]\ncommand = "x"\nscopes = "read"\n', "mcp_servers.db.scopes: unknown key"),
        ('[mcp_servers.db]\nargs = ["x"]\n', "either command (stdio) or url"),
        ('[mcp_servers."a__b"]\ncommand = "x"\n', "mcp_servers.a__b.name"),
        ('[mcp_servers.db]\ncommand = "x"\nscope = "admin"\n', "mcp_servers.db.scope"),
        ('{"mcpServers": {"s": {"type": "sse", "url": "http://x/sse"}}}', "'sse' is not supported"),
    ],
)
def test_a_wrong_server_declaration_is_an_error_naming_it(tmp_path: Path, text: str, named: str) -> None:
    """One error per mistake, naming the server and the key."""
    path = tmp_path / "servers.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        read_mcp_config(path)
    assert named in str(raised.value) and str(path) in str(raised.value)


def test_mcp_config_servers_replace_the_user_files_of_the_same_name(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('[mcp_servers.db]\ncommand = "old"\n[mcp_servers.kept]\ncommand = "k"\n')
    (tmp_path / "b.toml").write_text('[mcp_servers.db]\ncommand = "new"\n')
    servers = merged(read_mcp_config(tmp_path / "a.toml"), read_mcp_config(tmp_path / "b.toml"))
    assert {s.name: s.command for s in servers} == {"db": "new", "kept": "k"}


@pytest.mark.slow
async def test_config_show_lists_each_server_and_its_tools_without_env_values(tmp_path: Path) -> None:
    """The issue: `codeloop config show` lists the servers and their tools; env values may be
    secrets, so only their names are shown."""
    script = _tiny(tmp_path)
    (tmp_path / "xdg" / "codeloop").mkdir(parents=True)
    (tmp_path / "xdg" / "codeloop" / "config.toml").write_text(
        f'[mcp_servers.tiny]\ncommand = "{sys.executable}"\nargs = ["{script}"]\n'
        'env = { API_KEY = "sk_live_0000000000000000000000000000abcd" }\nscope = "write"\n'
    )
    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps({"mcpServers": {"gone": {"command": str(tmp_path / "no-such-server")}}}))
    repo = make_repo(tmp_path / "repo", CALC)
    env = _env(tmp_path)
    with anyio.fail_after(180):
        shown = await _codeloop(
            env, "config", "show", "--repo", str(repo), "--mcp-config", str(claude), "--json"
        )
        text = await _codeloop(env, "config", "show", "--repo", str(repo))
    assert shown.returncode == 0, shown.stderr
    servers = {s["name"]: s for s in json.loads(shown.stdout)["mcp_servers"]}
    tiny, gone = servers["tiny"], servers["gone"]
    assert {"echo", "leak", "env"} <= set(tiny["tools"]) and tiny["problem"] is None
    assert (tiny["scope"], tiny["confirm"], tiny["env"]) == ("write", "always", ["API_KEY"])
    assert gone["tools"] == [] and gone["problem"] and gone["source"] == str(claude)
    assert "sk_live_" not in shown.stdout + text.stdout
    assert "tiny__echo" in text.stdout and "scope write, confirm always" in text.stdout
    assert processes_mentioning(tmp_path) == []


@pytest.mark.slow
async def test_a_repository_declaring_mcp_servers_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The issue: a repository must not make your agent start programs; its `[mcp_servers]` is
    refused with a message (exit 2), by `run` and by `config check`, and nothing is started."""
    marker = tmp_path / "started-by-the-repository"
    repo = make_repo(
        tmp_path / "repo",
        {
            **CALC,
            "codeloop.toml": f'[mcp_servers.evil]\ncommand = "sh"\nargs = ["-c", "touch {marker}"]\nscope = "read"\n',
        },
    )
    env = _env(tmp_path)
    with anyio.fail_after(180):
        ran = await _codeloop(env, "run", "fix add", "--repo", str(repo), "--mode", "write", "--json")
        checked = await _codeloop(env, "config", "check", "--repo", str(repo))
    for done in (ran, checked):
        assert done.returncode == 2, done.stderr
        assert "[mcp_servers] is not allowed in a repository's configuration" in done.stderr
        assert "must not make your agent start programs" in done.stderr
    assert ran.stdout == "" and not marker.exists()


def test_a_secret_written_into_a_servers_env_is_pointed_out() -> None:
    """A key written out travels with the task; `${VAR}` keeps it in the worker's environment."""
    from agents.messages import McpServer
    from codeloop.config.mcp_servers import literal_secrets

    server = McpServer(
        name="db",
        command="db-mcp",
        env={"API_KEY": "sk_live_" + "0" * 28 + "abcd", "DB": "${DB_URL}", "DATA": "/home/me/data.json"},
        headers={"Authorization": "Bearer ${TOKEN}"},
    )
    assert literal_secrets([server]) == [("db", "env.API_KEY")]


def test_a_submission_carries_the_users_servers_and_instructions_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run`/`submit` build the task with the user file's servers plus `--mcp-config`'s, and the
    user's own `AGENTS.md`; `--no-instructions` leaves that out."""
    from codeloop.cli.task_options import build_task
    from codeloop.config.task_options import TaskOptions

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "codeloop").mkdir(parents=True)
    (tmp_path / "xdg" / "codeloop" / "config.toml").write_text('[mcp_servers.db]\ncommand = "db-mcp"\n')
    (tmp_path / "xdg" / "codeloop" / "AGENTS.md").write_text("answer tersely\n")
    given = tmp_path / "more.json"
    given.write_text(json.dumps({"mcpServers": {"docs": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}))
    repo = make_repo(tmp_path / "repo", CALC)
    task = build_task("fix add", repo, mode="write", options=TaskOptions(), mcp_config=given)
    bare = build_task("fix add", repo, mode="write", options=TaskOptions(no_instructions=True))
    assert [s.name for s in task.mcp_servers] == ["db", "docs"]
    assert (task.instructions, task.user_instructions) == (True, "answer tersely\n")
    assert (bare.instructions, bare.user_instructions, [s.name for s in bare.mcp_servers]) == (
        False,
        None,
        ["db"],
    )
