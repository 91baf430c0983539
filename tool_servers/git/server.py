"""The `git` server: read views of the root's repository, and commits onto `codeloop/*` branches.

Read tools: `git_status`, `git_diff`, `git_log`, `git_show`, `git_blame`. Under the write scope,
`git_commit` records the working tree (all of it or some paths) as a commit on a branch named
`codeloop/<name>`, built with a temporary index, `commit-tree` and a compare-and-set
`update-ref`: the user's HEAD, index and checked-out branch are never touched, and no hook runs.

Every git call gets `--no-ext-diff`/`--no-textconv` where it diffs and `core.fsmonitor=false`,
so a repository's config cannot make a read tool run programs.
"""

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from tool_servers.confinement import Root
from tool_servers.protocol.errors import Conflict, InvalidArguments, NotFound, PermissionDenied, ToolTimeout
from tool_servers.protocol.scopes import Risk, Scope
from tool_servers.protocol.sdk import build_server
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec, read_tool
from tool_servers.secret_files import DEFAULT_RULES, SecretRules

GIT_TIMEOUT_S = 30.0
MAX_OUTPUT_BYTES = 512 * 1024
BRANCH_RE = re.compile(r"^codeloop/[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")
_REV_RE = re.compile(r"^[A-Za-z0-9_./~^@{}:-]{1,200}$")
_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
_SEP, _END = "\x1f", "\x1e"


class StatusInput(BaseModel):
    model_config = _CONFIG


class StatusEntry(BaseModel):
    model_config = _CONFIG
    path: str
    index: str
    """Staged state letter (porcelain v1 X): M, A, D, R, C, U, ? or space."""
    worktree: str
    """Working-tree state letter (porcelain v1 Y)."""
    orig_path: str | None = None
    """For renames and copies, the old path."""


class StatusOutput(BaseModel):
    model_config = _CONFIG
    branch: str | None
    """Checked-out branch, None when HEAD is detached."""
    entries: list[StatusEntry]
    clean: bool


class DiffInput(BaseModel):
    model_config = _CONFIG
    staged: bool = False
    """Diff the index against HEAD instead of the working tree against the index."""
    base: str | None = None
    """Compare the working tree (or index when staged) against this revision instead."""
    paths: list[str] = []
    """Limit to these paths (relative to the root)."""
    context_lines: int = Field(default=3, ge=0, le=100)
    max_bytes: int = Field(default=MAX_OUTPUT_BYTES, ge=1, le=MAX_OUTPUT_BYTES)


class DiffOutput(BaseModel):
    model_config = _CONFIG
    diff: str
    files: list[str]
    """Paths that appear in the diff."""
    truncated: bool


class LogInput(BaseModel):
    model_config = _CONFIG
    rev: str = "HEAD"
    """Revision to start from."""
    path: str | None = None
    """Only commits touching this path."""
    max_count: int = Field(default=20, ge=1, le=500)


class CommitInfo(BaseModel):
    model_config = _CONFIG
    sha: str
    parents: list[str]
    author: str
    email: str
    date: str
    """Author date, ISO 8601."""
    subject: str


class LogOutput(BaseModel):
    model_config = _CONFIG
    commits: list[CommitInfo]


class ShowInput(BaseModel):
    model_config = _CONFIG
    rev: str = "HEAD"
    """Commit to show."""
    path: str | None = None
    """When set, return this file's content at `rev` instead of the commit's diff."""
    max_bytes: int = Field(default=MAX_OUTPUT_BYTES, ge=1, le=MAX_OUTPUT_BYTES)


class ShowOutput(BaseModel):
    model_config = _CONFIG
    commit: CommitInfo
    message: str
    """Full commit message."""
    diff: str | None
    """The commit's patch (when no path was given)."""
    content: str | None
    """The file's content at `rev` (when a path was given)."""
    truncated: bool


