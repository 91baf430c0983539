"""The shared tree walk: what it lists under `.gitignore` files is what git itself lists.

Each case builds a real git repository and compares the walk with `git ls-files --others
--exclude-standard` (untracked, not ignored), with the user's and the system's git config kept out.
"""

import os
import subprocess
from pathlib import Path

import pytest

from tool_servers.globs import glob_matcher
from tool_servers.ignore_walk import walk

_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _repo(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env={**os.environ, **_GIT_ENV})
    for rel, content in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return repo


def _git_lists(repo: Path) -> set[str]:
    out = subprocess.run(
        ["git", "-c", "core.quotePath=false", "ls-files", "-z", "--others", "--exclude-standard"],
        cwd=repo,
        check=True,
        capture_output=True,
        env={**os.environ, **_GIT_ENV},
    ).stdout
    return {os.fsdecode(raw) for raw in out.split(b"\0") if raw}


def _walk_lists(repo: Path, **options: object) -> set[str]:
    return {d.rel + name for d in walk(repo, **options) for name in d.files}  # type: ignore[arg-type] - options are walk's keyword arguments, given by each test


CASES = {
    "nested !keep.py re-includes what an outer rule ignored": {
        ".gitignore": "*.py\n",
        "a.py": "",
        "sub/.gitignore": "!keep.py\n",
        "sub/keep.py": "",
        "sub/other.py": "",
        "sub/deeper/keep.py": "",
    },
    "a directory rule matches directories only, at any depth": {
        ".gitignore": "build/\n",
        "build/x.py": "",
        "src/build/y.py": "",
        "lib/build": "a file named build",
    },
    "a leading slash anchors to the .gitignore's directory": {
        ".gitignore": "/x\n",
        "x": "",
        "sub/x": "",
        "sub/.gitignore": "/y\n",
        "sub/y": "",
        "y": "",
        "sub/z/y": "",
    },
    "nothing is re-included inside an excluded directory": {
        ".gitignore": "build/\n!build/keep.py\nout/*\n!out/keep.py\n",
        "build/keep.py": "",
        "build/.gitignore": "!keep.py\n",
        "out/keep.py": "",
        "out/drop.py": "",
    },
    "the whitelist idiom: ignore all, re-include directories and .py files": {
        ".gitignore": "*\n!*/\n!*.py\n",
        "a.py": "",
        "a.txt": "",
        "src/b.py": "",
        "src/b.txt": "",
        "src/deep/c.py": "",
    },
    "a later outer rule loses to a deeper file; the last line of a file wins": {
        ".gitignore": "*.log\n!important.log\n",
        "x.log": "",
        "important.log": "",
        "sub/.gitignore": "important.log\n",
        "sub/important.log": "",
        "sub/y.log": "",
    },
    "paths with a slash are anchored, ** spans directories": {
        ".gitignore": "doc/*.txt\n**/cache/\na/**/b\n",
        "doc/x.txt": "",
        "doc/sub/y.txt": "",
        "other/doc/x.txt": "",
        "p/q/cache/z.py": "",
        "a/b": "",
        "a/m/n/b": "",
        "a/c": "",
        "sub/.gitignore": "doc/*.md\n",
        "sub/doc/r.md": "",
        "doc/r.md": "",
    },
    "escapes, comments and trailing spaces": {
        ".gitignore": "# a comment\n\\#hash\n\\!bang\nspace\\ \ntrail   \n[ab].c\n",
        "#hash": "",
        "!bang": "",
        "space ": "",
        "trail": "",
        "a.c": "",
        "c.c": "",
        "# a comment": "",
    },
    "CRLF lines and a byte order mark": {
        ".gitignore": "\ufeffone.txt\r\ntwo/\r\n",
        "one.txt": "",
        "two/x": "",
        "three.txt": "",
    },
    "a directory excluded by name keeps its negated sibling files": {
        ".gitignore": "gen\n!gen.py\n",
        "gen/a.py": "",
        "pkg/gen": "",
        "gen.py": "",
    },
}


@pytest.mark.parametrize("files", CASES.values(), ids=CASES.keys())
def test_the_walk_lists_what_git_lists(tmp_path: Path, files: dict[str, str]) -> None:
    repo = _repo(tmp_path, files)  # pyright: ignore[reportArgumentType] - str values are what each test writes; the helper takes bytes too
    assert _walk_lists(repo) == _git_lists(repo)


