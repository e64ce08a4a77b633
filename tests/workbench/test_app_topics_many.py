"""Pilot tests of the Topics view with thousands of topics (keys in, what the tree draws
out) and of pinned topics (a key pins, they come first, a restart keeps them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from mailbus_workbench import textual_internals
from mailbus_workbench.app import VIEWS, WorkbenchApp
from mailbus_workbench.layouts import LayoutStore
from mailbus_workbench.model.fuzzy import FuzzyIndex, fuzzy_score
from mailbus_workbench.model.topics import TopicStats, TopicStore
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets import topic_tree as topic_tree_module
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.widgets import Input, Tree
from wb_helpers import layouts_of, until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, message_event

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (120, 40)
SENSORS = ("accel", "battery", "camera", "gyro", "imu", "lidar", "odom", "pose", "sonar", "temp")
ZONES, UNITS = 5, 100  # 5,000 topics
ODD_ONE = "zone3/unit042/quartz"  # the only topic with a `q`


def many_topics() -> list[str]:
    names = [
        f"zone{z}/unit{u:03d}/{s}" for z in range(ZONES) for u in range(UNITS) for s in SENSORS
    ]
    return [*names, ODD_ONE]


def drawn(tree: TopicTree) -> list[str]:
    """The tree's lines as they are drawn on the screen now."""
    return [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]


async def with_many(pilot: object, app: WorkbenchApp) -> TopicTree:
    names = many_topics()
    app.model.feed_events(
        message_event(name, "1", T0 + 13.0 + i * 1e-5, 200_000 + i) for i, name in enumerate(names)
    )
    tree = app.query_one(TopicTree)

    def listed() -> bool:
        app.refresh_now()  # no timer here: each refresh folds a slice of what came
        return len(tree.shown_topics) == len(names) + 4  # and the fixture's four

    await until(pilot, listed, "every topic listed")  # type: ignore[arg-type]
    tree.focus()
    return tree


async def test_thousands_of_topics_draw_as_groups_with_their_counts() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        lines = drawn(tree)
        zone0 = next(line for line in lines if "zone0" in line)
        # 1,000 topics of one message each: their totals on the group, and on each unit.
        assert "zone0  1000  " in zone0 and zone0.endswith("1000 topics")
        unit = next(line for line in lines if "unit000" in line)
        assert "▶ unit000  10  " in unit and unit.endswith("10 topics")  # closed
        assert len(lines) == tree.size.height and all(lines)  # the tree fills its pane


