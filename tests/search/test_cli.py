"""`codeloop index` and `codeloop search`: the JSON contract other tools read,
and clear errors (message, non-zero exit, no traceback) on bad input."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeloop.cli import app
from codeloop.cli.common import EXIT_FAILURE

HIT_KEYS = {"path", "start_line", "end_line", "symbol", "score", "snippet"}


def test_index_then_search_print_the_json_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy_corpus: Callable[..., Path], private_cache_dir: Path
) -> None:
    """Our CLI contract: index reports counts; search prints {"query", "hits": [...]} exactly."""
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(private_cache_dir))
    repo = copy_corpus(tmp_path / "repo", ["_core/_signals.py", "to_thread.py"])
    runner = CliRunner()

    indexed = runner.invoke(app, ["index", str(repo), "--json"])
    assert indexed.exit_code == 0, indexed.output
    report = json.loads(indexed.stdout)
    assert {"files", "chunks", "embedded", "skipped", "seconds"} <= report.keys()
    assert report["files"] == 2 and report["embedded"] == report["chunks"] > 0

    searched = runner.invoke(
        app, ["search", "run a sync function in a worker thread", "--repo", str(repo), "-k", "3", "--json"]
    )
    assert searched.exit_code == 0, searched.output
    result = json.loads(searched.stdout)
    assert set(result) == {"query", "hits"} and result["query"] == "run a sync function in a worker thread"
    assert 0 < len(result["hits"]) <= 3
    for hit in result["hits"]:
        assert set(hit) == HIT_KEYS and not hit["path"].startswith("/")
        assert isinstance(hit["start_line"], int) and isinstance(hit["score"], float)
    assert result["hits"][0]["path"] == "to_thread.py"

    again = runner.invoke(app, ["index", str(repo)])
    assert again.exit_code == 0 and "0 embedded" in again.stdout


def _codeloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codeloop", *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["index", "{tmp}/missing"], "does not exist"),
        (["index", "{tmp}/afile.txt"], "not a directory"),
        (["search", "the of and", "--repo", "{tmp}"], "only common words"),
        (["search", "", "--repo", "{tmp}"], "query is empty"),
        (["search", "x = f(1)", "--repo", "{tmp}", "--run-examples"], "add --per-file"),
        (
            [
                "search",
                "x",
                "--repo",
                "{tmp}",
                "--per-file",
                "--run-examples",
                "--example-python",
                "{tmp}/nope",
            ],
            "--example-python",
        ),
    ],
)
def test_bad_input_exits_non_zero_with_a_message_and_no_traceback(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Brief's CLI convention: say what was wrong, exit non-zero, no traceback."""
    (tmp_path / "afile.txt").write_text("x\n")
    done = _codeloop(*[a.format(tmp=tmp_path) for a in args])
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def _issue_and_repo(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cache: Path,
    issue: str,
    files: dict[str, str],
    decoy: str,
) -> tuple[Path, list[str]]:
    """A repository of `files` plus 16 decoys (`decoy` formatted with `i`: files matching the
    issue's words better than the file only running its example finds), the issue in a file, and
    the `search` arguments for it, with `cache` as codeloop's cache; examples run in the process
    backend."""
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(cache))
    monkeypatch.setenv("CODELOOP_SANDBOX", "process")
    repo = tmp_path / "repo"
    files = {**files, **{f"calc/decoy{i}.py": decoy.format(i=i) for i in range(16)}}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (tmp_path / "issue.md").write_text(issue)
    return repo, ["search", f"@{tmp_path / 'issue.md'}", "--repo", str(repo), "--per-file"]


ISSUE = """show() prints the wrong brackets
```
>>> from calc import show
>>> show(2)
'<2>'
```
It should print [2].
"""


