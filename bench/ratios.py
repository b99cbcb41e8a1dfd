"""Ratios against a baseline measured in rounds that alternate with it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def median_of_round_ratios(measured: Sequence[float], baseline: Sequence[float]) -> float:
    """The median over rounds of ``measured`` / ``baseline``, each a round's median from the
    same round: a round the machine slowed moves both of its medians, or one ratio among
    many, not the figure."""
    return statistics.median(m / b for m, b in zip(measured, baseline, strict=True))
