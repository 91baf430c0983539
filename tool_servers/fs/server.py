"""The `fs` server: list, read, write and patch files confined to a root.

Tools: `list_files` (read), `read_file` (read), `write_file` (write), `apply_patch` (write).
Writes to protected paths (CI configs, secrets, `.env`) and patches that delete files are
high-risk and ask a human first (see `protocol/confirm.py`).

A hostile tree never fails a whole call: `list_files` leaves out what it cannot name or read
(names that are not UTF-8, symlink loops and links out of the root, FIFOs, sockets and devices,
files it may not open) and `read_file` of such a path is `not_found` or `permission_denied`.
"""

import os
import re
import stat
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from tool_servers.confinement import Root, is_utf8_name
from tool_servers.fs.patching import atomic_write, plan_patch, write_plan
from tool_servers.globs import glob_matcher
from tool_servers.ignore_walk import walk
from tool_servers.protocol.errors import (
    Conflict,
    InvalidArguments,
    NotFound,
    PermissionDenied,
    ToolServerError,
)
from tool_servers.protocol.scopes import Risk, Scope
from tool_servers.protocol.sdk import build_server
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec, read_tool
from tool_servers.secret_files import DEFAULT_RULES, SecretRules

MAX_READ_BYTES = 256 * 1024
MAX_FILE_BYTES = 32 * 1024 * 1024
"""read_file refuses larger files outright rather than loading them to return a slice."""
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_LIST = 5000
PROTECTED_PATTERNS = (
    ".github/**",
    ".gitlab-ci.yml",
    ".ci/**",
    ".env",
    ".env.*",
    ".env.*/**",
    "**/*.pem",
    "**/*.key",
    ".pre-commit-config.yaml",
    ".gitignore",
)
"""Paths whose change can alter CI, secrets or what git sees: writing them asks a human (globs as
`globs` reads them: `*` stays within one component, `**` spans directories)."""
_PROTECTED = tuple(glob_matcher(pattern) for pattern in PROTECTED_PATTERNS)
_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
_PATCH_PATH = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to )([^\t\n]+)", re.M)


class ListFilesInput(BaseModel):
    model_config = _CONFIG
    pattern: str = "**/*"
    """Glob relative to `path` (`**` crosses directories), e.g. `**/*.py` or `src/*.toml`."""
    path: str = "."
    """Directory to list, relative to the root."""
    include_ignored: bool = False
    """Also list files that .gitignore ignores."""
    limit: int = Field(default=1000, ge=1, le=MAX_LIST)
    """Maximum number of files returned."""


class FileEntry(BaseModel):
    model_config = _CONFIG
    path: str
    """Path relative to the root."""
    size: int
    """Size in bytes."""


class ListFilesOutput(BaseModel):
    model_config = _CONFIG
    files: list[FileEntry]
    truncated: bool
    """True when more files matched than `limit`."""


class ReadFileInput(BaseModel):
    model_config = _CONFIG
    path: str
    """File to read, relative to the root."""
    start_line: int = Field(default=1, ge=1)
    """First line to return (1-based)."""
    end_line: int | None = Field(default=None, ge=1)
    """Last line to return (inclusive); omitted means to the end or the size cap."""
    max_bytes: int = Field(default=MAX_READ_BYTES, ge=1, le=MAX_READ_BYTES)
    """Cap on returned content; longer content is cut at a line boundary and `truncated` set."""


class ReadFileOutput(BaseModel):
    model_config = _CONFIG
    path: str
    content: str
    """The requested lines; empty when the file is not text."""
    start_line: int
    end_line: int
    """Last line included (0 when nothing was returned)."""
    total_lines: int
    size: int
    """File size in bytes."""
    truncated: bool
    """True when the size cap cut the requested range short."""
    decodable: bool
    """False when the file is not UTF-8 text (binary); `content` is then empty."""


class WriteFileInput(BaseModel):
    model_config = _CONFIG
    path: str
    """File to create or replace, relative to the root."""
    content: str
    """The complete new content (UTF-8)."""


class WriteFileOutput(BaseModel):
    model_config = _CONFIG
    path: str
    bytes_written: int
    created: bool
    """True when the file did not exist before."""


class ApplyPatchInput(BaseModel):
    model_config = _CONFIG
    patch: str
    """A unified diff (`--- a/path` / `+++ b/path` headers, `@@` hunks) with paths relative to the root."""
    dry_run: bool = False
    """Validate every hunk and report what would change without writing."""


class PatchedFileInfo(BaseModel):
    model_config = _CONFIG
    path: str
    action: str
    """`modify`, `create`, `delete` or `rename` (a git rename: `path` is the new name)."""
    hunks: int
    added: int
    removed: int
    renamed_from: str | None = None
    """For a rename: the old path, which no longer exists."""


