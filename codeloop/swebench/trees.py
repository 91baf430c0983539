"""The two trees of an instance: the environment commit's tree the environment is built from
(with the recipe's input files), and the instance's scratch tree at its base commit, made as the
official instance image made /testbed: the base commit's files and the spec's `pre_install`
edits (e.g. sphinx's `tox.ini`), committed (the install into the instance's layer follows, in
`codeloop.swebench.layer`).
"""

import os
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

from codeloop.swebench.errors import EnvironmentBuildError
from codeloop.swebench.recipe import INPUTS_DIR, EnvRecipe
from codeloop.swebench.repositories import RepoSource, git, materialise

PRE_INSTALL_TIMEOUT_S = 120


def project_tree(recipe: EnvRecipe, source: RepoSource, cache_dir: Path) -> Path:
    """The environment commit's files plus the recipe's input files, made once per recipe in the
    cache (under a lock; a directory without its `.ready` marker is made again)."""
    root = (
        cache_dir
        / "swebench"
        / "trees"
        / f"{recipe.repo.replace('/', '+')}-{recipe.env_commit[:12]}-{_digest(recipe)}"
    )
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{root}.lock", thread_local=False):
        if (root.parent / f"{root.name}.ready").is_file():
            return root
        shutil.rmtree(root, ignore_errors=True)
        archive = git(
            "--git-dir", str(source.git_dir), "archive", "--format=tar", source.resolve(recipe.env_commit)
        )
        root.mkdir()
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True, capture_output=True)
        inputs = root / INPUTS_DIR
        inputs.mkdir()
        for name, text in recipe.files.items():
            (inputs / name).write_text(text, encoding="utf-8")
        (root.parent / f"{root.name}.ready").write_text(recipe.label)
    return root


def _digest(recipe: EnvRecipe) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(recipe.files, sort_keys=True).encode()).hexdigest()[:12]


def instance_tree(source: RepoSource, base_commit: str, tree: Path, recipe: EnvRecipe) -> str:
    """Make the instance's scratch tree at `tree`; returns its base commit (the tree of the
    instance's base commit, before the spec's edits).

    Raises:
        EnvironmentBuildError: a `pre_install` edit failed.
    """
    materialise(source, base_commit, tree)
    base = git("rev-parse", "HEAD", cwd=tree).decode().strip()
    for command in recipe.pre_install:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tree,
            capture_output=True,
            timeout=PRE_INSTALL_TIMEOUT_S,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            check=False,
        )
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise EnvironmentBuildError(
                f"pre_install step failed on the instance's tree: {command}", log_tail=tail
            )
    git("add", "-A", "-f", cwd=tree)
    git("commit", "--quiet", "--allow-empty", "--no-verify", "-m", "SWE-bench", cwd=tree)
    return base
