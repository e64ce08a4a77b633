"""Topics: the topic tree, the selected topic's messages and the inspector."""

from __future__ import annotations

import time

from mailbus import query
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input

from mailbus_workbench.model.layout import MAX_PINNED
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.textual_internals import FixedInput
from mailbus_workbench.views.base import View
from mailbus_workbench.views.topic_share import SHARE_BINDINGS, TopicShare
from mailbus_workbench.widgets.divider import Divider
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_summary import TopicSummary
from mailbus_workbench.widgets.topic_tree import TopicTree

LIVE_ROWS = 50
FLOOD_LIST_S = 0.5


class TopicsView(TopicShare, View):
    DEFAULT_FOCUS = "#topic-tree"
    HELP = """\
## Topics
The tree groups topics by `/` and shows each topic's message count and rate.
Type in the filter box to narrow it (fuzzy: `rbps` finds `robot/pose`); words like
`Header=value` or `Header~part` narrow the messages listed (`signature=failed`,
`signature=unsigned` for signed mail, `Client-GID=…`).
Select a topic to stream its messages; select a message to inspect its body (pretty
JSON), its headers, its raw RFC 5322 source and its diff against the previous message.

- **p** pause / resume the message lists (counts go on); while live the list shows
  the newest 50 messages, paused it shows all the history cap keeps; messages that
  come while paused are kept too (within the cap) and listed on resume
- **x** clear what is shown
- **`*`** pin / unpin the selected topic: pinned topics are listed first in the tree
  (marked ★) while the filter lets them through, and the layout keeps them
- **/** filter topics
- **h** change the history cap (messages kept per topic)
- **e** export the inspected message as an `.eml` file in the current directory: the
  exact bytes it arrived with (rebuilt, and said so, on the in-process transport)
- **g** plot a numeric field of the inspected JSON body: the one under the folded
  tree's cursor, else one picked in a prompt (the Plot view, **P**, opens with it)
- **[** / **]** narrow / widen the tree (or drag the divider)
- **c** copy the body, **C** copy a header (pick one), **R** copy the raw source
- **j** export the message as JSON; **s** save the topic's kept messages (those the
  filter lets through) as CSV, JSON Lines or Parquet (the file name's suffix says which)
- **t** save the inspected message as a test (the Tests view's folder, **T**): it
  expects a message on the topic with the fields that stayed the same over the messages
  seen
- **ctrl+f** find messages in every topic

Filter and Find terms: `Name=value`, `Name~part`, `Name!=value`, `Name>n`, `Name<n`,
`Name>=n`, `Name<=n`: a header when the message has one of that name (`Client-GID`,
`Subject`), else a field of the JSON body (`celsius>25`, `pose.x<=0.5`,
`robot/pose.x<=0.5` on that topic only). Numbers compare as numbers.
"""

    BINDINGS = [
        Binding("p", "pause", "Pause", id="topics.pause"),
        Binding("x", "clear", "Clear", id="topics.clear"),
        Binding("slash", "filter", "Filter", id="topics.filter"),
        Binding("h", "history_cap", "History cap", id="topics.cap"),
        Binding("asterisk", "pin", "Pin", show=False, id="topics.pin"),
        Binding("e", "export_eml", "Export .eml", show=False, id="topics.export_eml"),
        Binding("g", "plot_field", "Plot field", show=False, id="topics.plot"),
        Binding("t", "save_test", "Save as test", show=False, id="topics.save_test"),
        Binding("left_square_bracket", "resize(-4)", "Narrower", show=False, id="topics.narrower"),
        Binding("right_square_bracket", "resize(4)", "Wider", show=False, id="topics.wider"),
        *SHARE_BINDINGS,
    ]

    DEFAULT_CSS = """
    #topics-left { width: 34; }
    #topics-right { width: 1fr; }
    #topic-filter { margin: 0; }
    #message-list { height: 1fr; }
    #inspector { height: 1fr; }
    """

    class PauseChanged(Message):
        def __init__(self, paused: bool) -> None:
            super().__init__()
            self.paused = paused

    class Cleared(Message):
        pass

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.topic: str | None = None
        self.message_filter = query.parse("")
        self._list_shown = 0.0

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="topics-left"):
                yield FixedInput(placeholder="filter topics (fuzzy)  /", id="topic-filter")
                yield TopicTree(id="topic-tree")
            yield Divider("topics-left", id="topics-divider")
            with Vertical(id="topics-right"):
                yield TopicSummary(id="topic-summary")
                yield MessageList(id="message-list")
                yield Inspector(id="inspector")

    def refresh_view(self, now: float) -> None:
        model = self.parts.model
        tree = self.query_one(TopicTree)
        tree.sync(model.topics)
        self._show_matches()
        # A new user sees traffic at once; a topic the filter hides is not listed.
        self._follow_tree()
        self._show_topic(now)

    def _follow_tree(self) -> None:
        """The panes show a topic the tree shows: the selected one while it is listed,
        else the first listed, else none (never the messages of a hidden topic)."""
        tree = self.query_one(TopicTree)
        shown = tree.shown_topics
        if self.topic in shown:
            return
        first = shown[0] if shown else None
        if first is not None:
            tree.select_topic(first)
        self._choose(first)

    def _show_topic(self, now: float) -> None:
        model = self.parts.model
        stats = model.topics.stats.get(self.topic) if self.topic else None
        self.query_one(TopicSummary).show(
            stats,
            now,
            paused=model.paused,
            cap=model.topics.history_cap,
            new=model.new_by_topic.get(self.topic, 0) if self.topic else 0,
            new_total=model.new_while_paused,
            dropped=model.dropped_while_paused(self.topic) if self.topic else 0,
        )
        if not model.paused:
            messages = self.query_one(MessageList)
            listed = self._listed()
            # A flood turns the whole window over each refresh, faster than anyone reads:
            # then the list follows at FLOOD_LIST_S, which keeps keys and repaints quick.
            window = listed[1:] if listed and listed[0] is messages.held() else listed
            turned_over = bool(window) and window[0].number > messages.newest
            wall = time.monotonic()
            if turned_over and wall - self._list_shown < FLOOD_LIST_S:
                return
            self._list_shown = wall
            messages.show(self.topic, listed)
            self._inspect_highlighted()  # in the same frame as the list's new cursor

    def _listed(self) -> list[MessageRecord]:
        """Live, the newest LIVE_ROWS messages (a flood would churn the table); paused,
        everything the history cap keeps."""
        model = self.parts.model
        history = model.topics.history(self.topic) if self.topic else []
        if self.message_filter.terms:
            history = [r for r in history if self.message_filter.matches(r.event)]
        if model.paused:
            return history
        live = history[-LIVE_ROWS:]
        # The message the user holds stays listed (first) when newer ones push it out of
        # the window, so the cursor, the inspector and `e`/`j` keep it until the user moves.
        held = self.query_one(MessageList).held()
        if (
            held is not None
            and held.event.name == self.topic
            and (not live or held.number < live[0].number)
            and self.message_filter.matches(held.event)
        ):
            return [held, *live]
        return live

    def exportable(self) -> list[MessageRecord]:
        model = self.parts.model
        history = model.topics.history(self.topic) if self.topic else []
        return [r for r in history if self.message_filter.matches(r.event)]

    def jump_to(self, record: MessageRecord) -> bool:
        """Show `record` in its topic (Find's jump): select the topic and the message,
        clearing a filter that hides it and pausing if it is older than the live list."""
        if not self.message_filter.matches(record.event) or (
            record.event.name not in self.query_one(TopicTree).shown_topics
        ):
            self.query_one("#topic-filter", Input).value = ""
            self.message_filter = query.parse("")
            tree = self.query_one(TopicTree)
            tree.filter_text = ""
            tree.sync(self.parts.model.topics)
        self.query_one(TopicTree).select_topic(record.event.name)
        self._choose(record.event.name)
        messages = self.query_one(MessageList)
        if not any(r.number == record.number for r in self._listed()):
            if record not in self.parts.model.topics.history(record.event.name):
                self.notify("That message is no longer kept.", severity="warning", timeout=3)
                return False
            self.action_pause()  # paused, the list holds every kept message
        messages.show(self.topic, self._listed())
        messages.select_number(record.number)
        messages.focus()
        self.inspect(record)
        return True

    @on(TopicTree.TopicSelected)
    def _topic_selected(self, event: TopicTree.TopicSelected) -> None:
        self._choose(event.topic)

    def _choose(self, topic: str | None) -> None:
        if topic != self.topic:
            self.topic = topic
            self.query_one(Inspector).show(None, None)
            model = self.parts.model
            self.query_one(MessageList).show(self.topic, self._listed())
            self._show_topic(model.clock())

    @on(MessageList.MessageChosen)
    def _message_chosen(self, event: MessageList.MessageChosen) -> None:
        # The message highlighted now, not when the event was posted (rows move on).
        self._inspect_highlighted(again=True)

    def _inspect_highlighted(self, *, again: bool = False) -> None:
        """Inspect the highlighted message; `again`: even if it is the one shown."""
        record = self.query_one(MessageList).selected()
        shown = self.query_one(Inspector).record
        if record is not None and (
            again
            or shown is None
            or (shown.event.name, shown.number) != (record.event.name, record.number)
        ):
            self.inspect(record)

    def inspect(self, record: MessageRecord) -> None:
        record = self.parts.model.recorded_raw.resolve(record)  # a replay's recorded bytes
        previous = self.parts.model.topics.previous(record.event.name, record.number)
        self.query_one(Inspector).show(record, previous, self.parts.raw_date)

    @on(Input.Changed, "#topic-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        tree = self.query_one(TopicTree)
        self.message_filter = query.parse(event.value)
        tree.filter_text = self.message_filter.topic_text
        tree.sync(self.parts.model.topics)
        self._show_matches()
        self._follow_tree()
        if self.topic is not None:
            self.query_one(MessageList).show(self.topic, self._listed())

    def _show_matches(self) -> None:
        """How many topics the filter lets through, on the filter box (as fzf counts):
        each key answers on screen, also when the tree stays the same."""
        tree = self.query_one(TopicTree)
        counted = ""
        if tree.filter_text:
            counted = f"{len(tree.shown_topics):,} of {len(self.parts.model.topics.stats):,}"
        box = self.query_one("#topic-filter", Input)
        if box.border_subtitle != counted:
            box.border_subtitle = counted

    @on(Input.Submitted, "#topic-filter")
    def _filter_done(self) -> None:
        self.query_one(TopicTree).focus()

    def action_pause(self) -> None:
        model = self.parts.model
        new, dropped = model.new_while_paused, model.dropped_while_paused()
        model.set_paused(not model.paused)
        if model.paused:  # browse the whole history while paused
            self.query_one(MessageList).show(self.topic, self._listed())
        else:
            self._list_shown = 0.0  # what came while paused is listed now, flood or not
        self.post_message(self.PauseChanged(model.paused))
        self._show_topic(model.clock())
        if model.paused:
            said = "Paused: message lists frozen; new messages are kept and listed on resume"
        else:
            said = f"Resumed: {new} messages came while paused"
            if dropped:
                cap = model.topics.history_cap
                said += f"; {dropped} of them dropped (more than the history cap {cap} a topic)"
        self.notify(said, timeout=3)

    def action_clear(self) -> None:
        model = self.parts.model
        model.topics.clear()
        self.topic = None
        self.query_one(MessageList).show(None, [])
        self.query_one(Inspector).show(None, None)
        self.query_one(TopicTree).sync(model.topics, force=True)
        self._show_topic(model.clock())
        self.post_message(self.Cleared())

    def action_save_test(self) -> None:
        from mailbus_workbench.views import save_test

        record = self.query_one(Inspector).record
        if record is None:
            self.notify("Select a message to save as a test", severity="warning", timeout=3)
            return
        topic = record.event.name
        source = save_test.message_source(self.parts, record)
        save_test.offer(self, self.parts, f"a message on {topic}", topic, source)

    @property
    def pinned(self) -> tuple[str, ...]:
        """The pinned topics, in the order they were pinned."""
        return self.query_one(TopicTree).pinned

    def set_pinned(self, topics: tuple[str, ...]) -> None:
        tree = self.query_one(TopicTree)
        tree.pinned = tuple(dict.fromkeys(topics))[:MAX_PINNED]
        tree.sync(self.parts.model.topics)

    def action_pin(self) -> None:
        topic = self.topic
        if topic is None:
            self.notify("Select a topic to pin", severity="warning", timeout=3)
            return
        pinned = self.pinned
        if topic in pinned:
            self.set_pinned(tuple(t for t in pinned if t != topic))
            self.notify(f"Unpinned {topic}", timeout=2, markup=False)
        elif len(pinned) >= MAX_PINNED:
            self.notify(f"At most {MAX_PINNED} pinned topics", severity="warning", timeout=3)
            return
        else:
            self.set_pinned((*pinned, topic))
            self.notify(f"Pinned {topic}: listed first", timeout=2, markup=False)
        self.query_one(TopicTree).select_topic(topic)

    def action_plot_field(self) -> None:
        self.query_one(Inspector).plot_field()

    def action_filter(self) -> None:
        self.query_one("#topic-filter", Input).focus()

    def action_history_cap(self) -> None:
        from mailbus_workbench.screens import NumberPrompt

        model = self.parts.model

        def done(value: int | None) -> None:
            if value is not None:
                self._set_history_cap(value)

        self.app.push_screen(
            NumberPrompt("Messages kept per topic", model.topics.history_cap, 1, 100_000),
            done,
        )

    def _set_history_cap(self, cap: int) -> None:
        model = self.parts.model
        model.topics.history_cap = cap
        self.notify(f"Keeping {cap} messages per topic", timeout=2)
        self.refresh_view(model.clock())

    def action_export_eml(self) -> None:
        from pathlib import Path

        from mailbus_workbench.model.eml import ExportError, write_eml

        record = self.query_one(Inspector).record
        if record is None:
            self.notify("Select a message to export", severity="warning", timeout=3)
            return
        try:
            path, eml = write_eml(Path.cwd(), record, self.parts.raw_date)
        except ExportError as exc:
            self.notify(f"Export failed: {exc}", severity="error", markup=False)
            return
        self.notify(f"Exported {path} ({eml.description})", timeout=5, markup=False)

    def action_resize(self, delta: int) -> None:
        left = self.query_one("#topics-left")
        width = left.size.width or 34
        left.styles.width = max(12, min(width + delta, self.size.width - 20))
