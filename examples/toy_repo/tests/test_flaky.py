import random


def test_coin_flip():
    assert random.random() < 0.5
