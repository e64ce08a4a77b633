"""The engine's query language and field paths (mailbus.query, mailbus.field_path) as
properties: a path prints back to itself, any text either parses or says why, and a
query reads the same message the same way whatever reads it (plain dataclass or trace
event). The worked cases shared with Find are in tests/workbench/test_message_filter.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus import field_path, query
from mailbus.field_path import FieldPathError
from mailbus.query import QueryError
from mailbus.trace import TraceEvent

steps = st.lists(
    st.one_of(st.integers(0, 99), st.text(min_size=1, max_size=8)), min_size=1, max_size=5
)


@given(steps)
def test_a_path_prints_back_to_itself(path: list[str | int]) -> None:
    parsed = field_path.parse(str(field_path.FieldPath(tuple(path))))
    assert parsed.steps == tuple(path)


@given(st.text(max_size=40))
def test_any_text_is_a_path_or_says_why(text: str) -> None:
    try:
        field_path.parse(text)
    except FieldPathError as exc:
        assert str(exc)


@given(st.text(max_size=60))
def test_any_text_is_a_query_or_says_why(text: str) -> None:
    try:
        parsed = query.parse_where(text)
    except QueryError as exc:
        assert str(exc)
    else:
        assert parsed.terms and not parsed.topic_text


@dataclass
class Plain:
    name: str
    body: str | None
    headers: Mapping[str, str] = field(default_factory=dict)
    message_id: str = ""
    in_reply_to: str = ""
    extra: Mapping[str, object] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("where", "matches"),
    [
        ("celsius>25", True),
        ("celsius<25", False),
        ("readings.1>2", True),
        ("readings[1]>2", True),
        ('["odd.key"]=yes', True),
        ("Unit=CELSIUS", True),
        ("lab/t.celsius>25", True),
        ("other/t.celsius>25", False),
    ],
)
def test_a_query_reads_any_message_alike(where: str, matches: bool) -> None:
    body = '{"celsius": 30, "readings": [1, 3], "odd.key": "yes"}'
    plain = Plain("lab/t", body, {"Unit": "celsius"})
    event = TraceEvent(
        kind="email.received", time_ns=0, name="lab/t", body=body, headers={"Unit": "celsius"}
    )
    parsed = query.parse_where(where)
    assert parsed.matches(plain) is matches
    assert parsed.matches(event) is matches


def test_a_word_that_is_no_condition_is_named() -> None:
    with pytest.raises(QueryError, match="'hot' is not a condition"):
        query.parse_where("celsius>25 hot")
    with pytest.raises(QueryError, match="an empty query"):
        query.parse_where("  ")