class BlameInput(BaseModel):
    model_config = _CONFIG
    path: str
    start_line: int = Field(default=1, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    rev: str | None = None
    """Blame as of this revision instead of the working tree."""


class BlameLine(BaseModel):
    model_config = _CONFIG
    line: int
    sha: str
    author: str
    summary: str
    """Subject of the commit that last changed the line."""
    content: str


class BlameOutput(BaseModel):
    model_config = _CONFIG
    path: str
    lines: list[BlameLine]


class CommitInput(BaseModel):
    model_config = _CONFIG
    branch: str
    """Target branch; must be `codeloop/<name>`. Created from HEAD when missing."""
    message: str = Field(min_length=1)
    """Commit message."""
    paths: list[str] | None = None
    """Commit only these paths' working-tree state; all of the tree when omitted."""


class CommitOutput(BaseModel):
    model_config = _CONFIG
    branch: str
    sha: str
    parent: str | None
    created_branch: bool
    files: list[str]
    """Paths changed by the commit."""


class GitTools:
    """Handlers of the `git` server over one root."""

    def __init__(self, root: Root, secrets: SecretRules = DEFAULT_RULES) -> None:
        self.root = root
        self.secrets = secrets
        self.excludes = secrets.git_excludes()
        """Pathspecs keeping secrets files out of diffs, patches and commits."""

    async def _git(
        self, *args: str, env: dict[str, str] | None = None, check: bool = True, what: str = ""
    ) -> tuple[int, str, str]:
        cmd = [
            "git",
            "-C",
            str(self.root.path),
            "-c",
            "core.quotepath=off",
            "-c",
            "core.fsmonitor=false",
            *args,
        ]
        full_env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
            **(env or {}),
        }
        try:
            with anyio.fail_after(GIT_TIMEOUT_S):
                done = await anyio.run_process(cmd, env=full_env, check=False, stdin=subprocess.DEVNULL)
        except TimeoutError:
            raise ToolTimeout(
                f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s", timeout_s=GIT_TIMEOUT_S
            ) from None
        out = done.stdout.decode("utf-8", errors="replace")
        err = done.stderr.decode("utf-8", errors="replace").strip()
        if check and done.returncode != 0:
            if "not a git repository" in err:
                raise NotFound("the root is not inside a git repository", stderr=err)
            raise InvalidArguments(
                f"git {what or args[0]} failed: {err or 'exit ' + str(done.returncode)}", stderr=err
            )
        return done.returncode, out, err

    async def _commit_sha(self, rev: str) -> str:
        if not _REV_RE.match(rev) or rev.startswith("-"):
            raise InvalidArguments(f"{rev!r} is not a revision name", rev=rev)
        code, out, _ = await self._git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False
        )
        if code != 0:
            raise NotFound(f"no commit named {rev!r} in this repository", rev=rev)
        return out.strip()

    def _paths(self, paths: list[str]) -> list[str]:
        return [self.root.relative(self.root.resolve(p)) for p in paths]

    async def status(self, args: StatusInput, call: CallContext) -> StatusOutput:
        # Porcelain paths are relative to the repository's top; ours are relative to the root.
        _, prefix, _ = await self._git("rev-parse", "--show-prefix")
        prefix = prefix.strip()
        _, out, _ = await self._git(
            "status", "--porcelain=v1", "-b", "-z", "--untracked-files=all", "--", "."
        )
        tokens = out.split("\0")
        branch: str | None = None
        entries: list[StatusEntry] = []
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if not token:
                continue
            if token.startswith("## "):
                head = token[3:].split("...")[0]
                branch = (
                    None if head.startswith("HEAD (no branch)") else head.removeprefix("No commits yet on ")
                )
                continue
            x, y, path = token[0], token[1], token[3:]
            orig = None
            if x in "RC":
                orig = tokens[i].removeprefix(prefix)
                i += 1
            entries.append(StatusEntry(path=path.removeprefix(prefix), index=x, worktree=y, orig_path=orig))
        return StatusOutput(branch=branch, entries=entries, clean=not entries)

    async def diff(self, args: DiffInput, call: CallContext) -> DiffOutput:
        cmd = [
            "diff",
            "--relative",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            f"-U{args.context_lines}",
        ]
        if args.staged:
            cmd.append("--cached")
        if args.base is not None:
            cmd.append(await self._commit_sha(args.base))
        _, out, _ = await self._git(*cmd, "--", *(self._paths(args.paths) or ["."]), *self.excludes)
        files = re.findall(r"^diff --git a/(.*?) b/", out, flags=re.M)
        text, truncated = _cap(out, args.max_bytes)
        return DiffOutput(diff=text, files=files, truncated=truncated)

    async def log(self, args: LogInput, call: CallContext) -> LogOutput:
        sha = await self._commit_sha(args.rev)
        paths = self._paths([args.path]) if args.path else []
        _, out, _ = await self._git(
            "log",
            f"--max-count={args.max_count}",
            f"--format=%H{_SEP}%P{_SEP}%an{_SEP}%ae{_SEP}%aI{_SEP}%s{_END}",
            sha,
            "--",
            *paths,
        )
        return LogOutput(commits=[_commit_info(rec) for rec in out.split(_END) if rec.strip()])

    async def show(self, args: ShowInput, call: CallContext) -> ShowOutput:
        sha = await self._commit_sha(args.rev)
        _, meta, _ = await self._git(
            "show", "-s", f"--format=%H{_SEP}%P{_SEP}%an{_SEP}%ae{_SEP}%aI{_SEP}%s{_END}%B", sha
        )
        header, _, message = meta.partition(_END)
        commit = _commit_info(header)
        if args.path is not None:
            rel = self._paths([args.path])[0]
            self.secrets.refuse(rel, text="")  # by name, before git reads anything
            code, content, err = await self._git("show", f"{sha}:./{rel}", check=False)
            if code != 0:
                raise NotFound(
                    f"{args.path} does not exist at {args.rev}", path=args.path, rev=args.rev, stderr=err
                )
            self.secrets.refuse(rel, text=content)  # .npmrc, .pypirc: by what they held then
            text, truncated = _cap(content, args.max_bytes)
            return ShowOutput(
                commit=commit, message=message.strip(), diff=None, content=text, truncated=truncated
            )
        _, patch, _ = await self._git(
            "show",
            "--relative",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--format=",
            sha,
            "--",
            ".",
            *self.excludes,
        )
        text, truncated = _cap(patch, args.max_bytes)
        return ShowOutput(
            commit=commit, message=message.strip(), diff=text, content=None, truncated=truncated
        )

    async def blame(self, args: BlameInput, call: CallContext) -> BlameOutput:
        rel = self._paths([args.path])[0]
        self.secrets.refuse(rel, self.root.resolve(args.path))
        if args.end_line is not None and args.end_line < args.start_line:
            raise InvalidArguments("end_line must be >= start_line")
        cmd = ["blame", "--porcelain", f"-L{args.start_line},{args.end_line or ''}"]
        if args.rev is not None:
            cmd.append(await self._commit_sha(args.rev))
        elif not self.root.resolve(args.path).is_file():
            raise NotFound(f"{args.path}: no such file", path=args.path)
        _, out, _ = await self._git(*cmd, "--", rel, what="blame")
        return BlameOutput(path=rel, lines=_parse_blame(out))

    async def commit(self, args: CommitInput, call: CallContext) -> CommitOutput:
        if not BRANCH_RE.match(args.branch) or ".." in args.branch or args.branch.endswith(".lock"):
            raise PermissionDenied(
                f"git_commit only writes branches named codeloop/<name>; {args.branch!r} is not one",
                branch=args.branch,
            )
        ref = f"refs/heads/{args.branch}"
        code, out, _ = await self._git("rev-parse", "--verify", "--quiet", ref, check=False)
        old = out.strip() if code == 0 else None
        parent = old
        if parent is None:
            code, out, _ = await self._git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
            parent = out.strip() if code == 0 else None
        paths = self._paths(args.paths) if args.paths else ["."]
        with tempfile.TemporaryDirectory(prefix="codeloop-commit-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            await self._git("read-tree", *([parent] if parent else ["--empty"]), env=env)
            await self._git("add", "-A", "--", *paths, *self.excludes, env=env, what="add")
            _, tree, _ = await self._git("write-tree", env=env)
        tree = tree.strip()
        if parent is not None:
            _, parent_tree, _ = await self._git("rev-parse", f"{parent}^{{tree}}")
            if parent_tree.strip() == tree:
                raise Conflict(
                    f"nothing to commit: the tree equals {args.branch if old else 'HEAD'}", branch=args.branch
                )
        identity = f"codeloop ({call.principal})"
        env = {
            "GIT_AUTHOR_NAME": identity,
            "GIT_AUTHOR_EMAIL": "codeloop@localhost",
            "GIT_COMMITTER_NAME": identity,
            "GIT_COMMITTER_EMAIL": "codeloop@localhost",
        }
        _, sha, _ = await self._git(
            "commit-tree", tree, *(["-p", parent] if parent else []), "-m", args.message, env=env
        )
        sha = sha.strip()
        # Compare-and-set: fails if the branch moved (or appeared) since we read it.
        code, _, err = await self._git(
            "update-ref", "-m", f"codeloop commit by {call.principal}", ref, sha, old or "0" * 40, check=False
        )
        if code != 0:
            raise Conflict(f"{args.branch} changed while committing; retry", branch=args.branch, stderr=err)
        if parent:
            _, names, _ = await self._git("diff-tree", "--no-commit-id", "--name-only", "-r", parent, sha)
        else:
            _, names, _ = await self._git("ls-tree", "-r", "--name-only", sha)
        return CommitOutput(
            branch=args.branch,
            sha=sha,
            parent=parent,
            created_branch=old is None,
            files=names.split("\n")[:-1] if names else [],
        )


def _cap(text: str, max_bytes: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True


def _commit_info(record: str) -> CommitInfo:
    sha, parents, author, email, date, subject = record.strip("\n").split(_SEP, 5)
    return CommitInfo(
        sha=sha, parents=parents.split(), author=author, email=email, date=date, subject=subject
    )


def _parse_blame(out: str) -> list[BlameLine]:
    info: dict[str, dict[str, str]] = {}
    lines: list[BlameLine] = []
    sha, final = "", 0
    for raw in out.split("\n"):
        if raw.startswith("\t"):
            meta = info.get(sha, {})
            lines.append(
                BlameLine(
                    line=final,
                    sha=sha,
                    author=meta.get("author", ""),
                    summary=meta.get("summary", ""),
                    content=raw[1:],
                )
            )
            continue
        head = raw.split(" ")
        if len(head) >= 3 and re.fullmatch(r"[0-9a-f]{40}", head[0]):
            sha, final = head[0], int(head[2])
            info.setdefault(sha, {})
        elif raw and sha:
            key, _, value = raw.partition(" ")
            info[sha].setdefault(key, value)
    return lines


def git_tools(root: Root, secrets: SecretRules = DEFAULT_RULES) -> list[ToolSpec]:
    """The `git` tool specs over `root`."""
    tools = GitTools(root, secrets)
    return [
        read_tool(
            "git_status",
            "Branch and changed/untracked files of the root's repository.",
            StatusInput,
            StatusOutput,
            tools.status,
        ),
        read_tool(
            "git_diff",
            "Unified diff of the working tree, the index, or against a revision.",
            DiffInput,
            DiffOutput,
            tools.diff,
        ),
        read_tool(
            "git_log", "Recent commits (optionally touching one path).", LogInput, LogOutput, tools.log
        ),
        read_tool(
            "git_show",
            "A commit's message and patch, or a file's content at a revision.",
            ShowInput,
            ShowOutput,
            tools.show,
        ),
        read_tool(
            "git_blame",
            "Which commit last changed each line of a file.",
            BlameInput,
            BlameOutput,
            tools.blame,
        ),
        ToolSpec(
            name="git_commit",
            description=(
                "Commit the working tree (or some paths) onto a codeloop/<name> branch without touching HEAD, "
                "the index or the checked-out branch."
            ),
            scope=Scope.WRITE,
            input_model=CommitInput,
            output_model=CommitOutput,
            handler=tools.commit,
            risk=Risk.MEDIUM,
            read_only=False,
            destructive=False,
            idempotent=False,
        ),
    ]


def build_git_server(root: Path, options: ServerOptions | None = None, **_: Any) -> MCPServer[object]:
    """The `git` MCP server over the repository containing `root`."""
    options = options or ServerOptions()
    return build_server(
        "git",
        git_tools(Root(root), options.secrets),
        options,
        instructions="Read views of the repository at the root; commits only onto codeloop/<name> branches.",
    )
