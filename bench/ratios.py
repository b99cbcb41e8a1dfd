"""Ratios against a baseline measured in rounds that alternate with it."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence


def median_of_round_ratios(measured: Sequence[float], baseline: Sequence[float]) -> float:
    """The median over rounds of ``measured`` / ``baseline``, each a round's median from the
    same round: a round the machine slowed moves both of its medians, or one ratio among
    many, not the figure."""
    return statistics.median(m / b for m, b in zip(measured, baseline, strict=True))


def round_orders(names: Sequence[str], rounds: int) -> list[tuple[str, ...]]:
    """The order of the paths in each round: every permutation in turn (where a path stands
    in its round moves it, so each stands in every place alike)."""
    orders = list(itertools.permutations(names))
    return [orders[n % len(orders)] for n in range(rounds)]
