import pytest

from textkit.wrap import indent, wrap_words


def test_wrap_breaks_between_words():
    assert wrap_words("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_fills_lines_up_to_the_width():
    """A line of exactly `width` characters fits."""
    assert wrap_words("aaaa bbbb cccc", 9) == ["aaaa bbbb", "cccc"]


def test_long_word_gets_its_own_line():
    assert wrap_words("a verylongword b", 5) == ["a", "verylongword", "b"]


def test_width_must_be_positive():
    with pytest.raises(ValueError):
        wrap_words("x", 0)


def test_indent_keeps_empty_lines_bare():
    assert indent(["a", "", "b"]) == ["> a", "", "> b"]
