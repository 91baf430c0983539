"""File ranking aggregates chunk evidence per file and adds what the issue names outright:
paths, traceback frames, dotted modules and the definitions of its identifiers; test files rank
after the source they test unless tests are wanted."""

from tool_servers.search.index import filerank
from tool_servers.search.index.filerank import Evidence, imports_of, is_test_path, rank_files
from tool_servers.search.index.query_parts import decompose
from tool_servers.search.index.rows import ChunkMeta, ChunkRow

PATHS = [
    "pkg/__init__.py",
    "pkg/core/basic.py",
    "pkg/core/expr.py",
    "pkg/printing/latex.py",
    "pkg/printing/str.py",
    "pkg/printing/tests/test_latex.py",
    "pkg/utils/misc.py",
    "other/latex.py",
]


def row(
    path: str,
    score: float = 1.0,
    *,
    name: str | None = None,
    symbol: str | None = None,
    kind: str = "function",
    text: str = "...",
) -> ChunkRow:
    return ChunkRow(
        id=f"{path}:{name}:{score}",
        path=path,
        start_line=1,
        end_line=5,
        symbol=symbol or name,
        name=name,
        kind=kind,
        text=text,
        _score=score,
    )


def ranked(evidence: Evidence, *, keep_tests: bool = False) -> list[str]:
    return [f.path for f in rank_files(evidence, keep_tests=keep_tests)]


def test_a_file_with_several_matching_chunks_outranks_one_with_a_single_slightly_better_chunk() -> None:
    """Evidence spread over a file counts: best chunk plus decayed next ones, not the best alone."""
    keyword = [row("pkg/core/expr.py", 10.0), row("pkg/core/basic.py", 9.0), row("pkg/core/basic.py", 8.0)]
    order = ranked(Evidence(issue=decompose("expression printing"), paths=PATHS, keyword=keyword))
    assert order[:2] == ["pkg/core/basic.py", "pkg/core/expr.py"]


def test_a_path_named_in_the_issue_comes_first_even_without_chunk_evidence() -> None:
    """`pkg/printing/str.py` written in the issue outweighs keyword and vector ranks elsewhere."""
    issue = decompose("Wrong output\n\nThe bug is in pkg/printing/str.py, I think.")
    keyword = [row("pkg/core/basic.py", 5.0), row("pkg/core/expr.py", 4.0)]
    vector: list[list[ChunkMeta]] = [[row("pkg/core/expr.py"), row("pkg/core/basic.py")]]
    order = ranked(Evidence(issue=issue, paths=PATHS, keyword=keyword, vector=vector))
    assert order[0] == "pkg/printing/str.py"


def test_the_innermost_traceback_frame_in_the_repository_weighs_most() -> None:
    """Frames outside the repository are ignored; of the two inside, the innermost ranks first."""
    issue = decompose(
        "Crash\n\nTraceback (most recent call last):\n"
        '  File "/home/u/pkg/core/expr.py", line 10, in run\n'
        '  File "/home/u/pkg/core/basic.py", line 20, in inner\n'
        '  File "/usr/lib/python3.11/json/decoder.py", line 3, in decode\n'
        "ValueError: bad\n"
    )
    order = ranked(Evidence(issue=issue, paths=PATHS))
    assert order[:2] == ["pkg/core/basic.py", "pkg/core/expr.py"]


