"""The topic filter's message terms (the workbench filters on a message's
signature status; the topic filter also filters by header)."""

from __future__ import annotations

import dataclasses

import pytest
from mailbus import query
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.widgets import Input
from wb_helpers import until
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_app, message_event


def signed(n: int, status: str | None, topic: str = "sensors/temp") -> object:
    event = message_event(topic, f"reading {n}", T0 + n * 0.1, n)
    extra = {"signature": status} if status is not None else {}
    return dataclasses.replace(event, extra=extra)


def test_terms_and_topic_text_are_told_apart() -> None:
    parsed = query.parse("robot  signature=failed Subject~Pose")
    assert parsed.topic_text == "robot"
    assert [(t.name, t.exact, t.value) for t in parsed.terms] == [
        ("signature", True, "failed"),
        ("subject", False, "pose"),
    ]
    assert query.parse("").terms == () and query.parse("=x").terms == ()


def test_signature_and_header_terms_match() -> None:
    failed = signed(1, "failed: body hash mismatch (the body was changed)")
    verified, unsigned = signed(2, "verified"), signed(3, None)
    by_signature = query.parse("signature=failed")
    assert [by_signature.matches(e) for e in (failed, verified, unsigned)] == [True, False, False]
    assert query.parse("signature=verified").matches(verified)
    assert not query.parse("signature=fail").matches(failed)  # a status, not a part
    assert query.parse("signature~hash").matches(failed)
    gid = failed.headers["Publisher-GID"]
    assert query.parse(f"publisher-gid={gid.upper()}").matches(failed)
    assert not query.parse("publisher-gid=someone-else").matches(failed)
    assert not query.parse("No-Such-Header~x").matches(failed)


@pytest.mark.slow
async def test_the_topic_filter_lists_only_messages_whose_signature_failed() -> None:
    clock = FrozenClock(T0 + 5)
    model = WorkbenchModel(clock=clock)
    statuses = ["verified", "failed: no signature by a key in the keyring", None, "verified"]
    model.feed_events([signed(n, s) for n, s in enumerate(statuses)])  # type: ignore[misc]
    model.feed_events([signed(9, "verified", topic="robot/pose")])  # type: ignore[list-item]
    model.pump()
    app = fixed_app(model=model)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await pilot.press(*"temp signature=failed")
        tree = app.query_one(TopicTree)
        messages = app.query_one(MessageList)
        await until(pilot, lambda: list(tree._topic_nodes) == ["sensors/temp"], "the tree")
        await until(pilot, lambda: messages.topic == "sensors/temp", "the topic's messages")
        assert [r.event.body for r in messages._rows] == ["reading 1"]
        app.query_one("#topic-filter", Input).value = "temp"
        await until(pilot, lambda: len(messages._rows) == 4, "every message again")


def test_the_shared_cases_pick_the_same_messages_in_find() -> None:
    """The cases `mailbus topic echo --where/--field` runs too (tests/query_cases.py)."""
    from mailbus import field_path
    from query_cases import BODIES, FIELD_CASES, WHERE_CASES

    events = [message_event("lab/t", body, T0 + i, i) for i, body in enumerate(BODIES)]
    for where, expected in WHERE_CASES:
        parsed = query.parse_where(where)
        assert tuple(i for i, e in enumerate(events) if parsed.matches(e)) == expected, where
    for path, values in FIELD_CASES:
        parsed_path = field_path.parse(path)
        found = [parsed_path.get(field_path.decode(e.body)) for e in events]
        assert [None if v is field_path.MISSING else v for v in found] == list(values), path
