"""Task sets (format: docs/eval-taskset.md): loading, per-task repository copies, fingerprints."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from codeloop.evaluation.errors import TaskSetError

Kind = Literal["localize", "fix", "add_test", "explain"]
TASKS_FILE = "tasks.jsonl"
IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", ".git")


class Checks(BaseModel):
    model_config = ConfigDict(extra="allow")

    gold_files: list[str] = []
    """Files where the behaviour lives (localize, explain)."""
    facts: list[str] = []
    """Strings an explanation must state, case-insensitive (explain)."""
    fail_to_pass: list[str] = []
    """pytest node ids that must pass with the patch (fix, add_test)."""
    pass_to_pass: list[str] = []
    """pytest node ids that must keep passing (fix, add_test)."""


class EvalTask(BaseModel):
    """One line of a task set, with its paths resolved against the set's directory."""

    model_config = ConfigDict(extra="allow")

    id: str
    repo: str
    """A directory or a git bundle (`*.bundle`), relative to the task file's directory."""
    kind: Kind
    mode: Literal["read", "write", "execute"]
    text: str
    checks: Checks = Checks()
    gold_patch: str | None = None
    base_dir: Path = Path(".")
    """Directory holding the task file; not part of the line."""

    @property
    def repo_path(self) -> Path:
        return (self.base_dir / self.repo).resolve()

    def line(self, *, relative_to: Path) -> dict[str, JsonValue]:
        """The task as a task-file line whose paths are relative to `relative_to`."""
        data: dict[str, JsonValue] = self.model_dump(exclude={"base_dir"}, exclude_none=True)
        data["repo"] = os.path.relpath(self.repo_path, relative_to)
        if self.gold_patch:
            data["gold_patch"] = os.path.relpath((self.base_dir / self.gold_patch).resolve(), relative_to)
        return data


def tasks_file(taskset: Path) -> Path:
    """TASKSET is a directory holding `tasks.jsonl` or a task file itself."""
    path = taskset / TASKS_FILE if taskset.is_dir() else taskset
    if not path.is_file():
        raise TaskSetError(f"no task file at {path} (give a directory holding {TASKS_FILE} or a .jsonl file)")
    return path


def load_tasks(taskset: Path) -> list[EvalTask]:
    """Every task of the set, in file order.

    Raises:
        TaskSetError: unreadable file, a line that is not a task, duplicate ids, a missing repository.
    """
    path = tasks_file(taskset)
    tasks: list[EvalTask] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSetError(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            task = EvalTask.model_validate({**json.loads(line), "base_dir": path.parent.resolve()})
        except (json.JSONDecodeError, ValidationError) as exc:
            raise TaskSetError(f"{path}:{number}: not a task: {str(exc).splitlines()[0]}") from None
        if not task.repo_path.exists():
            raise TaskSetError(f"{path}:{number}: task {task.id}: repository {task.repo_path} does not exist")
        tasks.append(task)
    ids = [t.id for t in tasks]
    if duplicates := sorted({i for i in ids if ids.count(i) > 1}):
        raise TaskSetError(f"{path}: duplicate task ids: {', '.join(duplicates)}")
    if not tasks:
        raise TaskSetError(f"{path} holds no tasks")
    return tasks


def materialise(task: EvalTask, dest: Path) -> Path:
    """A git repository at `dest` holding the task's repository (a tree copy, or a bundle cloned),
    so neither the agents nor the checks ever touch the task set."""
    source = task.repo_path
    if source.is_file():
        subprocess.run(["git", "clone", "-q", str(source), str(dest)], check=True, capture_output=True)
        return dest
    shutil.copytree(source, dest, ignore=IGNORED)
    git = ["git", "-c", "user.name=codeloop-eval", "-c", "user.email=eval@codeloop.invalid"]
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "task start"]):
        subprocess.run([*git, *argv], cwd=dest, check=True, capture_output=True)
    return dest


def fingerprint(tasks: list[EvalTask]) -> str:
    """sha256 over every task line and the bytes of every file of its repository and gold patch:
    two runs with the same fingerprint ran on the same task set."""
    digest = hashlib.sha256()
    seen: set[Path] = set()
    for task in tasks:
        digest.update(json.dumps(task.line(relative_to=task.base_dir), sort_keys=True).encode())
        paths = [task.repo_path] + ([task.base_dir / task.gold_patch] if task.gold_patch else [])
        for root in paths:
            if root in seen:
                continue
            seen.add(root)
            files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
            for file in files:
                if "__pycache__" in file.parts or ".pytest_cache" in file.parts:
                    continue
                digest.update(os.path.relpath(file, task.base_dir).encode())
                digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
