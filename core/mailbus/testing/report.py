"""How a failed expectation reads in a terminal: what was expected, the nearest misses
with a field-by-field diff, and a timeline of what arrived."""

from __future__ import annotations

from collections.abc import Sequence

from mailbus.testing.matching import Observed, Where, distance

TIMELINE_LINES = 20
NEAREST = 3
BODY_CHARS = 100


def shown_body(body: str, limit: int = BODY_CHARS) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def stamp(observed: Observed, origin_ns: int) -> str:
    """When it arrived, in seconds after `origin_ns` (the arming of the expectation)."""
    return f"+{(observed.received_ns - origin_ns) / 1e9:.3f} s"


def nearest_misses(
    where: Where, misses: Sequence[Observed], origin_ns: int, limit: int = NEAREST
) -> list[str]:
    """The closest misses first (fewest differing fields, then the latest), each with
    the fields that differ; empty when nothing was missed."""
    if not misses:
        return []
    ranked = sorted(misses, key=lambda o: (distance(where, o), -o.received_ns))[:limit]
    lines = ["nearest misses (closest first):"]
    for observed in ranked:
        lines.append(f"  {stamp(observed, origin_ns)}  {observed.what} {shown_body(observed.body)}")
        diffs = where.diff(observed)
        if diffs:
            lines.extend(f"      {d.line()}" for d in diffs)
        elif where.text:
            lines.append(f"      does not satisfy {where.text}")
    return lines


def timeline(
    observed: Sequence[Observed],
    matched: set[int],
    total: int,
    origin_ns: int,
    limit: int = TIMELINE_LINES,
) -> list[str]:
    """What arrived, in order; `matched` holds the ids of the matching ones and `total`
    counts those no longer kept."""
    if not total:
        return ["timeline: nothing arrived"]
    lines = [f"timeline ({total} arrived, {len(matched)} matched):"]
    rows = list(observed)
    skipped = 0
    if len(rows) > limit:
        skipped = len(rows) - limit
        rows = rows[: limit // 2] + rows[-(limit - limit // 2) :]
    for i, item in enumerate(rows):
        if skipped and i == limit // 2:
            lines.append(f"  ... {skipped} more ...")
        mark = "match" if id(item) in matched else "call " if item.what == "request" else "miss "
        lines.append(
            f"  {stamp(item, origin_ns)}  {mark}  {item.what} {item.name}  {shown_body(item.body)}"
        )
    if total > len(observed):
        lines.append(f"  (the first {total - len(observed)} are no longer kept)")
    return lines
