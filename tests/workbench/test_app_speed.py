"""Keys under a flood: a backlog of events is folded in slices with
the keys in between, a view key shows its view before filling it, what lives as long
as the app is frozen out of the collector's passes until it ends, and a key is answered
with the GIL held longer and painted without waiting for the frame timer; the tricks
that change the process's state only in the `mailbus` command's own process, and none
with `speed-tricks = false`."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mailbus.errors import ConfigError
from mailbus.trace import Kind, TraceEvent
from mailbus_workbench import textual_internals
from mailbus_workbench.model.settings import Settings, settings_from
from mailbus_workbench.speed import heap
from mailbus_workbench.speed.key_frames import KeyScreen
from mailbus_workbench.speed.key_turn import KEY_SWITCH_INTERVAL_S
from mailbus_workbench.views.services import ServicesView
from textual import events
from textual.widgets import Static
from wb_helpers import until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, message_event

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (120, 36)
BACKLOG = 100_000


def flood(n: int) -> list[TraceEvent]:
    body = '{"x": 1.25}'
    return [
        TraceEvent(
            Kind.RECEIVED.value,
            1_000_000_000 + i,
            name=f"flood/t{i % 4}",
            message_id=f"<{i}@flood>",
            reception_timestamp_ns=1_000_000_000 + i,
            body=body,
            size=len(body),
            detail="message",
        )
        for i in range(n)
    ]


async def test_a_backlog_is_folded_in_slices_behind_the_keys() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        model = app.model
        before = model.topics.total
        model.feed_events(flood(BACKLOG))
        app.refresh_now()  # one slice now, the next a moment later
        assert 0 < model.topics.total - before <= app.folder.pacer.ceiling
        queued_at_key: list[int] = []
        show = app.action_show

        def timed_show(view_id: str) -> None:
            queued_at_key.append(len(model.feed))
            show(view_id)

        app.action_show = timed_show  # type: ignore[method-assign]
        await pilot.press("2")
        # The key came after a slice or two, not after the whole backlog.
        assert queued_at_key and queued_at_key[0] >= BACKLOG - 2 * app.folder.pacer.ceiling
        assert app.active_view_id == "services"
        # No timer runs in this app (live=False): the slices alone fold the rest.
        await until(pilot, lambda: len(model.feed) == 0, "the backlog folded")
        assert model.topics.total - before == BACKLOG
        assert model.feed.dropped == 0


async def test_a_view_key_shows_the_view_then_fills_it() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.view("services")
        assert isinstance(view, ServicesView)
        filled: list[bool] = []
        refresh_view = view.refresh_view

        def recorded(now: float) -> None:
            # Filled once the view had its place on the screen: after its first frame.
            filled.append(view.region.area > 0)
            refresh_view(now)

        view.refresh_view = recorded  # type: ignore[method-assign]
        await pilot.press("2")
        await until(pilot, lambda: filled, "the fill")
        assert filled[0]
        assert app.active_view_id == "services"


async def test_objects_alive_after_start_up_are_frozen_until_the_app_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full collection skips what lives as long as the app (heap.py): frozen once
    started and at each view's first fill (not at later ones), and handed back to the
    collector when the app ends (a test process runs many apps)."""
    freezes: list[str] = []
    freeze = heap.freeze

    def recorded() -> None:
        freezes.append(app.active_view_id)
        freeze()

    monkeypatch.setattr(heap, "freeze", recorded)
    thresholds = gc.get_threshold()
    app = fixed_app(owns_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: freezes == ["topics"], "the freeze after start-up")
        assert heap.frozen() > 0
        assert gc.get_threshold()[2] == heap.FULL_PASS_EVERY  # full passes rarer
        await pilot.press("3")  # the Wait sets view's first fill
        await until(pilot, lambda: freezes == ["topics", "waitsets"], "the freeze after it")
        await pilot.press("1", "3")  # filled again: nothing more to freeze
        await until(pilot, lambda: app.active_view_id == "waitsets", "the view")
        app.refresh_now()
        assert freezes == ["topics", "waitsets"]
    assert heap.frozen() == 0
    assert gc.get_threshold() == thresholds