async def test_each_lines_width_is_what_textual_measures_by_rendering_it() -> None:
    """TopicTree measures a label without rendering it (Textual renders every line's
    label at each rebuild): the same width for open and closed groups and topics."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        await pilot.press("down", "space", "down", "down", "space")  # groups opened
        lines = [tree.get_node_at_line(y) for y in range(tree.last_line + 1)]
        nodes = [node for node in lines if node is not None]
        assert any(n.is_expanded for n in nodes) and any(n.allow_expand for n in nodes)
        assert any(not n.allow_expand for n in nodes)
        for node in nodes:
            assert tree.get_label_width(node) == Tree.get_label_width(tree, node), node.label


async def test_typing_a_filter_narrows_thousands_of_topics_to_the_match() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        await pilot.press("slash", "t")
        assert len(tree.shown_topics) > 5000  # every name has a `t`
        await pilot.press("q")
        assert tree.shown_topics == (ODD_ONE,)
        lines = [line for line in drawn(tree) if line.strip()]
        # One topic left: the tree opens whole down to it, with its count.
        assert [line.strip(" ▼▶├└│─").split("  ")[0] for line in lines] == [
            "zone3",
            "unit042",
            "quartz",
        ]
        assert "quartz  1  " in lines[-1]
        view = app.query_one(TopicsView)
        assert view.topic == ODD_ONE
        await pilot.press("backspace", "backspace")
        assert len(tree.shown_topics) == ZONES * UNITS * len(SENSORS) + 1 + 4


async def test_keys_reach_the_last_of_thousands_of_topics() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        view = app.query_one(TopicsView)
        # The last group, opened (its units made only now), then its last unit.
        await pilot.press("end", "enter", "end", "enter", "end")
        last = f"zone{ZONES - 1}/unit{UNITS - 1:03d}/{SENSORS[-1]}"
        await until(pilot, lambda: view.topic == last, "the last topic shown")
        assert tree.cursor_node is not None and tree.cursor_node.data == last
        visible = [line for line in drawn(tree) if line.strip()]
        assert visible[-1].strip(" ▼▶├└│─").split("  ")[0] == SENSORS[-1]
        await pilot.press("home")
        assert tree.cursor_line == 0 and drawn(tree)[0].startswith("▼ robot  ")


def store() -> LayoutStore:
    return LayoutStore.for_config(None, [view_id for view_id, _, _ in VIEWS])


async def test_a_pinned_topic_comes_first_and_stays_pinned_after_a_restart() -> None:
    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        tree.focus()
        assert tree.select_topic("system/heartbeat")
        view = app.query_one(TopicsView)
        await until(pilot, lambda: view.topic == "system/heartbeat", "the topic shown")
        assert not drawn(tree)[0].startswith("★")
        await pilot.press("asterisk")
        await until(pilot, lambda: drawn(tree)[0].startswith("★ system/heartbeat"), "the pin")
        assert tree.shown_topics[0] == "system/heartbeat"
        await pilot.press("q")

    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        tree = app.query_one(TopicTree)
        await until(pilot, lambda: drawn(tree)[0].startswith("★ system/heartbeat"), "the pin")
        # A filter keeps the pinned topic only if it matches.
        await pilot.press("slash", *"robot")
        assert not any(line.startswith("★") for line in drawn(tree))
        await pilot.press("backspace", "backspace", "backspace", "backspace", "backspace")
        await pilot.press(*"heart")
        assert drawn(tree)[0].startswith("★ system/heartbeat")
        await pilot.press("enter")  # back in the tree, on the pinned row
        assert app.focused is tree
        tree.select_topic("system/heartbeat")
        await pilot.press("asterisk")  # unpinned
        await until(pilot, lambda: not drawn(tree)[0].startswith("★"), "the pin gone")
        assert app.query_one("#topic-filter", Input).value == "heart"


async def test_pinning_with_no_topic_selected_says_so() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        await pilot.press("slash", *"zzzz", "enter")  # nothing matches: no topic shown
        assert app.query_one(TopicsView).topic is None
        await pilot.press("asterisk")
        assert tree.pinned == ()
        assert any("Select a topic" in n.message for n in textual_internals.notifications(app))


def test_every_topics_rate_windows_close_though_a_tick_visits_only_those_ended() -> None:
    """The store closes windows from a heap of their ends: each topic must still get
    the rates and history it gets when every topic is ticked at every tick."""
    store = TopicStore()
    alone = {}
    names = [f"t{i:04d}" for i in range(2_000)]
    for i, name in enumerate(names):
        t = T0 + i * 0.0007  # windows that end all through the second
        store.add(message_event(name, "1", t, i))
        alone[name] = TopicStats(name)
        alone[name].add(t, 1)
    for later, name in enumerate(names[::7]):  # some topics keep talking
        t = T0 + 1.3 + later * 0.001
        store.add(message_event(name, "1", t, 10_000 + later))
        alone[name].add(t, 1)
    store.clear(names[0])  # a topic gone never comes back from the heap
    del alone[names[0]]
    for now in (T0 + 0.5, T0 + 1.2, T0 + 1.9, T0 + 2.6, T0 + 5.4):
        store.tick(now)
        for stats in alone.values():
            stats.tick(now)
    assert set(store.stats) == set(alone)
    for name, stats in alone.items():
        got = store.stats[name]
        assert (got.rate, list(got.rate_history)) == (stats.rate, list(stats.rate_history))
    assert any(s.rate_history and max(s.rate_history) > 0 for s in alone.values())


async def test_a_filter_letter_answers_with_its_count_and_lays_nothing_out() -> None:
    """With 5,000 topics, each letter typed in the filter is answered on screen, the
    count of matching topics on the box (as fzf counts), without laying the whole screen
    out again: Textual did that at each letter and at each change of the tree's lines,
    30-60 ms with a flow on screen. The tree still scrolls as its lines come and go."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        total = len(app.model.topics.stats)
        layouts = layouts_of(app.screen)
        await pilot.press("slash")
        await pilot.pause()
        layouts.clear()
        box = app.query_one("#topic-filter", Input)
        assert tree.max_scroll_y > 0  # 5,000 topics outgrow the pane
        await pilot.press("q")  # only one topic has a q
        await until(pilot, lambda: box.border_subtitle == f"1 of {total:,}", "the count")
        assert "quartz" in "".join(drawn(tree))
        assert tree.max_scroll_y == 0  # one topic fits
        # The letters, the tree (its scrollbar always there) and the message list are
        # redone in place: nothing is laid out, not even as the tree stops scrolling.
        await pilot.press("x")
        await until(pilot, lambda: box.border_subtitle == f"0 of {total:,}", "no match")
        assert not any(drawn(tree))
        await pilot.press("backspace")
        await until(pilot, lambda: "quartz" in "".join(drawn(tree)), "quartz again")
        assert box.border_subtitle == f"1 of {total:,}"
        assert layouts == []
        # Taken back: every topic again, the groups around the selection open (zone3's
        # hundred units): the tree outgrows its pane again, the selection stays in sight
        # and End reaches the last line.
        await pilot.press("backspace", "backspace")
        await until(pilot, lambda: box.border_subtitle == "", "the count gone")
        assert len(tree.shown_topics) == total
        await until(pilot, lambda: tree.max_scroll_y > 0, "the tree scrolls again")
        assert any("quartz" in line for line in drawn(tree))
        await pilot.press("enter")
        await pilot.press("end")
        await until(pilot, lambda: tree.scroll_y == tree.max_scroll_y, "the end in sight")
        assert "zone4" in [line for line in drawn(tree) if line][-1]