def test_run_examples_adds_what_the_example_executed_to_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_cache_dir: Path
) -> None:
    """Our CLI contract, extended: with --run-examples the result carries `examples`, and a file
    reached only by running the example (core.py, which the issue never names) is ranked."""
    files = {
        "calc/__init__.py": "from calc.printer import show\n",
        "calc/printer.py": "from calc import core\n\n\ndef show(a):\n    return core.wrap(a)\n",
        "calc/core.py": "def wrap(a):\n    return f'<{a}>'\n",
    }
    # Files that match the issue's words better than core.py, which it never names.
    decoy = "def show_brackets{i}(wrong):\n    return print(wrong, 'brackets')\n"
    repo, args = _issue_and_repo(tmp_path, monkeypatch, private_cache_dir, ISSUE, files, decoy)
    args = [*args, "-k", "10", "--json"]

    plain = CliRunner().invoke(app, args)
    with_examples = CliRunner().invoke(app, [*args, "--run-examples"])

    assert plain.exit_code == 0 and with_examples.exit_code == 0, with_examples.output
    assert set(json.loads(plain.stdout)) == {"query", "hits"}
    result = json.loads(with_examples.stdout)
    assert result["examples"]["backend"] == "process" and result["examples"]["statements"] == 2
    assert result["examples"]["files"] == {"calc/printer.py": 1, "calc/core.py": 1}
    assert "calc/core.py" not in [h["path"] for h in json.loads(plain.stdout)["hits"]]
    assert "calc/core.py" in [h["path"] for h in result["hits"]]
    assert (repo / "calc" / "__pycache__").exists() is False

    monkeypatch.setenv("CODELOOP_SANDBOX", "bogus")  # a deployment's policy that allows no backend
    refused = CliRunner().invoke(app, [*args, "--run-examples"])
    assert refused.exit_code == EXIT_FAILURE and refused.stdout == ""
    assert (
        refused.stderr.startswith("error: the query's examples cannot run")
        and "CODELOOP_SANDBOX" in refused.stderr
    )


RAISING_ISSUE = """scale() crashes on an empty list of values
```
>>> from calc import scale
>>> scale([], 2)
```
It should return an empty list, not crash.
"""


def test_the_file_an_example_raises_in_is_ranked_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_cache_dir: Path
) -> None:
    """The error an issue describes, reproduced: the innermost repository frame of what the example
    raised (stats.py, which the issue never names, one call below the function it does name) is
    evidence like a pasted traceback's, and the summary says where it was raised."""
    files = {
        "calc/__init__.py": "from calc.api import scale\n",
        "calc/api.py": "from calc import stats\n\n\ndef scale(values, factor):\n    return stats.spread(values, factor)\n",
        "calc/stats.py": "def spread(values, factor):\n    top = max(values)\n    return [v * factor / top for v in values]\n",
    }
    decoy = "def empty_values{i}(crash):\n    return print(crash, 'empty list of values')\n"
    _, args = _issue_and_repo(tmp_path, monkeypatch, private_cache_dir, RAISING_ISSUE, files, decoy)
    args = [*args, "-k", "20"]

    plain = CliRunner().invoke(app, [*args, "--json"])
    with_examples = CliRunner().invoke(app, [*args, "--json", "--run-examples"])
    shown = CliRunner().invoke(app, [*args, "--run-examples"])

    assert plain.exit_code == 0 and with_examples.exit_code == 0 and shown.exit_code == 0, shown.output
    result = json.loads(with_examples.stdout)
    assert [(e["error"], [f["path"] for f in e["frames"]]) for e in result["examples"]["raised"]] == [
        ("ValueError", ["calc/stats.py", "calc/api.py"])
    ]
    plain_paths = [h["path"] for h in json.loads(plain.stdout)["hits"]]
    paths = [h["path"] for h in result["hits"]]
    assert paths.index("calc/stats.py") < plain_paths.index("calc/stats.py")
    # Right after the function the issue names, above every file that only matches its words.
    assert paths[:2] == ["calc/api.py", "calc/stats.py"]
    assert "ValueError raised at calc/stats.py:2 in spread" in shown.stderr


@pytest.mark.slow
def test_the_first_search_of_a_repository_shows_its_index_being_built(
    tmp_path: Path, copy_corpus: Callable[..., Path], private_cache_dir: Path
) -> None:
    """Our choice: the first search builds the whole index (tens of seconds on a real repository);
    piped, stderr says what it is doing with counts, and the next search has nothing to build."""
    repo = copy_corpus(tmp_path / "repo", ["_core/_signals.py", "to_thread.py"])
    env = {**os.environ, "CODELOOP_CACHE_DIR": str(private_cache_dir)}
    command = [sys.executable, "-m", "codeloop", "search", "worker thread", "--repo", str(repo), "-k", "1"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=True)
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=True)
    assert "scanning: 2 of 2 files" in first.stderr, first.stderr
    assert "embedding: 0 of" in first.stderr and " chunks" in first.stderr
    embedded = [line for line in first.stderr.splitlines() if line.startswith("embedding: ")]
    total = embedded[-1].split(" of ")[1].split()[0]
    assert embedded[-1] == f"embedding: {total} of {total} chunks" and int(total) > 0
    assert "embedding:" not in again.stderr and "to_thread.py" in again.stdout
