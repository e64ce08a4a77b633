"""Completion from names the model has seen (topics, services)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from textual.suggester import Suggester


class NameSuggester(Suggester):
    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self._names = names

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        for name in sorted(self._names()):
            if name.startswith(value) and name != value:
                return name
        return None