def test_the_files_of_what_the_examples_raised_gain_as_traceback_frames_do() -> None:
    """The innermost repository frame of an exception an example raised gains the most, its caller
    less, a file in two tracebacks only its larger boost, and a file no longer indexed nothing."""
    raised = [
        ["pkg/core/basic.py", "pkg/core/expr.py", "gone/old.py"],
        ["pkg/core/expr.py"],
        ["pkg/printing/str.py", "pkg/core/expr.py", "pkg/utils/misc.py"],
    ]
    boosts = filerank.raised_files(raised, set(PATHS))
    assert boosts == {
        "pkg/core/basic.py": filerank.RAISED_BOOST,
        "pkg/core/expr.py": filerank.RAISED_BOOST,
        "pkg/printing/str.py": filerank.RAISED_BOOST,
        "pkg/utils/misc.py": filerank.RAISED_BOOST * filerank.FRAME_DECAY**2,
    }
    # The innermost frame outranks the best keyword match; a caller two frames out does not.
    keyword = [row("pkg/printing/latex.py", 5.0)]
    order = ranked(Evidence(issue=decompose("Crash"), paths=PATHS, keyword=keyword, raised=raised[2:]))
    assert order == ["pkg/printing/str.py", "pkg/printing/latex.py", "pkg/core/expr.py", "pkg/utils/misc.py"]


def test_a_file_in_a_traceback_counts_as_a_frame_not_also_as_a_path_the_writer_named() -> None:
    """A relative path printed in a frame is found as a path too; it is weighed once, by depth, so
    the file a traceback ends in does not outweigh a definition the title names."""
    issue = decompose(
        "Contains.as_set returns Contains\n\nTraceback (most recent call last):\n"
        '  File "./pkg/core/expr.py", line 10, in run\n'
        "AttributeError: 'Contains' object has no attribute 'as_relational'\n"
    )
    assert "./pkg/core/expr.py" in issue.paths
    assert filerank.mentioned_files(issue, PATHS) == {"pkg/core/expr.py": filerank.FRAME_BOOST}
    named = decompose("See pkg/core/expr.py")
    assert filerank.mentioned_files(named, PATHS) == {"pkg/core/expr.py": filerank.PATH_BOOST}


def test_a_dotted_module_path_resolves_to_its_file() -> None:
    """`from pkg.printing.latex import latex` names pkg/printing/latex.py, not other/latex.py."""
    issue = decompose("Bad output\n\n>>> from pkg.printing.latex import latex\n>>> latex(x)\n")
    order = ranked(Evidence(issue=issue, paths=PATHS))
    assert order[0] == "pkg/printing/latex.py"
    assert "other/latex.py" not in order[:1]


def test_definitions_of_a_rare_name_count_and_a_name_defined_everywhere_does_not() -> None:
    """A name defined in one file points at it; one defined in more than MAX_DEFINING_FILES says nothing."""
    issue = decompose("`render_matrix` breaks on empty input and `_print` too")
    definitions = [row("pkg/printing/str.py", name="render_matrix")]
    definitions += [row(p, name="_print") for p in PATHS] * 2
    definitions += [row(f"gen/m{i}.py", name="_print") for i in range(filerank.MAX_DEFINING_FILES)]
    order = ranked(
        Evidence(issue=issue, paths=[*PATHS, *(f"gen/m{i}.py" for i in range(8))], definitions=definitions)
    )
    assert order == ["pkg/printing/str.py"]


def test_a_name_written_in_one_case_means_the_definition_of_that_case_when_there_is_one() -> None:
    """`e.subs(...)` is the method `subs`, not the class `Subs`; `Subs` is the class; a name no
    definition spells as written (a capitalised word) still finds its definitions in any case."""
    definitions = [
        row("pkg/core/basic.py", name="subs", symbol="Basic.subs", kind="method"),
        row("pkg/printing/str.py", name="subs", symbol="Subs", kind="class"),
        row("pkg/utils/misc.py", name="render", symbol="render"),
    ]

    def boosted(text: str) -> list[str]:
        return ranked(Evidence(issue=decompose(text), paths=PATHS, definitions=definitions))

    assert boosted("Wrong result\n\n`e.subs(x, 1)` gives 2") == ["pkg/core/basic.py"]
    assert boosted("Wrong result\n\n`Subs(x, x, 1)` prints badly") == ["pkg/printing/str.py"]
    assert boosted("Wrong result\n\n`Render` drops the last line") == ["pkg/utils/misc.py"]


