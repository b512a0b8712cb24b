"""Phrasing shared by the package's messages and reports."""
from __future__ import annotations

from typing import Sequence


def listed(words: Sequence[str], conjunction: str = "and") -> str:
    """"a", "a and b", "a, b and c" (or with "or"): a list as a sentence names it."""
    if not words:
        raise ValueError("listed() needs at least one word")
    if len(words) == 1:
        return words[0]
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"