def test_names_and_patterns_that_are_not_utf8_match_byte_for_byte(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {".gitignore": b"caf\xe9.txt\n", "ok.txt": ""})
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("ignored")
    (repo / os.fsdecode(b"na\xefve.txt")).write_text("kept")
    assert _walk_lists(repo) == _git_lists(repo) == {".gitignore", "ok.txt", os.fsdecode(b"na\xefve.txt")}


def test_symlinks_are_files_never_followed_and_a_symlinked_gitignore_is_not_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"real/x.py": "", "rules": "*.py\n", ".gitignore": "linkdir/\n"})
    (repo / "linkdir").symlink_to("real")  # a symlink is a file to git: `linkdir/` does not match it
    (repo / "link.py").symlink_to("real/x.py")
    (repo / "loop").symlink_to("loop")
    (repo / "real" / ".gitignore").symlink_to("../rules")  # git does not follow it: x.py is listed
    walked = _walk_lists(repo)
    assert walked == _git_lists(repo)
    assert {"linkdir", "link.py", "loop", "real/x.py"} <= walked
    assert not any(p.startswith("linkdir/") for p in walked)


def test_a_fifo_as_gitignore_is_not_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"a.py": ""})
    os.mkfifo(repo / ".gitignore")  # opening it for reading would block the walk forever
    assert _walk_lists(repo) == {".gitignore", "a.py"}


def test_git_and_codeloop_dirs_and_callers_skips_are_pruned(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {".codeloop/index/x": "", "node_modules/m.js": "", "src/a.py": "", ".git2/k": ""})
    assert _walk_lists(repo) == {"node_modules/m.js", "src/a.py", ".git2/k"}
    assert _walk_lists(repo, skip_dir=lambda name: name == "node_modules") == {"src/a.py", ".git2/k"}


def test_a_start_below_the_root_applies_the_gitignores_above_it(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        {
            ".gitignore": "*.log\nbuild/\n",
            "src/.gitignore": "!keep.log\n",
            "src/pkg/a.log": "",
            "src/pkg/keep.log": "",
            "src/pkg/a.py": "",
            "src/build/out.py": "",
        },
    )
    assert _walk_lists(repo, start="src/pkg") == {"src/pkg/keep.log", "src/pkg/a.py"}
    assert _walk_lists(repo, start="src/build") == set()  # inside an ignored directory
    assert _walk_lists(repo, start="src/build", gitignore=False) == {"src/build/out.py"}


def test_ignored_files_can_be_kept_while_ignored_directories_are_pruned(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {".gitignore": "*.log\nbuild/\n", "a.log": "", "build/b.py": "", "c.py": ""})
    assert _walk_lists(repo, keep_ignored_files=True) == {".gitignore", "a.log", "c.py"}


def test_the_walk_is_sorted_a_directorys_files_before_its_subdirectories(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"b/z.py": "", "b/a/y.py": "", "a.py": "", "c/x.py": ""})
    order = [d.rel + name for d in walk(repo) for name in d.files]
    assert order == ["a.py", "b/z.py", "b/a/y.py", "c/x.py"]


def test_removing_a_name_from_dirs_skips_that_directory(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"keep/a.py": "", "drop/b.py": ""})
    seen = []
    for directory in walk(repo):
        directory.dirs[:] = [d for d in directory.dirs if d != "drop"]
        seen += [directory.rel + name for name in directory.files]
    assert seen == ["keep/a.py"]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("*.py", "a/b.py", False),  # `*` stays within one component
        ("src/**", "src/a/b.toml", True),
        ("src/**", "src", False),
        ("a/**/b", "a/b", True),
        ("*", ".hidden", True),
        ("[!a]x", "bx", True),
        ("[!a]x", "/x", False),
        ("a**b", "ab/cb", False),  # `**` inside a component is a plain `*`
        ("{a,b}", "a", False),  # braces are literal, as in git
        ("?.md", "x.md", True),
        ("README.MD", "README.md", False),
    ],
)
def test_glob_matching_follows_git_wildmatch(pattern: str, path: str, expected: bool) -> None:
    assert glob_matcher(pattern)(path) is expected
