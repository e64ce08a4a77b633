"""The registries of a hub: its cells by name and target, and its portals by hub name.

Cell lookup follows the design: the pair (cell, target) first; when the address has a
target and that pair is not registered, the cell name alone (the cell then reads the
target from the message itself). Readers take no lock: writers replace the mapping.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mailbus.stem.address import check_part

if TYPE_CHECKING:
    from mailbus.stem.portal import Portal

DEFAULT = "DEFAULT"


class CellRegistry:
    def __init__(self) -> None:
        self._cells: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()

    def register(self, cell: object, name: str, target: str = "") -> None:
        """Register `cell` under `name` (and `target`); ValueError if the pair is taken."""
        if not check_part(name, "cell"):
            raise ValueError("a cell needs a name")
        key = (name, check_part(target, "target"))
        with self._lock:
            if key in self._cells and self._cells[key] is not cell:
                shown = f"{name}:{target}" if target else name
                raise ValueError(f"cell {shown!r} is already registered")
            self._cells = {**self._cells, key: cell}

    def unregister(self, name: str, target: str = "") -> object | None:
        with self._lock:
            cells = dict(self._cells)
            cell = cells.pop((name, target), None)
            self._cells = cells
        return cell

    def lookup(self, name: str, target: str = "") -> object | None:
        cells = self._cells
        cell = cells.get((name, target))
        if cell is None and target:
            cell = cells.get((name, ""))
        return cell

    def names(self) -> list[tuple[str, str]]:
        return sorted(self._cells)

    def __len__(self) -> int:
        return len(self._cells)


class PortalRegistry:
    """Portals by the names they answer to: the remote hub's name, aliases, DEFAULT;
    plus routes, hub names reached through another hub's portal (a chain of hubs)."""

    def __init__(self) -> None:
        self._portals: dict[str, Portal] = {}
        self._routes: dict[str, str] = {}
        self._lock = threading.Lock()

    def register(self, name: str, portal: Portal) -> None:
        if name != DEFAULT:
            check_part(name, "hub")
        with self._lock:
            current = self._portals.get(name)
            if current is not None and current is not portal:
                raise ValueError(f"hub name {name!r} already has a portal: {current!r}")
            self._portals = {**self._portals, name: portal}

    def register_default(self, portal: Portal) -> bool:
        """Make `portal` the DEFAULT unless there is one; return whether it became it."""
        with self._lock:
            if DEFAULT in self._portals:
                return False
            self._portals = {**self._portals, DEFAULT: portal}
            return True

    def unregister(self, portal: Portal) -> list[str]:
        """Remove every name of `portal`; return them."""
        with self._lock:
            names = [n for n, p in self._portals.items() if p is portal]
            self._portals = {n: p for n, p in self._portals.items() if p is not portal}
        return names

    def add_route(self, hub: str, via: str) -> None:
        check_part(hub, "hub")
        check_part(via, "hub")
        with self._lock:
            self._routes = {**self._routes, hub: via}

    def get(self, name: str) -> Portal | None:
        portal = self._portals.get(name)
        if portal is None:
            via = self._routes.get(name)
            if via is not None:
                portal = self._portals.get(via)
        return portal

    @property
    def default(self) -> Portal | None:
        return self._portals.get(DEFAULT)

    @property
    def names(self) -> Mapping[str, Portal]:
        return dict(self._portals)

    @property
    def routes(self) -> Mapping[str, str]:
        return dict(self._routes)