def test_a_module_path_is_a_mention_of_its_file_not_a_name_of_what_it_defines() -> None:
    """`from pkg.printing.latex import render` mentions latex.py, which gains the module boost and
    nothing more: `pkg.printing.latex` is not a name the issue uses, so the function `latex`
    defined there is no definition the issue names. A package names no one file: its name stays."""
    issue = decompose("Wrong output\n\n```\n>>> from pkg.printing.latex import render\n```\n")
    definitions = [row("pkg/printing/latex.py", name="latex", text=f"part {i}") for i in range(3)]
    assert "pkg.printing.latex" in issue.identifiers
    assert "pkg.printing.latex" not in filerank.symbol_names(issue, PATHS)
    package = decompose("Bad output\n\nI saw it among others in pkg.printing, I think")
    assert "pkg.printing" in filerank.symbol_names(package, [*PATHS, "pkg/printing/__init__.py"])
    files = rank_files(Evidence(issue=issue, paths=PATHS, definitions=definitions))
    assert [(f.path, f.score) for f in files] == [("pkg/printing/latex.py", filerank.MODULE_BOOST)]


def test_a_file_named_like_a_name_the_issue_uses_gains_unless_many_files_share_the_name() -> None:
    """`expr` in backticks lifts `expr.py` over a file one keyword rank ahead; a document of that
    name gains nothing, and neither does a name three files share."""
    paths = [*PATHS, "docs/expr.md", "a/misc.py", "b/misc.py"]
    keyword = [row("pkg/core/basic.py", 5.0), row("pkg/core/expr.py", 4.9), row("docs/expr.md", 4.8)]
    issue = decompose("`expr` drops terms")
    assert ranked(Evidence(issue=issue, paths=paths, keyword=keyword))[:3] == [
        "pkg/core/expr.py",
        "pkg/core/basic.py",
        "docs/expr.md",
    ]
    assert filerank.named_files(issue.identifiers, paths) == {
        "pkg/core/expr.py": filerank.NAMED_FILE_BOOST * 2.0
    }
    assert filerank.named_files(decompose("`misc` is slow").identifiers, paths) == {}


def test_a_module_imported_inside_a_deliberately_named_definition_gains() -> None:
    """`render_matrix` in backticks: the module its body imports lifts over a file one keyword rank
    ahead. The same name seen only in pasted code (a call among others) lends nothing."""
    body = "def render_matrix(m):\n    from pkg.utils.misc import join\n    return join(m)\n"
    definitions = [row("pkg/printing/str.py", name="render_matrix", text=body)]
    keyword = [row("pkg/core/basic.py", 5.0), row("pkg/utils/misc.py", 4.9)]
    named = decompose("`render_matrix` breaks on empty input")
    order = ranked(Evidence(issue=named, paths=PATHS, keyword=keyword, definitions=definitions))
    assert order.index("pkg/utils/misc.py") < order.index("pkg/core/basic.py")
    in_passing = decompose("Empty input breaks\n\n```\nm = make()\nrender_matrix(m)\n```\n")
    order = ranked(Evidence(issue=in_passing, paths=PATHS, keyword=keyword, definitions=definitions))
    assert order.index("pkg/core/basic.py") < order.index("pkg/utils/misc.py")


def test_test_files_rank_after_the_source_they_test_unless_tests_are_wanted() -> None:
    """For a fix, tests/test_latex.py ranks below latex.py even when its chunks match better."""
    keyword = [row("pkg/printing/tests/test_latex.py", 10.0), row("pkg/printing/latex.py", 6.0)]
    evidence = Evidence(issue=decompose("latex output of matrices"), paths=PATHS, keyword=keyword)
    assert ranked(evidence)[:2] == ["pkg/printing/latex.py", "pkg/printing/tests/test_latex.py"]
    assert ranked(evidence, keep_tests=True)[0] == "pkg/printing/tests/test_latex.py"


