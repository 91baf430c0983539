"""Issue-shaped queries are taken apart into the parts each retrieval suits: paths and traceback
frames for exact file look-ups, identifiers for definitions, prose and pieces for the model."""

from tool_servers.search.index.query_parts import MAX_PIECES, PIECE_WORDS, decompose

TRACEBACK_ISSUE = """\
Client.send raises KeyError when the proxy URL has no port

Using httpx behind a proxy configured as `HTTPS_PROXY=http://proxy.local` fails:

```python
import httpx
with httpx.Client() as client:
    client.get("https://example.org")
```

```
Traceback (most recent call last):
  File "/home/me/app.py", line 3, in <module>
    client.get("https://example.org")
  File "/usr/lib/python3.11/site-packages/httpx/_client.py", line 1041, in get
    return self.request(
  File "/usr/lib/python3.11/site-packages/httpx/_transports/default.py", line 218, in handle_request
    port = url.port or DEFAULT_PORTS[url.scheme]
KeyError: 'http'
```

I think `_transports/default.py` should fall back to `httpx._urls.URL.port`.
"""

DOCTEST_ISSUE = """\
latex() prints Subs wrongly

    >>> from sympy.printing.latex import latex
    >>> latex(3*Subs(-x+y, (x,), (1,)))
    '3 \\\\left. - x + y \\\\right|_{\\\\substack{ x=1 }}'

Parenthesizing would be better. The printer method is `LatexPrinter._print_Subs`.
"""

NON_ASCII_ISSUE = """\
pprint ne gère pas les symboles grecs: ω₀ s'affiche mal

Avec `pretty_print(Symbol("ω₀"))` j'obtiens « ω0 » au lieu de « ω₀ » — voir sympy/printing/pretty/pretty_symbology.py.
"""


BANNER_ISSUE = """\
Wrong result with apart
```
Python 3.6.0 |Continuum Analytics, Inc.| (default, Dec 23 2016, 12:22:00)
Type "copyright", "credits" or "license" for more information.

IPython 5.1.0 -- An enhanced Interactive Python.
?         -> Introduction and overview of IPython's features.
%quickref -> Quick reference.
help      -> Python's own help system.
object?   -> Details about 'object', use 'object??' for extra details.

In [1]: from sympy import symbols

In [2]: bug = a * (-t + (-t + 1) * (2 * t - 1)) / (2 * t - 1)

In [3]: bug.apart(t)
Traceback (most recent call last):
  File "C:\\Users\\Me\\AppData\\Local\\Programs\\Python\\Python36\\lib\\site-packages\\sympy\\polys\\partfrac.py", line 131, in apart_undetermined_coeffs
    P, Q = P.div(Q)
  File "/Users/me/Documents/sympy/sympy/polys/polytools.py", line 1227, in div
    q, r = F.div(G)
ZeroDivisionError: polynomial division
```
"""


def test_an_interpreter_banner_and_the_directories_of_pasted_paths_are_not_names() -> None:
    """The start-up lines of Python and IPython and the directories of a traceback's paths
    (`Users`, `AppData`, `Documents`) would read as CamelCase names; the file names, the frames'
    functions and the session's code stay."""
    issue = decompose(BANNER_ISSUE)
    names = set(issue.identifiers)
    for noise in ("Continuum", "Analytics", "IPython", "Python", "Users", "AppData", "Local", "Documents"):
        assert noise not in names, noise
    assert {"bug.apart", "apart_undetermined_coeffs", "partfrac.py", "polytools.py"} <= names
    assert issue.frames[0].path == "/Users/me/Documents/sympy/sympy/polys/polytools.py"  # still whole
    assert issue.frames[1].function == "apart_undetermined_coeffs"
    assert "Continuum" not in " ".join(issue.pieces)
    # A sentence about a Python version is prose, not a banner.
    assert "released 2020" in decompose("Slow import\n\nPython 3.9.1 (released 2020) broke it").prose


