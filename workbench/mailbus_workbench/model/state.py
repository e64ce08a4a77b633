"""The whole model: the feed and the stores it folds into."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable

from mailbus.envelope import EnvelopeKind
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.trace import Kind, TraceEvent

from mailbus_workbench.model.feed import STEM_ERRORS, EventFeed
from mailbus_workbench.model.participants import ParticipantDirectory
from mailbus_workbench.model.recorded_raw import REPLAY_SENT, RecordedRaw
from mailbus_workbench.model.series import SeriesStore
from mailbus_workbench.model.services import ServiceStore
from mailbus_workbench.model.topics import TopicStore
from mailbus_workbench.model.waitsets import WaitSetLike, WaitSetMonitor, WaitSetRow

# What the Log view lists: what went wrong somewhere in the observed system.
NOTICE_KINDS = frozenset(
    {
        Kind.SKIPPED.value,
        Kind.ERROR.value,
        Kind.DISCARDED.value,
        Kind.ANNOUNCEMENT_INVALID.value,
        *STEM_ERRORS,
    }
)

Clock = Callable[[], float]


class WorkbenchModel:
    """Everything the views show. `pump()` runs on the UI thread only."""

    def __init__(
        self,
        *,
        clock: Clock = time.time,
        wait_sets: Callable[[], Iterable[WaitSetLike]] = tuple,
        history_cap: int | None = None,
        feed_capacity: int | None = None,
        service_timeout_s: float | None = None,
    ) -> None:
        self.clock = clock
        self.feed = EventFeed(feed_capacity) if feed_capacity else EventFeed()
        self.topics = TopicStore(history_cap) if history_cap else TopicStore()
        self.services = (
            ServiceStore(timeout_s=service_timeout_s) if service_timeout_s else ServiceStore()
        )
        self.wait_sets = WaitSetMonitor(wait_sets)
        self.participants = ParticipantDirectory()
        self.recorded_raw = RecordedRaw()  # replayed messages' recorded bytes
        self.plots = SeriesStore()  # what the Plot view draws
        self.notices: deque[TraceEvent] = deque(maxlen=200)  # skipped emails, errors
        self.paused = False
        # Paused, messages are still kept (the lists on screen stand still): counted so
        # that the summary can say how many are new and how many the cap dropped.
        self.new_while_paused = 0
        self.new_by_topic: Counter[str] = Counter()  # the summary shows one topic's
        self.events_seen = 0
        self.pumps = 0

    def pump(self, limit: int | None = None) -> int:
        """Fold the queued events in; return how many were taken."""
        events = self.feed.drain(limit)
        topics = self.topics
        services = self.services
        plots = self.plots
        paused = self.paused
        received = Kind.RECEIVED.value
        discarded = Kind.DISCARDED.value
        now = self.clock()
        for event in events:
            kind = event.kind
            if kind == received:
                detail = event.detail
                if detail == EnvelopeKind.MESSAGE and event.name == PARTICIPANTS_TOPIC:
                    # Announcements feed the Participants view, not the Topics one.
                    notice = self.participants.add(event, now)
                    if notice is not None:
                        self.notices.append(notice)
                elif detail == EnvelopeKind.MESSAGE:
                    # Paused: kept as ever (within the history cap); the lists on screen
                    # stand still and show them on resume.
                    topics.add(event)
                    plots.on_message(event)  # the plot has a pause of its own
                    if paused:
                        self.new_while_paused += 1
                        self.new_by_topic[event.name] += 1
                elif detail in (EnvelopeKind.REQUEST, EnvelopeKind.RESPONSE):
                    services.add(event)
                    plots.on_call_event(event, services)
            elif kind == REPLAY_SENT:
                self.recorded_raw.add(event)
            elif kind in NOTICE_KINDS:
                self.notices.append(event)
                if kind == discarded:
                    services.add(event)  # the call it answered is late
        self.events_seen += len(events)
        topics.tick(now)
        plots.tick(now)
        self.participants.expire(now)
        self.wait_sets.sample(int(now * 1e9))
        self.pumps += 1
        return len(events)

    def wait_set_rows(self) -> list[WaitSetRow]:
        """This process's wait sets, then those other participants announce."""
        return [*self.wait_sets.ordered(), *self.participants.remote_wait_sets()]

    def feed_events(self, events: Iterable[TraceEvent]) -> None:
        """Push events as if the engine had emitted them (fixtures, tests)."""
        for event in events:
            self.feed.listener(event)

    def dropped_while_paused(self, topic: str | None = None) -> int:
        """Messages that came while paused and that the history cap already dropped
        (more than history-cap of one topic), for `topic` or for every topic."""
        cap = self.topics.history_cap
        if topic is not None:
            return max(0, self.new_by_topic.get(topic, 0) - cap)
        return sum(max(0, n - cap) for n in self.new_by_topic.values())

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        if not paused:
            self.new_while_paused = 0
            self.new_by_topic.clear()

    def clear(self) -> None:
        self.topics.clear()
        self.services.clear()
        self.recorded_raw.clear()
        self.notices.clear()