def record_refreezes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The objects frozen after each freeze the app makes from now on (heap._freeze)."""
    frozen: list[int] = []
    real = heap._freeze

    def recorded() -> None:
        real()
        frozen.append(heap.frozen())

    monkeypatch.setattr(heap, "_freeze", recorded)
    return frozen


async def test_what_a_long_full_pass_walked_is_frozen_at_the_next_refresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """heap.py: objects that came after start-up (a system's 10,000 topics) made full
    passes long again; after a full pass longer than LONG_FULL_PASS_S the app freezes
    what is alive then, once, at its next refresh."""
    app = fixed_app(owns_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: heap.frozen() > 0, "the freeze after start-up")
        monkeypatch.setattr(heap, "LONG_FULL_PASS_S", 3600.0)  # no full pass is long
        gc.collect()
        grown = [[n] for n in range(20_000)]  # tracked objects (lists), alive
        app.refresh_now()
        before = heap.frozen()
        refreezes = record_refreezes(monkeypatch)
        monkeypatch.setattr(heap, "LONG_FULL_PASS_S", 0.0)  # every full pass is long
        app.refresh_now()
        assert refreezes == []  # no full pass yet: nothing due
        gc.collect()
        app.refresh_now()
        assert len(refreezes) == 1 and refreezes[0] >= before + len(grown)
        app.refresh_now()  # once per long pass
        gc.collect(1)  # a young pass is not a full one
        app.refresh_now()
        assert len(refreezes) == 1
    assert heap.frozen() == 0
    assert heap._watch not in gc.callbacks  # handed back: no watch left in the process


async def test_many_new_names_are_frozen_as_they_come(monkeypatch: pytest.MonkeyPatch) -> None:
    """heap.py: a system's names arriving (1,000 topics at a time) are frozen at the next
    refresh, before the first full pass after them walks them all on a key (260 ms)."""
    app = fixed_app(owns_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: heap.frozen() > 0, "the freeze after start-up")
        monkeypatch.setattr(heap, "LONG_FULL_PASS_S", 3600.0)  # no freeze after a pass
        freezes = record_refreezes(monkeypatch)

        def arrive(first: int, count: int) -> None:
            app.model.feed_events(
                message_event(f"site/robot{n:04d}/pose", "{}", T0 + 30, n)
                for n in range(first, first + count)
            )
            app.refresh_now()

        names = len(app.model.topics.stats)
        arrive(0, heap.GROWTH_NAMES - names - 1)
        assert freezes == []  # not yet GROWTH_NAMES names more
        before = heap.frozen()
        arrive(10_000, 1)
        assert len(freezes) == 1 and freezes[0] > before
        arrive(20_000, heap.GROWTH_NAMES // 2)
        assert len(freezes) == 1  # once per GROWTH_NAMES
        arrive(30_000, heap.GROWTH_NAMES // 2)
        assert len(freezes) == 2
        # Counted from the fewest names seen since the clear: its refresh counts the
        # participants alive then, at most those alive now (their liveness runs on real
        # time and they only go, slow in a full suite), so GROWTH_NAMES topics more than
        # these are GROWTH_NAMES names more than at that refresh, however many go after.
        alive = len(app.model.participants.participants)
        app.model.topics.clear()  # the user clears the topics: as many may come again
        app.refresh_now()
        arrive(40_000, heap.GROWTH_NAMES + alive)
        assert len(freezes) == 3
    assert heap.frozen() == 0


async def test_a_key_is_answered_with_a_longer_switch_interval_then_it_is_put_back() -> None:
    """speed/key_turn.py: from the key event to the frame after the view's fill the UI thread
    keeps the GIL longer; then, and when the app ends, the interval is as it was."""
    usual = sys.getswitchinterval()
    assert usual != KEY_SWITCH_INTERVAL_S
    app = fixed_app(owns_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert sys.getswitchinterval() == usual
        during: list[float] = []
        show = app.action_show

        def recorded(view_id: str) -> None:
            during.append(sys.getswitchinterval())
            show(view_id)

        app.action_show = recorded  # type: ignore[method-assign]
        await pilot.press("2")
        assert during == [KEY_SWITCH_INTERVAL_S]
        await until(pilot, lambda: sys.getswitchinterval() == usual, "the interval back")
        assert not app.key_turn.active
        await pilot.press("3")
        assert during[-1] == KEY_SWITCH_INTERVAL_S
        # The app ends before the key's refreshes: the interval is put back all the same.
        app.key_turn.key()
        assert sys.getswitchinterval() == KEY_SWITCH_INTERVAL_S
    assert sys.getswitchinterval() == usual


async def test_a_key_is_painted_at_once_without_waiting_for_the_frame_timer() -> None:
    """speed/key_frames.py: just after a key a change is painted as soon as the screen is idle;
    away from keys, at the 60 Hz timer's slots. With that timer stopped, a key's view
    still reaches the screen, and a change with no key waits for the timer. (No Pilot
    call meanwhile: the Pilot paints a frame itself after each one.)"""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.main_screen
        assert isinstance(screen, KeyScreen)
        frames: list[bool] = []  # per frame: whether the Services view was on it

        def recorded(display: textual_internals.Display, on: Any, update: Any) -> None:
            if update is not None:
                frames.append(app.view("services").region.area > 0)
            display(on, update)

        textual_internals.wrap_display(app, recorded)
        timer = textual_internals.frame_timer(screen)
        assert timer is not None
        timer.pause()
        timer_asked: list[bool] = []
        timer.resume = lambda: timer_asked.append(True)  # type: ignore[method-assign]

        async def within(condition: Callable[[], object], what: str) -> None:
            deadline = time.monotonic() + 5.0
            while not condition():
                assert time.monotonic() < deadline, f"not within 5 s: {what}"
                await asyncio.sleep(0.001)  # polling, bounded by the deadline

        app.post_message(events.Key("2", "2"))
        await within(lambda: any(frames), "the view painted")
        assert app.active_view_id == "services"
        # No key: the screen asks for the timer (stopped here) and paints nothing.
        painted = len(frames)
        screen._key_at = float("-inf")
        timer_asked.clear()
        screen.query_one("#status", Static).update("changed", layout=False)
        await within(lambda: timer_asked, "the repaint left to the timer")
        assert len(frames) == painted


def test_folding_without_an_event_loop_takes_one_slice() -> None:
    from mailbus_workbench.folding import Folder
    from mailbus_workbench.model.pacing import FoldPacer
    from mailbus_workbench.model.state import WorkbenchModel

    model = WorkbenchModel()
    model.feed_events(flood(2_000))
    folder = Folder(model, FoldPacer(floor=500, ceiling=1_000))
    assert folder.fold() == 500  # the first fold is small: it measures the rate
    assert len(model.feed) == 1_500 and folder.slices == 0  # no loop: no slice queued
    folder.fold()
    assert len(model.feed) < 1_500


def quiet_settings(tricks: bool) -> Settings:
    """No user's keymap or templates read."""
    nowhere = Path("/nonexistent/mailbus")
    return Settings(
        speed_tricks=tricks, keymap_file=nowhere / "k.toml", templates_file=nowhere / "t.toml"
    )


@pytest.mark.parametrize("tricks", [True, False])
async def test_an_embedded_workbench_leaves_the_process_state_alone(tricks: bool) -> None:
    """Not the `mailbus` command's process (a user's program, a notebook): keys change
    neither the switch interval nor the collector, tricks on or off."""
    usual, thresholds = sys.getswitchinterval(), gc.get_threshold()
    frozen = gc.get_freeze_count()
    app = fixed_app(settings=quiet_settings(tricks))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        intervals: list[float] = []
        show = app.action_show

        def recorded(view_id: str) -> None:
            intervals.append(sys.getswitchinterval())
            show(view_id)

        app.action_show = recorded  # type: ignore[method-assign]
        await pilot.press("2", "3")
        await until(pilot, lambda: app.active_view_id == "waitsets", "the keys answered")
        app.refresh_now()
        assert intervals == [usual] * 2
        assert (gc.get_freeze_count(), gc.get_threshold()) == (frozen, thresholds)
        assert app.speed.key_frames is tricks and not app.speed.key_turn
    assert sys.getswitchinterval() == usual


async def test_speed_tricks_off_in_the_commands_process_change_nothing() -> None:
    usual, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    app = fixed_app(settings=quiet_settings(False), owns_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("2")
        await until(pilot, lambda: app.active_view_id == "services", "the view")
        app.refresh_now()
        assert sys.getswitchinterval() == usual and gc.get_freeze_count() == frozen
        assert not app.speed.fill_after_frame and not app.speed.key_frames


@pytest.mark.parametrize("tricks", [True, False])
async def test_with_speed_tricks_the_tab_underline_jumps_instead_of_sliding(
    tricks: bool,
) -> None:
    """A slide is ~20 frames of the tab bar painted after a view key, while the next key
    waits: with the tricks on (the default) the underline jumps to the tab."""
    app = fixed_app(settings=quiet_settings(tricks))
    app.animation_level = "full"  # as the command starts (fixed_app stills it for snapshots)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        underline: Any = app.query_one("#views Underline")  # the tab bar's, by CSS type
        slides: list[str] = []
        animate = underline.animate

        def recorded(attribute: str, *args: Any, **kwargs: Any) -> None:
            slides.append(attribute)
            animate(attribute, *args, **kwargs)

        underline.animate = recorded  # type: ignore[method-assign]
        start = underline.highlight_start
        await pilot.press("2")
        await until(pilot, lambda: app.active_view_id == "services", "the view")
        if tricks:
            await until(pilot, lambda: underline.highlight_start != start, "the jump")
            await pilot.pause()
            assert slides == [] and app.animation_level == "none"
        else:
            await until(pilot, lambda: "highlight_start" in slides, "the slide")


def test_the_speed_tricks_setting_is_a_boolean() -> None:
    assert settings_from({"speed-tricks": False}).speed_tricks is False
    assert settings_from({}).speed_tricks is True
    with pytest.raises(ConfigError) as info:
        settings_from({"speed-tricks": "no"})
    assert info.value.key == "workbench.speed-tricks"


async def test_a_view_key_draws_no_line_of_the_screen_the_tabs_or_a_pane_drawn_before() -> None:
    """Only what a view key changes is drawn again: the screen (whose focus moves), the
    tabbed container and the pane shown again draw only their background, which no key
    changes (Textual drew every line of each: a third of a view's first frame)."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for key, view in (("2", "services"), ("1", "topics")):  # each pane drawn once
            await pilot.press(key)
            await until(pilot, lambda view=view: app.active_view_id == view, view)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, KeyScreen)
        widgets: dict[str, Any] = {
            "screen": screen,
            "tabbed content": app.query_one("#views"),
            "pane": app.query_one("#services"),
            "tab bar": app.query_one("#views ContentTabs"),  # its highlight moves: drawn
        }
        drawn: dict[str, int] = dict.fromkeys(widgets, 0)
        for name, widget in widgets.items():
            draw = widget.render_line

            def counted(y: int, draw: Any = draw, name: str = name) -> Any:
                drawn[name] += 1
                return draw(y)

            widget.render_line = counted
        await pilot.press("2")
        await until(pilot, lambda: app.active_view_id == "services", "the view")
        await until(pilot, lambda: not screen.changes_to_paint(), "the frame")
        assert drawn["tab bar"] > 0
        assert {name: n for name, n in drawn.items() if name != "tab bar"} == {
            "screen": 0,
            "tabbed content": 0,
            "pane": 0,
        }


async def test_the_topic_tree_focused_again_draws_no_label_again() -> None:
    """Back on Topics, the tree's focus changes its look (the cursor line), and Textual's
    Tree drew every line again for it; its lines are cached per focus state, so the
    lines of an unchanged tree come from that cache (FixedTree)."""
    from mailbus_workbench.widgets.topic_tree import TopicTree

    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        screen = app.screen
        assert isinstance(screen, KeyScreen)
        await pilot.press("2", "1", "2")  # each focus state drawn once
        await until(pilot, lambda: app.active_view_id == "services", "the Services view")
        await until(pilot, lambda: not screen.changes_to_paint(), "the frames")
        labels: list[str] = []
        render_label = tree.render_label

        def counted(node: Any, base_style: Any, style: Any) -> Any:
            labels.append(str(node.label))
            return render_label(node, base_style, style)

        tree.render_label = counted  # type: ignore[method-assign]
        await pilot.press("1")
        await until(pilot, lambda: app.active_view_id == "topics", "the Topics view")
        await until(pilot, lambda: app.focused is tree, "the tree focused")
        for _ in range(3):
            await until(pilot, lambda: not screen.changes_to_paint(), "the frames")
            await pilot.pause()
        assert labels == []
        tree.action_cursor_down()  # the cursor line moves: those lines are drawn
        await until(pilot, lambda: len(labels) >= 2, "the moved cursor drawn")


async def test_the_topic_tree_shown_again_draws_each_line_once() -> None:
    """Back on Topics, the tree draws its lines once (its focus restyles it), not a second
    time for the Resize Textual sends to a widget shown again at the same size."""
    from mailbus_workbench.widgets.topic_tree import TopicTree

    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        height = tree.size.height
        await pilot.press("2")
        await until(pilot, lambda: app.active_view_id == "services", "the Services view")
        await pilot.pause()
        lines: list[int] = []
        draw = tree.render_line

        def counted(y: int) -> Any:
            lines.append(y)
            return draw(y)

        tree.render_line = counted  # type: ignore[method-assign]
        await pilot.press("1")
        await until(pilot, lambda: app.active_view_id == "topics", "the Topics view")
        screen = app.screen
        assert isinstance(screen, KeyScreen)
        for _ in range(3):  # the Resize is handled after the first frame: later frames too
            await until(pilot, lambda: not screen.changes_to_paint(), "the frames")
            await pilot.pause()
        assert tree.size.height == height
        assert sorted(lines) == list(range(height))  # each line of the tree once
