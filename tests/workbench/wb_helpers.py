"""Shared helpers of the Pilot tests."""

from __future__ import annotations

from typing import Any

from mailbus_workbench import textual_internals
from textual.message import Message
from textual.screen import Screen
from waiting import until

# until: the Pilot twin of waiting.eventually
__all__ = ["Posted", "layouts_of", "screen_text", "until"]


def layouts_of(screen: Screen[Any]) -> list[str]:
    """A list that gets an entry at each whole-screen layout of `screen` from now on
    (clear it to count from a later point)."""
    layouts: list[str] = []

    def counted(name: str, step: Any) -> Any:
        def run(*args: object, **kwargs: object) -> object:
            if name == "refresh_layout":
                layouts.append(name)
            return step(*args, **kwargs)

        return run

    textual_internals.wrap_screen_steps(screen, counted)
    return layouts


class Posted:
    """Collects the messages posted in an app (pass `.hook` as run_test's message_hook)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._seen: set[int] = set()  # ids of kept messages (kept alive, so unique)

    def hook(self, message: Message) -> None:
        # The hook sees a bubbling message at each node it reaches: keep it once.
        if id(message) not in self._seen:
            self._seen.add(id(message))
            self.messages.append(message)

    def of(self, kind: type[Message]) -> list[Message]:
        return [m for m in self.messages if isinstance(m, kind)]


def screen_text(app: Any) -> str:
    """What the terminal shows now, as lines of text (the screen's last composition)."""
    from mailbus_workbench.textual_internals import screen_lines

    return "\n".join(screen_lines(app.screen))
