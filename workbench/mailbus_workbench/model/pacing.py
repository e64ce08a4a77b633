"""How many queued events one refresh folds into the model: about `budget_s` worth at the
fold rate last measured, so that a key never waits behind a long fold (issue 15 item 8).
A feed more than half full folds `ceiling` at once to catch up before it drops events."""

from __future__ import annotations

from dataclasses import dataclass

PUMP_LIMIT = 20_000  # events folded per refresh at most (200k/s at 10 Hz)
PUMP_BUDGET_S = 0.010
PUMP_FLOOR = 500  # events per refresh at least, however slow the fold


@dataclass
class FoldPacer:
    budget_s: float | None = PUMP_BUDGET_S  # None: `ceiling` every refresh
    ceiling: int = PUMP_LIMIT
    floor: int = PUMP_FLOOR

    def __post_init__(self) -> None:
        if self.floor < 1 or self.ceiling < self.floor:
            raise ValueError("need 1 <= floor <= ceiling")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError("the budget must be positive (or None)")
        self._limit = self.ceiling

    def limit(self, backlog: int, capacity: int) -> int:
        """Events to fold now, with `backlog` queued in a feed of `capacity`."""
        if self.budget_s is None or backlog > capacity // 2:
            return self.ceiling
        return self._limit

    def folded(self, taken: int, seconds: float) -> None:
        """`taken` events took `seconds`: the next limit follows that rate."""
        if self.budget_s is None or taken < self.floor or seconds <= 0:
            return  # too few to measure a rate
        wanted = int(taken / seconds * self.budget_s)
        self._limit = max(self.floor, min(self.ceiling, wanted))
