import pytest

from toy.calc import mean, total


def test_total():
    assert total([1, 2, 3]) == 6


def test_mean_of_even_total():
    assert mean([2, 4]) == 3


def test_mean_of_odd_total():
    assert mean([1, 2]) == 1.5


def test_mean_of_empty_list_raises():
    with pytest.raises(ValueError):
        mean([])
