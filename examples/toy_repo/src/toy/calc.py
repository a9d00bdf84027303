"""Small arithmetic helpers."""


def total(values):
    result = 0
    for value in values:
        result += value
    return result


def mean(values):
    if not values:
        raise ValueError("mean of an empty list")
    return total(values) // len(values)
