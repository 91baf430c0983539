from textkit.slug import slugify, unique_slug


def test_slugify_folds_accents():
    assert slugify("Crème Brûlée") == "creme-brulee"


def test_slugify_respects_max_length_at_a_word_boundary():
    assert slugify("one two three four", max_length=12) == "one-two"


def test_unique_slug_numbers_from_two():
    assert unique_slug("Hello", {"hello", "hello-2"}) == "hello-3"
