"""The answers the examples' tools must give, computed here independently of the servers."""

from __future__ import annotations

import hashlib

TEXT = "The cat and the hat\nthe end"
ROUNDS = 40
STATS = {
    "characters": 27,
    "words": 7,
    "lines": 2,
    # "cat" ties "and", "hat" and "end" at 1 and comes first in the text.
    "top_words": [{"word": "the", "count": 3}, {"word": "cat", "count": 1}],
}
# hash_rounds reports after every quarter of the rounds.
PROGRESS = [(10.0, 40.0, "10 of 40 rounds"), (20.0, 40.0, "20 of 40 rounds"), (30.0, 40.0, "30 of 40 rounds"),
            (40.0, 40.0, "40 of 40 rounds")]
TOOLS = ["admin_runtime_info", "hash_rounds", "text_stats"]


def hash_rounds(text: str, rounds: int) -> str:
    digest = text.encode()
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()