class ApplyPatchOutput(BaseModel):
    model_config = _CONFIG
    applied: bool
    """False on a dry run."""
    files: list[PatchedFileInfo]


def is_protected(rel: str) -> bool:
    return any(matches(rel) for matches in _PROTECTED)


class FsTools:
    """Handlers of the `fs` server over one root."""

    def __init__(self, root: Root, secrets: SecretRules = DEFAULT_RULES) -> None:
        self.root = root
        self.secrets = secrets

    async def list_files(self, args: ListFilesInput, call: CallContext) -> ListFilesOutput:
        base = self.root.resolve(args.path)
        if not base.is_dir():
            raise NotFound(f"{args.path} is not a directory under the root", path=args.path)
        return await anyio.to_thread.run_sync(self._list_sync, base, args)

    def _list_sync(self, base: Path, args: ListFilesInput) -> ListFilesOutput:
        files: list[FileEntry] = []
        matches = glob_matcher(args.pattern)
        start = base.relative_to(self.root.path).as_posix()
        below = len(start) + 1 if start != "." else 0  # strips `start/` to match the glob relative to it
        for directory in walk(self.root.path, start=start, gitignore=not args.include_ignored):
            # Not expressible in the tool's JSON, so not listable or readable.
            directory.dirs[:] = [d for d in directory.dirs if is_utf8_name(d)]
            for name in directory.files:
                if not is_utf8_name(name):
                    continue
                rel = directory.rel + name
                path = Path(directory.path, name)
                if self.secrets.is_secret(rel, path):
                    continue  # secrets are not listed, git-ignored or not
                if not matches(rel[below:]):
                    continue
                try:
                    resolved = path.resolve()
                    if self.root.path not in resolved.parents:
                        continue  # a symlink pointing out of the root is not listed
                    st = resolved.stat()
                except (OSError, RuntimeError):  # RuntimeError: a symlink loop
                    continue
                if not stat.S_ISREG(st.st_mode) or not os.access(resolved, os.R_OK):
                    continue  # FIFOs, sockets, devices and unreadable files: nothing to read
                if len(files) >= args.limit:
                    return ListFilesOutput(files=files, truncated=True)
                files.append(FileEntry(path=rel, size=st.st_size))
        return ListFilesOutput(files=files, truncated=False)

    async def read_file(self, args: ReadFileInput, call: CallContext) -> ReadFileOutput:
        path = self.root.resolve(args.path)
        if not path.is_file():
            raise NotFound(f"{args.path}: no such file under the root", path=args.path)
        self.secrets.refuse(self.root.relative(path), path)
        if not os.access(path, os.R_OK):
            raise PermissionDenied(f"{args.path}: this server may not read it", path=args.path)
        if args.end_line is not None and args.end_line < args.start_line:
            raise InvalidArguments(
                "end_line must be >= start_line", start_line=args.start_line, end_line=args.end_line
            )
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InvalidArguments(
                f"{args.path} is {size} bytes; read_file handles files up to {MAX_FILE_BYTES}"
            )
        return await anyio.to_thread.run_sync(self._read_sync, path, args)

    def _read_sync(self, path: Path, args: ReadFileInput) -> ReadFileOutput:
        try:
            data = path.read_bytes()
        except OSError as exc:  # replaced by something unreadable since the checks
            raise NotFound(f"{args.path}: cannot be read ({exc.strerror or exc})", path=args.path) from exc
        rel = self.root.relative(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ReadFileOutput(
                path=rel,
                content="",
                start_line=args.start_line,
                end_line=0,
                total_lines=0,
                size=len(data),
                truncated=False,
                decodable=False,
            )
        lines = text.splitlines(keepends=True)
        last = len(lines) if args.end_line is None else min(args.end_line, len(lines))
        chosen: list[str] = []
        used = 0
        truncated = False
        for line in lines[args.start_line - 1 : last]:
            size = len(line.encode("utf-8"))
            if used + size > args.max_bytes:
                truncated = True
                break
            chosen.append(line)
            used += size
        end = args.start_line + len(chosen) - 1 if chosen else 0
        return ReadFileOutput(
            path=rel,
            content="".join(chosen),
            start_line=args.start_line,
            end_line=end,
            total_lines=len(lines),
            size=len(data),
            truncated=truncated,
            decodable=True,
        )

    async def write_file(self, args: WriteFileInput, call: CallContext) -> WriteFileOutput:
        path = self.root.resolve(args.path, for_write=True)
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise InvalidArguments(f"content is {len(data)} bytes; the cap is {MAX_WRITE_BYTES}")
        if path.is_dir():
            raise InvalidArguments(f"{args.path} is a directory", path=args.path)
        created = not path.exists()
        try:
            await anyio.to_thread.run_sync(atomic_write, path, data)
        except OSError as exc:  # e.g. a parent component is a file, or the disk is full
            raise Conflict(f"cannot write {args.path}: {exc.strerror or exc}", path=args.path) from exc
        return WriteFileOutput(path=self.root.relative(path), bytes_written=len(data), created=created)

    async def apply_patch(self, args: ApplyPatchInput, call: CallContext) -> ApplyPatchOutput:
        # Before planning: a failing hunk quotes the file's lines, which would read a secret.
        for raw in _PATCH_PATH.findall(args.patch):
            try:
                rel = self.root.relative(self.root.resolve(raw.removeprefix("a/").removeprefix("b/")))
            except ToolServerError:
                continue  # refused by plan_patch with its own message
            self.secrets.refuse(rel)
        changes = await anyio.to_thread.run_sync(plan_patch, self.root, args.patch)
        if not args.dry_run:
            try:
                await anyio.to_thread.run_sync(write_plan, changes)
            except OSError as exc:
                raise Conflict(
                    f"writing the patch failed and was rolled back: {exc.strerror or exc}"
                ) from exc
        files = [
            PatchedFileInfo(
                path=c.rel,
                action=c.action,
                hunks=c.hunks,
                added=c.added,
                removed=c.removed,
                renamed_from=c.renamed_from_rel,
            )
            for c in changes
        ]
        return ApplyPatchOutput(applied=not args.dry_run, files=files)

    def confirm_write(self, args: WriteFileInput) -> str | None:
        try:
            rel = self.root.relative(self.root.resolve(args.path))
        except ToolServerError:
            return None  # refused by the handler, without asking anyone
        return f"overwrite the protected file {rel}" if is_protected(rel) else None

    def confirm_patch(self, args: ApplyPatchInput) -> str | None:
        if args.dry_run:
            return None
        try:
            changes = plan_patch(self.root, args.patch)
        except (ToolServerError, OSError):
            return None  # an invalid patch fails in the handler without asking anyone
        rels = {c.path: self.root.relative(c.path) for c in changes}
        deleted = [rels[c.path] for c in changes if c.action == "delete"]
        # A rename keeps the content, so it is no deletion; moving a protected file is asked.
        touched = [*rels.values(), *(c.renamed_from_rel for c in changes if c.renamed_from_rel)]
        protected = [rel for rel in touched if is_protected(rel)]
        parts = []
        if deleted:
            parts.append("delete " + ", ".join(deleted))
        if protected:
            parts.append("change the protected file(s) " + ", ".join(protected))
        return "; ".join(parts) or None


def fs_tools(root: Root, secrets: SecretRules = DEFAULT_RULES) -> list[ToolSpec]:
    """The `fs` tool specs over `root`."""
    tools = FsTools(root, secrets)
    return [
        read_tool(
            "list_files",
            "List files under the root matching a glob; skips what .gitignore ignores.",
            ListFilesInput,
            ListFilesOutput,
            tools.list_files,
        ),
        read_tool(
            "read_file",
            "Read a text file (optionally a line range), capped in size; reports binary files.",
            ReadFileInput,
            ReadFileOutput,
            tools.read_file,
        ),
        ToolSpec(
            name="write_file",
            description="Create or replace a file with the given content (atomic). Protected files ask a human.",
            scope=Scope.WRITE,
            input_model=WriteFileInput,
            output_model=WriteFileOutput,
            handler=tools.write_file,
            risk=Risk.MEDIUM,
            read_only=False,
            destructive=True,
            idempotent=True,
            confirm=tools.confirm_write,
        ),
        ToolSpec(
            name="apply_patch",
            description=(
                "Apply a unified diff atomically: every hunk applies or nothing changes; dry_run validates "
                "only. A failing hunk is named with the reason. Git renames move files; CRLF files keep "
                "their line endings. Deleting files asks a human."
            ),
            scope=Scope.WRITE,
            input_model=ApplyPatchInput,
            output_model=ApplyPatchOutput,
            handler=tools.apply_patch,
            risk=Risk.MEDIUM,
            read_only=False,
            destructive=True,
            idempotent=False,
            confirm=tools.confirm_patch,
        ),
    ]


def build_fs_server(root: Path, options: ServerOptions | None = None, **_: Any) -> MCPServer[object]:
    """The `fs` MCP server confined to `root`."""
    options = options or ServerOptions()
    return build_server(
        "fs",
        fs_tools(Root(root), options.secrets),
        options,
        instructions="Files under one root. Paths are relative to it; '..', outside paths and symlinks out are refused.",
    )
