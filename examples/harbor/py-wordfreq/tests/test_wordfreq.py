import sys

sys.path.insert(0, "/app")

from wordfreq import top_words


def test_counts_words():
    assert top_words("a b a", 1) == [("a", 2)]


def test_ignores_case():
    assert top_words("The cat saw the dog. THE end.", 1) == [("the", 3)]


def test_returns_lower_case():
    assert top_words("Apple apple Banana", 2) == [("apple", 2), ("banana", 1)]


def test_ties_alphabetical():
    assert top_words("b a c", 3) == [("a", 1), ("b", 1), ("c", 1)]
