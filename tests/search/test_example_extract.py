"""Taking the runnable statements out of real issue texts: sessions lose their prompts and
output, scripts stay whole, tracebacks and printed output are not code."""

from tool_servers.example_code import MAX_EXAMPLE_CHARS, example_blocks

DOCTEST_ISSUE = """\
ccode(sinc(x)) doesn't work
```
In [30]: ccode(sinc(x))
Out[30]: '// Not supported in C:\\n// sinc\\nsinc(x)'
```

I don't think `math.h` has `sinc`, but it could print
```
In [38]: ccode(Piecewise((sin(theta)/theta, Ne(theta, 0)), (1, True)))
Out[38]: '((Ne(theta, 0)) ? (\\n   sin(theta)/theta\\n)\\n: (\\n   1\\n))'
```
"""


def test_an_ipython_session_keeps_its_input_lines_only() -> None:
    """Our choice: what the writer typed runs; what the interpreter printed back does not."""
    assert example_blocks(DOCTEST_ISSUE) == [
        "ccode(sinc(x))",
        "ccode(Piecewise((sin(theta)/theta, Ne(theta, 0)), (1, True)))",
    ]


def test_a_doctest_session_joins_continuation_lines_and_drops_output() -> None:
    text = """distance calculation wrong
``` python
>>> def f(p):
...     return p.distance(Point(1, 0, 2))
...
>>> f(Point(2, 0))
1
```
"""
    assert example_blocks(text) == ["def f(p):\n    return p.distance(Point(1, 0, 2))\n\nf(Point(2, 0))"]


def test_ipython_continuation_prompts_are_stripped() -> None:
    text = "```\nIn [1]: for i in range(2):\n   ...:     print(i)\n   ...:\n0\n1\n```"
    assert example_blocks(text) == ["for i in range(2):\n    print(i)\n"]


def test_a_script_block_runs_whole_and_a_traceback_block_not_at_all() -> None:
    text = """Factor with extension=True drops a factor of y-1
```python
from sympy import *
z = expand((x-1)*(y-1))
factor(z, extension=[I])
```
Raises
```
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/sympy/polys/factortools.py", line 12, in dup_ext_factor
    return f(x)
ValueError: no
```
"""
    assert example_blocks(text) == [
        "from sympy import *\nz = expand((x-1)*(y-1))\nfactor(z, extension=[I])\n"
    ]


def test_printed_output_in_a_fence_is_not_code() -> None:
    """A block of results (`[1, 2]`, `x + 1`) calls and assigns nothing: nothing to trace."""
    text = "It gives\n```\n[1, 2]\nx + 1\n```\nand with pretty printing\n```\n  2\nx  + 1\n```"
    assert example_blocks(text) == []


def test_a_block_with_some_valid_lines_is_kept_for_the_tracer_to_run_them() -> None:
    text = "```\nresult = simplify(expr)\n-> this hangs forever\n```"
    assert example_blocks(text) == ["result = simplify(expr)\n-> this hangs forever\n"]


def test_prompted_lines_in_the_prose_form_a_block_of_their_own() -> None:
    text = "Title\n\nHere it is:\n\n    >>> Point(2,0).distance(Point(1,0,2))\n    1\n\nbut sqrt(5) was expected."
    assert example_blocks(text) == ["Point(2,0).distance(Point(1,0,2))"]


def test_non_ascii_text_and_windows_line_ends_are_handled() -> None:
    text = "pprint unicode does not format subscripts on Greek letters\r\n```\r\n>>> pprint(Symbol('ω0'))\r\nω₀\r\n```\r\n"
    assert example_blocks(text) == ["pprint(Symbol('ω0'))"]


def test_an_issue_without_code_has_no_examples() -> None:
    assert example_blocks("The docs of `Pow` say 0**-oo is zoo, but it gives 0.") == []


def test_a_huge_paste_is_cut_to_the_cap() -> None:
    """A pasted log is not a reproduction: the examples stay within MAX_EXAMPLE_CHARS."""
    line = "value = compute(1, 2, 3)\n"
    text = "".join(f"```\n{line * 200}```\n" for _ in range(100))  # ~500 KB
    blocks = example_blocks(text)
    assert blocks and sum(map(len, blocks)) <= MAX_EXAMPLE_CHARS
