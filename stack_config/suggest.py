"""Did-you-mean for config problems: the known name a mistyped one most likely meant.

Standard library close matching (``difflib``), after two cheaper guesses: a name that is
a known one in other case (``originMemoryMB``, ``EU-West-1``), then the one known name
with the same letters (two letters swapped: ``eu-wset-1``, ``us-aest-1``, which difflib's
ratio alone ranks no closer to ``us-east-1`` than to ``us-west-1``); otherwise the closest
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
    same_letters = [k for k in by_lower if sorted(k) == sorted(folded)]
    if len(same_letters) == 1:
        return by_lower[same_letters[0]]
    matches = difflib.get_close_matches(folded, list(by_lower), n=1, cutoff=CUTOFF)
    return by_lower[matches[0]] if matches else None


def did_you_mean(word: str, known: Iterable[str], prefix: str = "") -> str:
    """``"; did you mean <prefix><name>?"`` to append to a problem, or ``""``."""
    match = closest(word, known)
    return f"; did you mean {prefix}{match}?" if match else ""
