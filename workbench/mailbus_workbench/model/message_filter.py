"""The topic filter's message terms: `Header=value` (the whole value, case-insensitive)
and `Header~text` (a part of it); `signature=verified|unsigned|failed` reads a received
email's signature status (docs/mail.md, "Signed mail"), where `failed` matches every
"failed: why". The rest of the filter text is the fuzzy topic filter.

    robot signature=failed        topics like "robot", messages whose signature failed
    Client-GID=7f3a…  Subject~pose
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mailbus.trace import TraceEvent

# A header name as RFC 5322 allows it (printable ASCII but ':'), then = or ~, then a value.
_TERM = re.compile(r"^([!-9;-~]+?)([=~])(.*)$")


@dataclass(frozen=True, slots=True)
class Term:
    name: str  # lower case
    exact: bool  # "=" (the whole value) or "~" (a part)
    value: str  # lower case

    def matches(self, event: TraceEvent) -> bool:
        found = _field(event, self.name)
        if found is None:
            return False
        found = found.lower()
        if self.name == "signature" and self.exact:
            return found == self.value or found.startswith(self.value + ":")
        return found == self.value if self.exact else self.value in found


@dataclass(frozen=True, slots=True)
class Filter:
    topic_text: str  # for the fuzzy topic filter
    terms: tuple[Term, ...]

    def matches(self, event: TraceEvent) -> bool:
        return all(term.matches(event) for term in self.terms)


def _field(event: TraceEvent, name: str) -> str | None:
    if name == "signature":
        value = event.extra.get("signature") if event.extra else None
        return value if isinstance(value, str) else None
    for key, value in event.headers.items():
        if key.lower() == name:
            return value
    return None


def parse(text: str) -> Filter:
    """Split the filter box's text into the topic filter and the message terms."""
    words, terms = [], []
    for word in text.split():
        match = _TERM.match(word)
        if match and match.group(1):
            name, op, value = match.groups()
            terms.append(Term(name.lower(), op == "=", value.lower()))
        else:
            words.append(word)
    return Filter(" ".join(words), tuple(terms))
