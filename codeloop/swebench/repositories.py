"""Where an instance's repository comes from, and its scratch tree at a commit.

Sources, in order: `--repos DIR` holding, for `OWNER/NAME`, a clone, a bare mirror or a git
bundle named `NAME`, `OWNER+NAME` (either with `.git`) or `NAME.bundle` / `OWNER+NAME.bundle`;
else a mirror cloned from GitHub into the cache when the network allows. A bundle holds one
parentless commit per needed commit under `refs/swbase/<sha>`; it is fetched once into a bare
repository in the cache (per machine, under a lock), so a run reads trees out of git objects and
never writes to the user's clones.

A scratch tree is the commit's files (`git archive`) in a fresh repository with one commit, so
`git apply`, `git diff` and `git checkout -- FILES` behave as in the official container, where
the tree is the repository at the base commit.
"""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from codeloop.swebench.errors import RepositoryNotFound

GIT_TIMEOUT_S = 600
CLONE_TIMEOUT_S = 120
# Scratch commits get a fixed identity and date: the tree, not the commit, is what matters.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "codeloop",
    "GIT_AUTHOR_EMAIL": "swebench@codeloop.invalid",
    "GIT_COMMITTER_NAME": "codeloop",
    "GIT_COMMITTER_EMAIL": "swebench@codeloop.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(
    *args: str, cwd: Path | None = None, input: bytes | None = None, timeout: float = GIT_TIMEOUT_S
) -> bytes:
    """Run git and return its stdout; a failure raises `subprocess.CalledProcessError` with stderr."""
    env = {**os.environ, **_GIT_ENV, "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env=env, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout


@dataclass(frozen=True)
class RepoSource:
    """A git directory holding a repository's commits (a clone's .git, a mirror, a cached bundle)."""

    repo: str
    git_dir: Path
    origin: str
    """What it was made from, for messages."""

    def has_commit(self, sha: str) -> bool:
        try:
            git("--git-dir", str(self.git_dir), "cat-file", "-e", f"{sha}^{{commit}}")
        except subprocess.CalledProcessError:
            return False
        return True

    def resolve(self, sha: str) -> str:
        """The commit that stands for `sha`: itself, or a bundle's `refs/swbase/<sha>`.

        Raises:
            RepositoryNotFound: neither is there.
        """
        for candidate in (f"refs/swbase/{sha}", sha):
            if self.has_commit(candidate):
                return candidate
        raise RepositoryNotFound(f"commit {sha} of {self.repo} is not in {self.origin}")

    def read_file(self, sha: str, path: str) -> str | None:
        """A file's text at a commit; None when the commit has no such file."""
        try:
            data = git("--git-dir", str(self.git_dir), "show", f"{self.resolve(sha)}:{path}")
        except subprocess.CalledProcessError:
            return None
        return data.decode("utf-8", errors="replace")


def candidates(repos_dir: Path, repo: str) -> list[Path]:
    """The paths under `repos_dir` that may hold `repo` (OWNER/NAME), in the order they are tried."""
    owner, _, name = repo.partition("/")
    names = [name, f"{owner}+{name}"]
    paths = []
    for base in names:
        paths += [repos_dir / base, repos_dir / f"{base}.git", repos_dir / f"{base}.bundle"]
    return paths


def find_source(
    repo: str, *, repos_dir: Path | None, cache_dir: Path, allow_clone: bool = True
) -> RepoSource:
    """The source of `repo`: from `repos_dir` when it holds one, else a GitHub mirror in the cache.

    Raises:
        RepositoryNotFound: nothing under `repos_dir` and no clone (the message lists where it
            looked and what to pass).
    """
    looked: list[str] = []
    if repos_dir is not None:
        for path in candidates(repos_dir, repo):
            looked.append(str(path))
            if path.is_file() and path.suffix == ".bundle":
                return _from_bundle(repo, path, cache_dir)
            if (path / ".git").exists():
                return RepoSource(repo, path / ".git", str(path))
            if (path / "HEAD").is_file() and (path / "objects").is_dir():
                return RepoSource(repo, path, str(path))
    mirror = cache_dir / "repos" / f"{repo.replace('/', '+')}.git"
    if (mirror / "HEAD").is_file():
        return RepoSource(repo, mirror, f"the mirror {mirror}")
    url = f"https://github.com/{repo}.git"
    why = "cloning is off"
    if allow_clone:
        why = _clone_mirror(url, mirror)
        if why is None:
            return RepoSource(repo, mirror, f"the mirror {mirror}")
    where = (
        f"under --repos {repos_dir} ({', '.join(p.rsplit('/', 1)[-1] for p in looked)})"
        if looked
        else "(no --repos given)"
    )
    raise RepositoryNotFound(
        f"repository {repo} not found: looked {where}, then cloned {url}: {why}; pass --repos DIR "
        f"holding a clone, a bare mirror or a bundle of it named {repo.split('/')[1]}, "
        f"{repo.replace('/', '+')} or {repo.split('/')[1]}.bundle"
    )


def _clone_mirror(url: str, mirror: Path) -> str | None:
    """Clone `url` as a bare mirror at `mirror`; None on success, else git's reason in one line."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{mirror}.lock"):
        if (mirror / "HEAD").is_file():
            return None
        partial = mirror.with_name(f".{mirror.name}.partial")
        subprocess.run(["rm", "-rf", str(partial)], check=False)
        try:
            git("clone", "--mirror", "--quiet", url, str(partial), timeout=CLONE_TIMEOUT_S)
        except subprocess.CalledProcessError as exc:
            lines = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else f"git exited {exc.returncode}"
        except subprocess.TimeoutExpired:
            return f"no answer within {CLONE_TIMEOUT_S} s"
        partial.rename(mirror)
    return None


def _from_bundle(repo: str, bundle: Path, cache_dir: Path) -> RepoSource:
    """A bare repository in the cache holding the bundle's `refs/swbase/*`, fetched once per bundle
    content (its size and mtime name it, so a replaced bundle is fetched again)."""
    stat = bundle.stat()
    key = f"{repo.replace('/', '+')}-{stat.st_size}-{int(stat.st_mtime)}"
    target = cache_dir / "repos" / f"{key}.git"
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock"):
        if not (target / "codeloop-fetched").is_file():
            subprocess.run(["rm", "-rf", str(target)], check=False)
            git("init", "--quiet", "--bare", str(target))
            try:
                git("--git-dir", str(target), "fetch", "--quiet", str(bundle), "refs/swbase/*:refs/swbase/*")
            except subprocess.CalledProcessError as exc:
                reason = (exc.stderr or b"").decode(errors="replace").strip()
                raise RepositoryNotFound(f"{bundle} is not a readable bundle of {repo}: {reason}") from None
            (target / "codeloop-fetched").write_text(str(bundle))
    return RepoSource(repo, target, str(bundle))


def materialise(source: RepoSource, sha: str, tree: Path) -> None:
    """Write the files of commit `sha` to the new directory `tree`, as a repository of one commit.

    Raises:
        RepositoryNotFound: the commit is not in the source.
    """
    commit = source.resolve(sha)
    tree.mkdir(parents=True)
    archive = git("--git-dir", str(source.git_dir), "archive", "--format=tar", commit)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, capture_output=True)
    git("init", "--quiet", cwd=tree)
    git("add", "-A", "-f", cwd=tree)
    git("commit", "--quiet", "--no-verify", "-m", f"base {sha}", cwd=tree)
