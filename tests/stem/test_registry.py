from __future__ import annotations

import pytest
from mailbus.stem import DEFAULT, AddressError, CellRegistry, PortalRegistry


def test_lookup_tries_name_and_target_then_name() -> None:
    cells = CellRegistry()
    plain, special = object(), object()
    cells.register(plain, "log")
    cells.register(special, "log", "errors")
    assert cells.lookup("log", "errors") is special
    assert cells.lookup("log", "other") is plain  # the cell reads the target itself
    assert cells.lookup("log") is plain
    assert cells.lookup("nope") is None
    cells.unregister("log")
    assert cells.lookup("log", "other") is None
    assert cells.lookup("log", "errors") is special


def test_no_bare_name_means_no_cell_for_other_targets() -> None:
    cells = CellRegistry()
    cells.register(object(), "x", "t")
    assert cells.lookup("x") is None
    assert cells.lookup("x", "u") is None


def test_registration_refuses_duplicates_and_bad_names() -> None:
    cells = CellRegistry()
    cell = object()
    cells.register(cell, "a")
    cells.register(cell, "a")  # the same cell again is fine
    with pytest.raises(ValueError, match="already registered"):
        cells.register(object(), "a")
    with pytest.raises(ValueError, match="needs a name"):
        cells.register(object(), "")
    with pytest.raises(AddressError):
        cells.register(object(), "a:b")
    with pytest.raises(AddressError):
        cells.register(object(), "a", "t t")
    assert cells.names() == [("a", "")]


class FakePortal:
    pass


def test_portal_registry_default_and_routes() -> None:
    portals = PortalRegistry()
    first, second = FakePortal(), FakePortal()
    portals.register("B", first)  # type: ignore[arg-type]
    assert portals.register_default(first)  # type: ignore[arg-type]
    portals.register("C", second)  # type: ignore[arg-type]
    assert not portals.register_default(second)  # type: ignore[arg-type]
    assert portals.default is first
    assert portals.get("D") is None
    portals.add_route("D", via="C")
    assert portals.get("D") is second
    assert portals.routes == {"D": "C"}
    with pytest.raises(ValueError, match="already has a portal"):
        portals.register("B", second)  # type: ignore[arg-type]
    assert sorted(portals.unregister(first)) == ["B", DEFAULT]  # type: ignore[arg-type]
    assert portals.default is None and portals.get("B") is None
