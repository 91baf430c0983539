"""`codeloop index` and `codeloop search`: the JSON contract other tools read,
and clear errors (message, non-zero exit, no traceback) on bad input."""

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeloop.cli import app

HIT_KEYS = {"path", "start_line", "end_line", "symbol", "score", "snippet"}


def test_index_then_search_print_the_json_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy_corpus: Callable[..., Path]
) -> None:
    """Our CLI contract: index reports counts; search prints {"query", "hits": [...]} exactly."""
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(tmp_path / "cache"))
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
