"""Did-you-mean for config problems: the known name a mistyped one most likely meant.

Standard library close matching (``difflib``), after two cheaper guesses: a name that is
a known one in other case (``originMemoryMB``, ``EU-West-1``), then the one known name
two swapped letters away (``eu-wset-1``, ``us-aest-1``, which difflib's ratio alone ranks no
closer to ``us-east-1`` than to ``us-west-1``; not any name of the same letters: ``ervers`` is
``servers`` with a letter dropped, not ``server`` rearranged); otherwise the closest
known name above ``CUTOFF``, so nonsense gets no suggestion.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# difflib's similarity ratio (0-1) below which a known name is not offered: high
# enough that an unrelated name ("moon-1" for a region) gets no suggestion, low
# enough for a swapped or dropped letter in a short name ("eu-wset-1", "regoins").
CUTOFF = 0.75


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name ``word`` most likely means, or None when none is close."""
    candidates = [k for k in known if k != word]
    by_lower = {k.lower(): k for k in candidates}
    folded = word.strip().lower()
    if folded in by_lower:
        return by_lower[folded]
    swapped = [k for k in by_lower if _one_swap(k, folded)]
    if len(swapped) == 1:
        return by_lower[swapped[0]]
    matches = difflib.get_close_matches(folded, list(by_lower), n=1, cutoff=CUTOFF)
    return by_lower[matches[0]] if matches else None


def _one_swap(a: str, b: str) -> bool:
    """``a`` is ``b`` with two of its letters swapped."""
    if len(a) != len(b):
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def did_you_mean(word: str, known: Iterable[str], prefix: str = "") -> str:
    """``"; did you mean <prefix><name>?"`` to append to a problem, or ``""``."""
    match = closest(word, known)
    return f"; did you mean {prefix}{match}?" if match else ""
