from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus.stem import Address, AddressError

PART = st.text(alphabet="abcxyzAZ09_", max_size=8)


@pytest.mark.parametrize(
    ("text", "hub", "cell", "target"),
    [
        ("cell", "", "cell", ""),
        ("hub:cell", "hub", "cell", ""),
        ("hub:cell:target", "hub", "cell", "target"),
        (":cell:target", "", "cell", "target"),
        ("hub:cell:", "hub", "cell", ""),
        ("hub/cell/target", "hub", "cell", "target"),
        ("hub@cell@target", "hub", "cell", "target"),
        ("hub-cell-target", "hub", "cell", "target"),
        ("hub-cell", "hub", "cell", ""),
        ("H_1:c_2:t_3", "H_1", "c_2", "t_3"),
    ],
)
def test_parse_forms_and_separators(text: str, hub: str, cell: str, target: str) -> None:
    address = Address.parse(text)
    assert (address.hub, address.cell, address.target) == (hub, cell, target)


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":",
        "hub:",
        "hub:cell/target",
        "hub/cell:target",
        "a:b:c:d",
        "ce ll",
        "cell\n",
        "hub:cell:tar\r\nBcc: x",
        "héllo",
        "a;b",
        "a" * 65,
    ],
)
def test_bad_addresses_are_refused_with_a_clear_error(text: str) -> None:
    with pytest.raises(AddressError, match=r"not a Stem address|longer than|may hold only"):
        Address.parse(text)


def test_address_is_a_mapping_of_its_parts() -> None:
    address = Address.parse("h:c:t")
    assert dict(address) == {"hub": "h", "cell": "c", "target": "t"}
    assert address["cell"] == "c"
    assert len(address) == 3
    with pytest.raises(KeyError):
        address["port"]


def test_of_takes_strings_mappings_and_addresses() -> None:
    assert Address.of({"cell": "c", "hub": "h"}) == Address("c", "h")
    assert Address.of("c") == Address("c")
    same = Address("x")
    assert Address.of(same) is same
    with pytest.raises(AddressError, match="unknown address part"):
        Address.of({"cell": "c", "port": "1"})
    with pytest.raises(AddressError, match="must be a str or a mapping"):
        Address.of(42)  # type: ignore[arg-type]
    with pytest.raises(AddressError, match="may hold only"):
        Address.of({"cell": "c:d"})


def test_str_is_the_shortest_colon_form() -> None:
    assert str(Address("c")) == "c"
    assert str(Address("c", "h")) == "h:c"
    assert str(Address("c", target="t")) == ":c:t"
    assert str(Address("c", "h", "t")) == "h:c:t"


@given(PART, PART.filter(bool), PART)
def test_str_parses_back(hub: str, cell: str, target: str) -> None:
    address = Address(cell, hub, target)
    assert Address.parse(str(address)) == address


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_address_error(text: str) -> None:
    try:
        address = Address.parse(text)
    except AddressError:
        return
    assert address.cell and all(c.isascii() for c in str(address))