def test_test_paths_are_recognised_by_directory_and_name() -> None:
    """The same conventions the scorers of localization benchmarks use."""
    assert is_test_path("pkg/tests/test_a.py") and is_test_path("a/testing/b.py")
    assert is_test_path("conftest.py") and is_test_path("pkg/a_test.py")
    assert not is_test_path("pkg/attest.py") and not is_test_path("pkg/contest/b.py")


def test_imports_resolve_absolute_and_relative_module_paths_to_indexed_files() -> None:
    """`from .expr import Expr`, `from pkg.printing import latex` and `import pkg.utils.misc`."""
    text = "from .expr import Expr\nfrom pkg.printing import latex\nimport pkg.utils.misc\nimport os\n"
    found = imports_of("pkg/core/basic.py", text, set(PATHS))
    assert found == ["pkg/core/expr.py", "pkg/printing/latex.py", "pkg/utils/misc.py"]


MANY = [f"pkg/m{i:02d}.py" for i in range(20)] + ["pkg/tests/test_m15.py", "pkg/only_run.py"]


def _static(n: int = 20) -> Evidence:
    """Keyword evidence ranking pkg/m00.py first, pkg/m01.py second, ..."""
    keyword = [row(f"pkg/m{i:02d}.py", 100.0 - i) for i in range(n)]
    return Evidence(issue=decompose("a long story about numbers"), paths=MANY, keyword=keyword)


def test_files_the_examples_executed_take_the_ranks_after_the_static_head() -> None:
    """Our choice: the static ranking keeps its first EXECUTED_AFTER ranks; the next EXECUTED_SLOTS
    go to executed files, best static rank first; the rest follow in static order."""
    evidence = _static()
    evidence.executed = {"pkg/m02.py": 3, "pkg/m12.py": 1, "pkg/m17.py": 9, "pkg/m19.py": 2}
    order = ranked(evidence)
    head, after = filerank.EXECUTED_AFTER, filerank.EXECUTED_SLOTS
    assert order[:head] == [f"pkg/m{i:02d}.py" for i in range(head)]
    assert order[head : head + 3] == ["pkg/m12.py", "pkg/m17.py", "pkg/m19.py"]
    assert after >= 3 and order[head + 3 :][:2] == ["pkg/m05.py", "pkg/m06.py"]
    assert sorted(order) == sorted(ranked(_static()))  # nothing lost, nothing added


def test_an_executed_file_without_static_evidence_fills_a_slot_after_those_with_some() -> None:
    evidence = _static(8)
    evidence.executed = {"pkg/only_run.py": 4, "pkg/m07.py": 1}
    order = ranked(evidence)
    assert order[filerank.EXECUTED_AFTER : filerank.EXECUTED_AFTER + 2] == ["pkg/m07.py", "pkg/only_run.py"]


def test_executed_test_files_get_no_slot_unless_tests_are_wanted() -> None:
    """The tests an example happens to import are not what a fix changes."""
    evidence = _static()
    evidence.keyword.append(row("pkg/tests/test_m15.py", 50.0))
    evidence.executed = {"pkg/tests/test_m15.py": 5}
    assert ranked(evidence).index("pkg/tests/test_m15.py") > filerank.EXECUTED_AFTER + filerank.EXECUTED_SLOTS
    assert ranked(evidence, keep_tests=True).index("pkg/tests/test_m15.py") == filerank.EXECUTED_AFTER


def test_scores_stay_sorted_when_execution_moves_files_up() -> None:
    """A consumer may sort hits by score: a moved file shows the score of its slot."""
    evidence = _static()
    evidence.executed = {"pkg/m18.py": 1}
    files = rank_files(evidence)
    scores = [f.score for f in files]
    assert scores == sorted(scores, reverse=True)
    assert files[filerank.EXECUTED_AFTER].path == "pkg/m18.py"


def test_without_executed_files_the_ranking_is_the_static_one() -> None:
    evidence = _static()
    evidence.executed = {"pkg/m00.py": 1, "pkg/m01.py": 1}  # already in the head: nothing moves
    assert ranked(evidence) == ranked(_static())
