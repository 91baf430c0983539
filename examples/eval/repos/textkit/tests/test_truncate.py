from textkit.truncate import truncate, truncate_words


def test_short_text_is_unchanged():
    assert truncate("hello", 10) == "hello"


def test_truncated_text_is_exactly_the_limit_long():
    out = truncate("abcdefghijklmnop", 10)
    assert out == "abcdefg..." and len(out) == 10


def test_truncate_words_cuts_at_a_space():
    assert truncate_words("the quick brown fox", 14) == "the quick..."
