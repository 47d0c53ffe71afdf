"""Token counting when an endpoint reports none, and for the simulated model.

A fixed rule (about four characters per token, the usual rule of thumb for English and
code with BPE tokenisers) rather than a downloaded vocabulary: it must work offline, and
what matters for budgets is that every method is counted the same way.
"""

from __future__ import annotations


def count_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)
