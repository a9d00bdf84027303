"""Word frequencies."""

import re
from collections import Counter


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The n most frequent words of text, most frequent first (ties alphabetical)."""
    counts = Counter(re.findall(r"[A-Za-z]+", text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
