"""Stem addresses: the triplet `hub:cell:target`, where hub and target are optional.

As in the reference, the separator may be `:` (the convention), `/`, `@` or `-`, but
one address uses one separator throughout. With one separator the two parts are
`hub:cell` (not `cell:target`); write `:cell:target` for a target without a hub. Each
part is ASCII letters, digits and underscores, so an address is always safe to carry in
an email header; a cell name is required.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mailbus.stem.errors import AddressError

PARTS = ("hub", "cell", "target")
MAX_PART_LENGTH = 64
_PART = re.compile(r"[A-Za-z0-9_]*")
_TRIPLE = re.compile(r"[A-Za-z0-9_]{0,64}:[A-Za-z0-9_]{0,64}:[A-Za-z0-9_]{0,64}")
_ADDRESS = re.compile(
    r"(?:(?P<hub>[A-Za-z0-9_]*)(?P<sep>[:/@-]))?(?P<cell>[A-Za-z0-9_]+)"
    r"(?:(?P=sep)(?P<target>[A-Za-z0-9_]*))?"
)


def check_part(value: str, part: str) -> str:
    """Return `value` if it may be the `part` of an address, else raise AddressError."""
    if not isinstance(value, str):
        raise AddressError(f"address {part} must be a str, not {type(value).__name__}")
    if len(value) > MAX_PART_LENGTH:
        raise AddressError(f"address {part} {value[:20]!r}... is longer than {MAX_PART_LENGTH}")
    if not _PART.fullmatch(value):
        raise AddressError(
            f"address {part} {value!r} may hold only ASCII letters, digits and underscores"
        )
    return value


@dataclass(frozen=True, slots=True)
class Address(Mapping[str, str]):
    """One address; also a read-only mapping of its parts `hub`, `cell` and `target`.

    An empty cell is allowed here so that a message can be built part by part; dispatch
    refuses a message whose `to` or `from` has no cell."""

    cell: str
    hub: str = ""
    target: str = ""

    def __post_init__(self) -> None:
        hub, cell, target = self.hub, self.cell, self.target
        # One match for the common case; the slow path says which part is wrong.
        if not (
            type(hub) is str
            and type(cell) is str
            and type(target) is str
            and _TRIPLE.fullmatch(f"{hub}:{cell}:{target}")
        ):
            for part in PARTS:
                check_part(getattr(self, part), part)

    @classmethod
    def parse(cls, text: str) -> Address:
        if not isinstance(text, str):
            raise AddressError(f"an address must be a str, not {type(text).__name__}")
        return _parse(text)

    @classmethod
    def of(cls, value: Address | str | Mapping[str, Any]) -> Address:
        """An address from a string, a mapping of parts, or an address."""
        if isinstance(value, Address):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            unknown = set(value) - set(PARTS)
            if unknown:
                raise AddressError(f"unknown address part {sorted(unknown)[0]!r}")
            return cls(value.get("cell") or "", value.get("hub") or "", value.get("target") or "")
        raise AddressError(f"an address must be a str or a mapping, not {type(value).__name__}")

    def replace(self, **parts: str) -> Address:
        return Address(
            parts.get("cell", self.cell),
            parts.get("hub", self.hub),
            parts.get("target", self.target),
        )

    def __str__(self) -> str:
        if self.target:
            return f"{self.hub}:{self.cell}:{self.target}"
        if self.hub:
            return f"{self.hub}:{self.cell}"
        return self.cell

    # -- the mapping view: {"hub": ..., "cell": ..., "target": ...} ---------------------
    def __getitem__(self, key: str) -> str:
        if key not in PARTS:
            raise KeyError(key)
        value: str = getattr(self, key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(PARTS)

    def __len__(self) -> int:
        return len(PARTS)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Address:
    """Addresses are immutable and programs use few of them: parse each string once."""
    match = _ADDRESS.fullmatch(text)
    if match is None:
        raise AddressError(
            f"{text[:80]!r} is not a Stem address: expected cell, hub:cell or "
            "hub:cell:target (one separator of : / @ -; letters, digits, _)"
        )
    return Address(match["cell"], match["hub"] or "", match["target"] or "")
