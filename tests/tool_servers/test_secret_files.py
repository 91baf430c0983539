"""Secrets files in the repository are never read, listed, shown, diffed, committed, indexed or found."""

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import JsonValue

from tests.tool_servers.ts_helpers import git
from tool_servers.fs.server import build_fs_server
from tool_servers.git.server import build_git_server
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.search.embedding.embed import CachedEmbedder, load_embedder
from tool_servers.search.server import build_search_server
from tool_servers.secret_files import DEFAULT_RULES

pytestmark = pytest.mark.anyio
READ = ServerOptions(scopes=frozenset({Scope.READ}))
PLANTED = "PLANTEDSECRET-7c1e9b"
SECRET_FILES = {
    ".env": f"OPENAI_API_KEY={PLANTED}\n",
    "config/.env.production": f"DB_PASSWORD={PLANTED}\n",
    "deploy/server.pem": f"-----BEGIN PRIVATE KEY-----\n{PLANTED}\n",
    "deploy/tls.key": f"{PLANTED}\n",
    "home/.ssh/id_ed25519": f"{PLANTED}\n",
    "home/.netrc": f"machine example.com login me password {PLANTED}\n",
    "home/.aws/credentials": f"[default]\naws_secret_access_key = {PLANTED}\n",
    "home/.config/gcloud/legacy_credentials/me/adc.json": f'{{"private_key": "{PLANTED}"}}\n',
    "web/.npmrc": f"//registry.npmjs.org/:_authToken={PLANTED}\n",
}
PLAIN_NPMRC = "registry=https://registry.npmjs.org/\n"


