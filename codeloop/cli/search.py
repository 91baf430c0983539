"""`codeloop index` and `codeloop search`: the code index from the command line.

The `--json` shapes are a contract other tools depend on: `index` prints `IndexReport`, `search`
prints `SearchResult` (`{"query", "hits": [{"path", "start_line", "end_line", "symbol", "score",
"snippet"}]}`). Progress goes to stderr so stdout stays machine-readable.
"""

import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from codeloop.cli.common import fail, plural, usage_error
from codeloop.cli.env import environment_settings
from codeloop.cli.option_groups import OptionGroup, with_option_groups
from tool_servers.search.errors import IndexDirUnusable, InvalidQuery, RepoNotFound, SearchError
from tool_servers.search.models import EXAMPLE_TIMEOUT_S

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from tool_servers.search.index.code_index import CodeIndex
    from tool_servers.search.index.code_index import Progress as IndexProgress
    from tool_servers.search.models import ExampleRun, IndexReport, SearchResult

IndexDirOption = Annotated[
    str | None,
    typer.Option(
        "--index-dir",
        help="Where the index lives: a directory or a LanceDB URI. Default: DIR/.codeloop/index.",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model", help="Embedding model name or local path. Default: the bundled all-MiniLM-L6-v2."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command("index")(index_command)
    app.command("search")(search_command)


def index_command(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Repository to index.")],
    as_json: JsonOption = False,
    index_dir: IndexDirOption = None,
    model: ModelOption = None,
) -> None:
    """Build or update the semantic code index of DIR (only changed files are re-embedded).

    Reports files, chunks, chunks embedded, files skipped and seconds taken.
    """
    report = _run(lambda: _index(directory, index_dir, model, quiet=as_json))
    if as_json:
        typer.echo(report.model_dump_json())
        return
    _print_report(report)


@dataclass(frozen=True)
class ExampleOptions(OptionGroup):
    """Running the query's example code to rank the files it executes (`--run-examples`)."""

    run_examples: Annotated[
        bool,
        typer.Option(
            "--run-examples",
            help="With --per-file: run the query's example code (interpreter sessions, code blocks) "
            "in the sandbox on a scratch copy of the indexed files, and give ranks 6-10 to the files "
            "it executed. The checkout is never written.",
        ),
    ] = False
    example_setup: Annotated[
        str,
        typer.Option(
            "--example-setup",
            metavar="CODE",
            help="Python run before the examples, untraced: what an interactive session of the "
            "project starts with (e.g. 'from sympy import *'). @FILE reads it from a file. Without it, "
            "a name the examples never define is still taken from the repository's top-level packages, "
            "or from where its doctests import it.",
        ),
    ] = ""
    example_python: Annotated[
        str | None,
        typer.Option(
            "--example-python",
            metavar="PATH",
            help="Interpreter for the examples. Default: the repository's virtualenv "
            "(.venv, venv, env, .env), else codeloop's own.",
        ),
    ] = None
    example_timeout: Annotated[
        float,
        typer.Option("--example-timeout", min=1, help="Seconds for the example statements, after the setup."),
    ] = EXAMPLE_TIMEOUT_S

    def check(self, *, per_file: bool) -> str:
        """The setup code to run first (`@FILE` read).

        Raises:
            typer.Exit: (2) examples without --per-file, or an interpreter that is no file.
        """
        if self.run_examples and not per_file:
            raise usage_error("--run-examples ranks files: add --per-file")
        setup = _query_text(self.example_setup)
        if self.example_python is not None and not Path(self.example_python).is_file():
            raise usage_error(
                f"--example-python {self.example_python!r} is not a file: name the interpreter to run examples with"
            )
        return setup


@with_option_groups
def search_command(
    query: Annotated[
        str,
        typer.Argument(help="What to look for: a description, an identifier, or @FILE (that file's text)."),
    ],
    repo: Annotated[Path, typer.Option("--repo", help="Repository to search (indexed on first use).")] = Path(
        "."
    ),
    k: Annotated[int, typer.Option("-k", "--limit", min=1, max=200, help="Number of hits.")] = 10,
    per_file: Annotated[bool, typer.Option("--per-file", help="One hit per file (its best chunk).")] = False,
    keep_tests: Annotated[
        bool,
        typer.Option(
            "--tests",
            help="With --per-file, rank test files like source files (for a task about tests); "
            "by default they rank after the source they test.",
        ),
    ] = False,
    as_json: JsonOption = False,
    index_dir: IndexDirOption = None,
    model: ModelOption = None,
    *,
    examples: ExampleOptions,
) -> None:
    """Search a repository's code by meaning and keywords (hybrid: vector + full-text, fused).

    The repository given by --repo is indexed on first use and updated incrementally after.
    A long query (an issue text) can be passed as @FILE.
    """
    text = _query_text(query)
    setup = examples.check(per_file=per_file)

    settings = environment_settings(repo) if examples.run_examples else None

    async def run() -> "SearchResult":
        from tool_servers.search.index.query import parse_query

        parse_query(text)  # a bad query fails before the model is loaded
        index, report = await _open_and_update(repo, index_dir, model, quiet=as_json)
        for message in report.messages:
            typer.echo(f"note: {message}", err=True)
        if not examples.run_examples:
            return await index.search(text, k=k, per_file=per_file, keep_tests=keep_tests)
        from codeloop.config.environment import tool_server_config
        from tool_servers.search.examples.run import search_running_examples

        result = await search_running_examples(
            index,
            text,
            k=k,
            keep_tests=keep_tests,
            setup=setup,
            python=examples.example_python,
            timeout_s=examples.example_timeout,
            policy=tool_server_config().sandbox_policy,
            environment=settings,
        )
        typer.echo(f"note: examples: {_examples_summary(result.examples)}", err=True)  # pyright: ignore[reportArgumentType] - examples were asked for, so the result carries their run
        return result

    result = _run(run)
    if as_json:
        typer.echo(result.model_dump_json(exclude=None if result.examples else {"examples"}))
        return
    if not result.hits:
        typer.echo("no hits")
    for hit in result.hits:
        symbol = f"  {hit.symbol}" if hit.symbol else ""
        typer.secho(f"{hit.path}:{hit.start_line}-{hit.end_line}{symbol}  ({hit.score:.4f})", bold=True)
        lines = hit.snippet.split("\n")
        for line in lines[:6]:
            typer.echo(f"    {line}")
        if len(lines) > 6:
            typer.echo(f"    ... {len(lines) - 6} more lines")


def _examples_summary(run: "ExampleRun") -> str:
    if run.backend is None or run.note:
        return run.note or "nothing ran"
    parts = [f"{run.statements} statements ran ({run.failed} raised) in {run.backend}"]
    parts.append(f"{len(run.files)} repository files executed")
    if run.timed_out:
        parts.append("stopped at the time limit")
    for error in run.raised[:3]:
        frame = error.frames[0]
        parts.append(f"{error.error} raised at {frame.path}:{frame.line} in {frame.function}")
    if run.resolved:
        shown = ", ".join(run.resolved[:5]) + (", ..." if len(run.resolved) > 5 else "")
        parts.append(f"{len(run.resolved)} undefined names taken from the repository ({shown})")
    if run.setup_error:
        parts.append(f"the setup raised {run.setup_error}")
    return ", ".join(parts)


def _query_text(query: str) -> str:
    """The query, or the text of the file an `@FILE` query names (undecodable bytes replaced)."""
    if not query.startswith("@") or len(query) == 1:
        return query
    path = Path(query[1:]).expanduser()
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise usage_error(
            f"cannot read the query file {str(path)!r} ({exc.strerror or exc}): "
            "pass an existing text file after @, or the query itself"
        ) from None


async def _index(directory: Path, index_dir: str | None, model: str | None, *, quiet: bool) -> "IndexReport":
    _, report = await _open_and_update(directory, index_dir, model, quiet=quiet)
    return report


async def _open_and_update(
    directory: Path, index_dir: str | None, model: str | None, *, quiet: bool
) -> tuple["CodeIndex", "IndexReport"]:
    import anyio

    from codeloop.config.environment import tool_server_config
    from tool_servers.search.embedding.embed import load_embedder
    from tool_servers.search.index.code_index import check_index_dir, check_repo, open_index

    check_index_dir(check_repo(directory), index_dir)  # before the model load: a typo costs no 10 s
    if not quiet:
        typer.echo("loading the embedding model ...", err=True)
    cache_root = tool_server_config().cache_dir
    embedder = await anyio.to_thread.run_sync(lambda: load_embedder(model, cache_root=cache_root))
    index = await open_index(directory, index_dir=index_dir, embedder=embedder)
    with _progress(enabled=not quiet, tty=sys.stderr.isatty()) as progress:
        report = await index.update(progress=progress)
    return index, report


_STAGES = {"scan": ("scanning", "files"), "embed": ("embedding", "chunks"), "write": ("writing", "tables")}


class _progress:
    """Progress of `CodeIndex.update` on stderr: a bar with the count and an ETA at a terminal,
    else a line per stage and one at most every 5 s (the first search of a repository builds its
    whole index: tens of seconds a person should see passing)."""

    def __init__(self, *, enabled: bool, tty: bool) -> None:
        self.enabled = enabled
        self.tty = tty
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._started: dict[str, float] = {}
        self._said = 0.0

    def __enter__(self) -> "IndexProgress | None":
        if not self.enabled:
            return None
        if not self.tty:
            return self._say
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._bar.__enter__()
        return self._update

    def _update(self, stage: str, done: int, total: int) -> None:
        bar = self._bar
        if bar is None:  # not entered at a terminal: `_say` reports instead
            return
        if stage not in self._tasks:
            label, unit = _STAGES[stage]
            self._tasks[stage] = bar.add_task(label, unit=unit)
        bar.update(self._tasks[stage], completed=done, total=max(total, 1))

    def _say(self, stage: str, done: int, total: int) -> None:

        now = time.monotonic()
        first = stage not in self._started
        self._started.setdefault(stage, now)
        if not (first or done >= total or now - self._said >= 5.0):
            return
        self._said = now
        label, unit = _STAGES[stage]
        elapsed = now - self._started[stage]
        eta = (
            f", about {elapsed / done * (total - done):.0f} s left"
            if 0 < done < total and elapsed > 1
            else ""
        )
        unit = unit if total != 1 else unit.removesuffix("s")
        typer.echo(f"{label}: {done:,} of {total:,} {unit}{eta}", err=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)


def _print_report(report: "IndexReport") -> None:

    for message in report.messages:
        typer.echo(f"note: {message}", err=True)
    typer.echo(
        f"indexed {report.repo}: {plural(report.files, 'file')}, {plural(report.chunks, 'chunk')}, "
        f"{report.embedded} embedded, "
        f"{report.skipped} skipped, {report.seconds:.1f} s"
    )
    if report.skipped_files:
        shown = ", ".join(f"{s.path} ({s.reason})" for s in report.skipped_files[:10])
        more = f" and {report.skipped - 10} more" if report.skipped > 10 else ""
        typer.echo(f"skipped: {shown}{more}")


_Result = TypeVar("_Result")


def _run(main: Callable[[], Awaitable[_Result]]) -> _Result:
    """Run `main`; turn the index's typed errors into a message and an exit code: 2 for what the
    command line named wrong (the repository, the query, the index directory), 1 for an index that
    failed (its storage, a lock held too long)."""
    import anyio

    try:
        return anyio.run(main)
    except (RepoNotFound, InvalidQuery, IndexDirUnusable) as exc:
        raise usage_error(str(exc)) from None
    except SearchError as exc:
        raise fail(str(exc)) from None