def test_a_traceback_gives_frames_innermost_first_and_its_error_line() -> None:
    """The innermost frame is where the failure is: it comes first (depth 0), its caller next."""
    parsed = decompose(TRACEBACK_ISSUE)
    assert [f.function for f in parsed.frames] == ["handle_request", "get", "<module>"]
    assert [f.depth for f in parsed.frames] == [0, 1, 2]
    assert parsed.frames[0].path.endswith("httpx/_transports/default.py")
    assert parsed.frames[0].line == 218
    assert parsed.errors == ["KeyError: 'http'"]


def test_paths_dotted_names_and_identifiers_of_an_issue_are_found_with_title_names_weighing_most() -> None:
    """A path in prose, a dotted module path and a `Class.method` in the title are all kept; the
    title's name outweighs one that only occurs in pasted code."""
    parsed = decompose(TRACEBACK_ISSUE)
    assert "_transports/default.py" in parsed.paths
    assert "httpx._urls.URL.port" in parsed.modules
    assert parsed.identifiers["Client.send"] > parsed.identifiers.get("Client", 0)
    assert parsed.identifiers["handle_request"] > 0
    assert parsed.title.startswith("Client.send raises KeyError")


def test_code_blocks_and_doctest_lines_are_separated_from_the_prose() -> None:
    """Fenced blocks and `>>>` sessions are code; the prose keeps the sentences around them."""
    parsed = decompose(TRACEBACK_ISSUE)
    assert any("httpx.Client()" in block for block in parsed.code)
    assert "httpx.Client()" not in parsed.prose
    assert "fails" in parsed.prose
    doctest = decompose(DOCTEST_ISSUE)
    assert any("latex(3*Subs" in block for block in doctest.code)
    assert "sympy.printing.latex" in doctest.modules
    assert "LatexPrinter._print_Subs" in doctest.identifiers
    assert "Parenthesizing" in doctest.prose


def test_non_ascii_text_keeps_its_path_and_identifiers() -> None:
    """Accents, subscripts and guillemets around the code names do not hide them."""
    parsed = decompose(NON_ASCII_ISSUE)
    assert "sympy/printing/pretty/pretty_symbology.py" in parsed.paths
    assert "pretty_print" in parsed.identifiers
    assert parsed.pieces and "ω₀" in parsed.pieces[0]


def test_long_text_is_embedded_in_bounded_window_sized_pieces() -> None:
    """The model reads about 128 tokens: a long issue becomes several pieces, never more than
    `MAX_PIECES`, each at most `PIECE_WORDS` words, the title's start first."""
    prose = " ".join(f"the printer drops parentheses around term{i} when nested" for i in range(400))
    parsed = decompose("Nested Mul printing loses parentheses\n\n" + prose)
    assert 1 < len(parsed.pieces) <= MAX_PIECES
    assert all(len(p.split()) <= PIECE_WORDS for p in parsed.pieces)
    assert parsed.pieces[0].startswith("Nested Mul printing loses parentheses")


def test_a_100_kb_paste_is_taken_apart_quickly_and_boundedly() -> None:
    """A huge log pasted into an issue must not make the query slow or its parts unbounded."""
    frame = '  File "/srv/pkg/mod{0}.py", line {0}, in func_{0}\n    call()\n'
    text = "Crash in worker\n\n" + "".join(frame.format(i) for i in range(2000)) + "ValueError: boom\n"
    text += "x" * (100_000 - len(text))
    parsed = decompose(text)
    assert len(parsed.frames) <= 100 and parsed.frames[0].function == "func_1999"
    assert len(parsed.identifiers) <= 200
    assert len(parsed.pieces) <= MAX_PIECES


def test_an_empty_or_blank_query_gives_empty_parts() -> None:
    """Decomposition never raises; refusing empty queries is the query parser's job."""
    parsed = decompose("   \n  ")
    assert parsed.title == "" and not parsed.pieces and not parsed.identifiers