@pytest.fixture
def secret_repo(tmp_path: Path) -> Path:
    """A repository committing every kind of secrets file (a user's mistake) beside code, with a
    git-ignored .env too and a harmless .npmrc."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / "app.py").write_text("def settings_loader():\n    return load_dotenv()\n")
    (root / "tools").mkdir()
    (root / "tools" / ".npmrc").write_text(PLAIN_NPMRC)
    for rel, text in SECRET_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "oops, secrets")
    (root / ".gitignore").write_text("local/\n")
    (root / "local").mkdir()
    (root / "local" / ".env").write_text(f"TOKEN={PLANTED}\n")
    (root / ".env").write_text(f"OPENAI_API_KEY={PLANTED}-changed\n")  # a diff of a secret
    return root


async def _calls(
    server: MCPServer[object], calls: list[tuple[str, dict[str, JsonValue]]]
) -> list[CallToolResult]:
    with anyio.fail_after(60):
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]


async def test_read_file_refuses_every_secrets_file_naming_the_rule(secret_repo: Path) -> None:
    """`permission_denied` with the rule in the message and details, git-ignored or not."""
    paths = [*SECRET_FILES, "local/.env"]
    results = await _calls(build_fs_server(secret_repo, READ), [("read_file", {"path": p}) for p in paths])
    for path, result in zip(paths, results, strict=True):
        body = result.structured_content
        assert body["type"] == "permission_denied", path
        assert body["details"]["rule"] in body["message"] and PLANTED not in str(body)
    plain = await _calls(build_fs_server(secret_repo, READ), [("read_file", {"path": "tools/.npmrc"})])
    assert plain[0].structured_content["content"] == PLAIN_NPMRC  # no token in it: not a secret


async def test_list_files_does_not_list_secrets_files(secret_repo: Path) -> None:
    """Not even their names, with or without the .gitignore filter."""
    results = await _calls(
        build_fs_server(secret_repo, READ),
        [
            ("list_files", {}),
            ("list_files", {"include_ignored": True}),
            ("list_files", {"pattern": "**/.env*"}),
        ],
    )
    for result in results:
        listed = {f["path"] for f in result.structured_content["files"]}
        assert listed.isdisjoint({*SECRET_FILES, "local/.env"}), listed
    assert {f["path"] for f in results[1].structured_content["files"]} >= {"app.py", "tools/.npmrc"}


async def test_git_show_blame_and_diff_never_show_a_secrets_file(secret_repo: Path) -> None:
    """git_show by path and git_blame are refused; the commit's patch and the working-tree diff
    leave secrets files out (every .npmrc too: a patch cannot be judged by its whole content) and
    keep the rest; a plain .npmrc is still shown by path."""
    results = await _calls(
        build_git_server(secret_repo, READ),
        [
            ("git_show", {"rev": "HEAD", "path": "home/.aws/credentials"}),
            ("git_show", {"rev": "HEAD", "path": "web/.npmrc"}),
            ("git_blame", {"path": ".env"}),
            ("git_show", {"rev": "HEAD"}),
            ("git_diff", {}),
            ("git_show", {"rev": "HEAD", "path": "tools/.npmrc"}),
        ],
    )
    for refused in results[:3]:
        assert refused.structured_content["type"] == "permission_denied"
        assert refused.structured_content["details"]["rule"]
    patch, diff, plain = (r.structured_content for r in results[3:])
    assert "app.py" in patch["diff"]
    assert PLANTED not in patch["diff"] and PLANTED not in diff["diff"] and diff["files"] == []
    assert plain["content"] == PLAIN_NPMRC


async def test_git_commit_leaves_secrets_files_out(secret_repo: Path) -> None:
    """A commit of the working tree onto a codeloop/* branch does not pick up a new secrets file."""
    (secret_repo / "new.pem").write_text(f"{PLANTED}\n")
    (secret_repo / "feature.py").write_text("x = 1\n")
    options = ServerOptions(scopes=frozenset({Scope.READ, Scope.WRITE}))
    (result,) = await _calls(
        build_git_server(secret_repo, options), [("git_commit", {"branch": "codeloop/t", "message": "m"})]
    )
    assert not result.is_error, result.content
    tree = git(secret_repo, "ls-tree", "-r", "--name-only", "codeloop/t").split()
    assert "feature.py" in tree and "new.pem" not in tree


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> CachedEmbedder:
    return load_embedder(cache_dir=tmp_path_factory.mktemp("embedding-cache"))


async def test_secrets_files_are_not_indexed_nor_found_by_search(
    secret_repo: Path, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Nothing of a secrets file reaches the index on disk or a search result."""
    index_dir = tmp_path / "index"
    server = build_search_server(secret_repo, READ, index_dir=index_dir, embedder=embedder)
    results = await _calls(
        server,
        [
            ("search_code", {"query": "OPENAI_API_KEY aws_secret_access_key password", "k": 50}),
            ("search_code", {"query": PLANTED, "k": 50}),
            ("index_status", {}),
        ],
    )
    for result in results[:2]:
        paths = {hit["path"] for hit in result.structured_content["hits"]}
        assert paths <= {"app.py", "tools/.npmrc", ".gitignore"}, paths
    assert results[2].structured_content["status"]["files"] == 3
    for path in index_dir.rglob("*"):
        if path.is_file():
            assert PLANTED.encode() not in path.read_bytes(), path


def test_allow_and_deny_rules_change_the_default_list() -> None:
    """An allow rule wins over a deny rule; a deny rule adds a name; both match at any depth."""
    rules = DEFAULT_RULES.with_changes(allow=(".env.example",), deny=("secrets.yaml",))
    assert rules.rule_for("a/.env.example") is None and rules.rule_for(".env.local") == ".env.*"
    assert rules.rule_for("ops/secrets.yaml") == "secrets.yaml"
    assert rules.rule_for("src/keyboard.py") is None and rules.rule_for("docs/env.md") is None


async def test_apply_patch_refuses_to_touch_a_secrets_file(secret_repo: Path) -> None:
    """A failing hunk quotes the file's lines, so patching a secrets file would read it: refused
    before any line is looked at."""
    patch = "--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-GUESS=1\n+GUESS=2\n"
    options = ServerOptions(scopes=frozenset({Scope.READ, Scope.WRITE}))
    (result,) = await _calls(
        build_fs_server(secret_repo, options), [("apply_patch", {"patch": patch, "dry_run": True})]
    )
    assert result.structured_content["type"] == "permission_denied"
    assert result.structured_content["details"]["rule"] == ".env" and PLANTED not in str(result.content)