async def test_a_filter_taken_back_shows_each_earlier_listing_without_filtering_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Backspace goes back to what the shorter filter listed: with 5,000 topics each
    letter taken back is drawn from what was kept for it, not filtered and grouped again
    (10,000 topics took 10 ms to filter and more to group, at every backspace)."""
    filtered: list[str] = []
    grouped: list[int] = []
    real_filter, real_tree = FuzzyIndex.filter, topic_tree_module.topic_tree

    def counted_filter(index: FuzzyIndex, query: str) -> list[str]:
        filtered.append(query)
        return real_filter(index, query)

    def counted_tree(names: Iterable[str]) -> object:
        names = tuple(names)
        grouped.append(len(names))
        return real_tree(names)

    monkeypatch.setattr(FuzzyIndex, "filter", counted_filter)
    monkeypatch.setattr(topic_tree_module, "topic_tree", counted_tree)
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        total = len(app.model.topics.stats)
        box = app.query_one("#topic-filter", Input)
        await pilot.press("slash")
        seen: dict[str, tuple[tuple[str, ...], str]] = {}
        for typed in ("l", "li", "lid"):
            await pilot.press(typed[-1])
            await until(pilot, lambda t=typed: tree.filter_text == t, typed)
            matching = sum(fuzzy_score(typed, name) is not None for name in app.model.topics.stats)
            count = f"{matching:,} of {total:,}"
            await until(pilot, lambda c=count: box.border_subtitle == c, count)
            seen[typed] = (tree.shown_topics, str(box.border_subtitle))
        assert filtered == ["l", "li", "lid"]  # each letter typed is filtered once
        assert "lidar" in "".join(drawn(tree))
        filtered.clear()
        grouped.clear()
        for back in ("li", "l"):
            await pilot.press("backspace")
            await until(pilot, lambda b=back: tree.filter_text == b, back)
            await until(pilot, lambda b=back: box.border_subtitle == seen[b][1], f"{back}'s count")
            assert tree.shown_topics == seen[back][0]
        assert filtered == [] and grouped == []
        await pilot.press("backspace")
        await until(pilot, lambda: len(tree.shown_topics) == total, "every topic again")
        assert filtered == []


async def test_a_filter_letter_drops_the_trees_lines_once_for_all_its_nodes() -> None:
    """Textual's Tree drops its drawn lines and line list at every node added: a letter
    that lists a few hundred topics did it a few hundred times. The tree is rebuilt with
    its lines dropped once (a quarter of the rebuild's time with 10,000 topics), and it
    draws the topics that match."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = await with_many(pilot, app)
        await pilot.press("slash")
        await pilot.pause()
        drops: list[int] = []  # whole-tree refreshes: its lines dropped
        refresh = tree.refresh

        def counted(*regions: Any, **kwargs: Any) -> Any:
            if not regions:
                drops.append(1)
            return refresh(*regions, **kwargs)

        tree.refresh = counted  # type: ignore[method-assign]
        box = app.query_one("#topic-filter", Input)
        await pilot.press(*"lidar")
        await until(
            pilot, lambda: box.value == "lidar" and tree.filter_text == "lidar", "the filter"
        )
        await until(pilot, lambda: "lidar" in "".join(drawn(tree)), "the lidars drawn")
        assert len(tree.shown_topics) == ZONES * UNITS
        # Per letter: Tree.clear, the one invalidation after the nodes, maybe a scroll (221 before).
        assert 0 < len(drops) <= 3 * len("lidar"), len(drops)
