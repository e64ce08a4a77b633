"""The fuzzy filter that the topic tree and the field prompt use: what it lets through
and in which order, the same however the names were made ready."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mailbus_workbench.model.fuzzy import FuzzyIndex, fuzzy_filter, fuzzy_score

# Letters of either case, separators, regular-expression syntax, a line break and
# characters whose lowercase is longer than themselves.
ALPHABET = "abcABC/_-.*+?()[]\\^$| \nİß"


def by_scoring_each(query: str, names: list[str]) -> list[str]:
    """The filter's meaning, written the plain way: score every name, best first."""
    scored = [(fuzzy_score(query, n), n) for n in names]
    return (
        [n for s, n in sorted((-s, n) for s, n in scored if s is not None)]
        if query
        else sorted(names)
    )


@given(
    st.lists(st.text(ALPHABET, max_size=12), unique=True, max_size=30),
    st.text(ALPHABET, max_size=4),
)
def test_the_index_lets_through_what_scoring_each_name_does_in_the_same_order(
    names: list[str], query: str
) -> None:
    assert FuzzyIndex(names).filter(query) == by_scoring_each(query, names)


def test_a_query_is_matched_in_order_case_and_spaces_aside() -> None:
    names = ["robot/pose", "robot/log", "sensors/temperature", "system/heartbeat", "a.b*c"]
    index = FuzzyIndex(names)
    assert index.filter("rbps") == ["robot/pose"]
    assert index.filter("R B P S") == ["robot/pose"]
    assert index.filter("TEMP") == ["sensors/temperature"]
    assert index.filter("b*") == ["a.b*c"]  # regular-expression syntax is a character
    assert index.filter(".*") == ["a.b*c"]
    assert index.filter("zzz") == []
    assert index.filter("") == sorted(names)
    # Segment starts and runs score more: robot/log before a scattered l..o..g.
    assert fuzzy_filter("log", ["lxoxgx", "robot/log"]) == ["robot/log", "lxoxgx"]
