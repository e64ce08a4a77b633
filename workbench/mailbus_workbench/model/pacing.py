"""How many queued events one fold takes into the model: about `budget_s` worth at the
fold rate last measured, so that a key never waits behind a long fold.

A backlog (after a stall, or a feed filling faster than one fold a refresh takes) is
folded in slices of that size one after the other, never in one long fold: the app
(`folding.py`) lets the keys pressed meanwhile in between two slices, so a key waits for
one slice at most. A feed that fills faster than the UI thread can fold drops its oldest events
(counted in the status line) rather than hold the keys up."""

from __future__ import annotations

from dataclasses import dataclass

PUMP_LIMIT = 20_000  # events folded per fold at most (200k/s at 10 Hz)
PUMP_BUDGET_S = 0.010
PUMP_FLOOR = 500  # events per fold at least, however slow the fold


@dataclass
class FoldPacer:
    budget_s: float | None = PUMP_BUDGET_S  # None: `ceiling` every refresh, no slices
    ceiling: int = PUMP_LIMIT
    floor: int = PUMP_FLOOR

    def __post_init__(self) -> None:
        if self.floor < 1 or self.ceiling < self.floor:
            raise ValueError("need 1 <= floor <= ceiling")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError("the budget must be positive (or None)")
        # No rate measured yet: a small first fold, which measures it.
        self._limit = self.ceiling if self.budget_s is None else self.floor

    def limit(self) -> int:
        """Events to fold now."""
        return self.ceiling if self.budget_s is None else self._limit

    def folded(self, taken: int, seconds: float) -> None:
        """`taken` events took `seconds`: the next limit follows that rate."""
        if self.budget_s is None or taken < self.floor or seconds <= 0:
            return  # too few to measure a rate
        wanted = int(taken / seconds * self.budget_s)
        self._limit = max(self.floor, min(self.ceiling, wanted))

    def another_slice(self, asked: int, taken: int, left: int) -> bool:
        """Whether a fold that was allowed `asked` events and took `taken`, with `left`
        still queued, should be followed by another at once: it stopped at its limit."""
        return self.budget_s is not None and left > 0 and taken >= asked
