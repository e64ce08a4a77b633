"""The participant announcement codec (mailbus.presence): round trips, cutting to fit, and
a clear PresenceError for every malformed or foreign body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.presence import (
    FORMAT,
    MAX_BODY,
    MAX_ITEMS,
    Announcement,
    BrokerInfo,
    EntityInfo,
    ModuleInfo,
    PresenceError,
    PresenceState,
    WaitEntityInfo,
    WaitSetInfo,
    decode,
    encode,
    safe_label,
)

GID = "0123456789abcdef0123456789abcdef"

names = (
    st.text(
        st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="\x85"),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    .filter(bool)
)
labels = st.one_of(st.just(""), names)
counts = st.integers(0, 2**63 - 1)
seconds = st.floats(0, 86_400, allow_nan=False)

entities = st.builds(EntityInfo, names, names, counts)
wait_sets = st.builds(
    WaitSetInfo,
    labels,
    st.booleans(),
    st.one_of(st.none(), seconds),
    counts,
    counts,
    st.lists(labels, max_size=3).map(tuple),
    st.lists(st.builds(WaitEntityInfo, names, labels, st.booleans()), max_size=3).map(tuple),
)
brokers = st.builds(
    BrokerInfo,
    names,
    st.lists(st.builds(ModuleInfo, names, names, names, counts, counts), max_size=3).map(tuple),
)
announcements = st.builds(
    Announcement,
    gid=st.text("0123456789abcdef", min_size=32, max_size=32),
    name=names,
    host=names,
    pid=counts,
    transport=names,
    period_s=st.floats(0.001, 86_400),
    state=st.sampled_from(PresenceState),
    sequence=counts,
    address=labels,
    entities=st.lists(entities, max_size=4).map(tuple),
    wait_sets=st.lists(wait_sets, max_size=3).map(tuple),
    brokers=st.lists(brokers, max_size=2).map(tuple),
    outbox_depth=st.one_of(st.none(), counts),
    omitted=st.integers(0, 1000),
)


def sample(**overrides: Any) -> Announcement:
    values: dict[str, Any] = {
        "gid": GID,
        "name": "robot-1",
        "host": "vm",
        "pid": 42,
        "transport": "postoffice",
        "period_s": 5.0,
        "entities": (EntityInfo("subscription", "robot/pose", 3),),
        "wait_sets": (
            WaitSetInfo(
                "main", True, 0.5, 10, 2, ("robot/pose",), (WaitEntityInfo("server", "add", True),)
            ),
        ),
        "brokers": (BrokerInfo("broker 1", (ModuleInfo("tally", "Tally", "running", 4, 100),)),),
        "outbox_depth": 7,
    }
    values.update(overrides)
    return Announcement(**values)


@settings(max_examples=150, deadline=None)
@given(announcements)
def test_round_trip(announcement: Announcement) -> None:
    assert decode(encode(announcement)) == announcement


def test_body_is_plain_json_with_its_format() -> None:
    raw = json.loads(encode(sample()))
    assert raw["format"] == FORMAT
    assert raw["wait_sets"][0]["entities"] == [["server", "add", True]]


def test_long_lists_are_cut_and_counted() -> None:
    many = tuple(EntityInfo("publisher", f"topic/{i}") for i in range(MAX_ITEMS + 10))
    got = decode(encode(sample(entities=many)))
    assert len(got.entities) == MAX_ITEMS
    assert got.omitted == 10


def test_body_too_large_is_cut_to_fit() -> None:
    long_names = tuple(EntityInfo("publisher", f"{'t' * 240}/{i}") for i in range(MAX_ITEMS))
    body = encode(sample(entities=long_names))
    assert len(body) <= MAX_BODY
    got = decode(body)
    assert got.omitted == MAX_ITEMS - len(got.entities) > 0


def valid() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(encode(sample()))
    return raw


def with_field(path: tuple[Any, ...], value: Any) -> str:
    raw = valid()
    target = raw
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"hello": 1}', "not a participant announcement"),
        (json.dumps({**valid(), "format": "other/2"}), "format 'other/2'"),
        (with_field(("pid",), -1), "pid must be a non-negative integer"),
        (with_field(("pid",), True), "pid must be a non-negative integer"),
        (with_field(("name",), "a\nb"), "control character"),
        (with_field(("name",), ""), "must not be empty"),
        (with_field(("name",), "x" * 300), "longer than 255"),
        (with_field(("gid",), "XYZ"), "gid must be 32"),
        (with_field(("state",), "asleep"), "state must be alive or goodbye"),
        (with_field(("period_s",), 0), "period_s must be above 0"),
        (with_field(("period_s",), float("nan")), "period_s must be between"),
        (with_field(("host",), KeyError), "field 'host' is missing"),
        (with_field(("entities",), {}), "entities must be a list"),
        (with_field(("entities", 0), ["publisher", "x"]), "entities[0] must be a list of 3"),
        (with_field(("wait_sets", 0, "waiting"), "yes"), "wait_sets[0] waiting must be true"),
        (with_field(("wait_sets", 0, "timeout_s"), -1), "timeout_s must be between"),
        (with_field(("brokers", 0, "modules", 0, 3), "4"), "queue depth must be"),
        (with_field(("outbox_depth",), 1.5), "outbox_depth must be"),
        (with_field(("entities",), [["p", "t", 0]] * (MAX_ITEMS + 1)), "more than 256"),
        ("[" * 100_000, "more than"),
        ("[" * 50_000, "not JSON"),
    ],
)
def test_malformed_body_is_a_clear_error(body: str, says: str) -> None:
    with pytest.raises(PresenceError, match=None) as caught:
        decode(body)
    assert says in str(caught.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(valid())), json_values)
def test_any_field_replaced_decodes_or_says_why(field: str, value: Any) -> None:
    """Whatever a field holds, decoding returns or raises PresenceError: never another
    exception, so that a viewer cannot be crashed by a body."""
    body = json.dumps({**valid(), field: value})
    try:
        decode(body)
    except PresenceError as exc:
        assert str(exc)


def test_safe_label_keeps_names_showable() -> None:
    assert safe_label("main\nloop") == "main?loop"
    assert safe_label("  \t ") == "?"
    assert safe_label("", "") == ""
    assert len(safe_label("x" * 1000)) == 255
