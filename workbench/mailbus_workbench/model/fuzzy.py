"""Fuzzy filtering of names: the query's characters in order, anywhere in the name."""

from __future__ import annotations

from collections.abc import Iterable


def fuzzy_score(query: str, name: str) -> int | None:
    """A score (higher is better) if every character of `query` appears in `name` in
    order (case-insensitive), else None. Consecutive and segment-start hits score more."""
    if not query:
        return 0
    q = query.lower()
    n = name.lower()
    score = 0
    pos = 0
    previous = -2
    for ch in q:
        if ch == " ":
            continue
        found = n.find(ch, pos)
        if found < 0:
            return None
        score += 1
        if found == previous + 1:
            score += 2
        if found == 0 or n[found - 1] in "/_-.":
            score += 3
        previous = found
        pos = found + 1
    return score


def fuzzy_filter(query: str, names: Iterable[str]) -> list[str]:
    """Names matching `query`, best first (ties keep alphabetical order)."""
    scored = []
    for name in sorted(names):
        score = fuzzy_score(query, name)
        if score is not None:
            scored.append((-score, name))
    scored.sort()
    return [name for _, name in scored]
