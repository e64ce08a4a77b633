"""Topic statistics and bounded per-topic message history."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from mailbus.trace import TraceEvent

from mailbus_workbench.model.session_control import is_replayed

DEFAULT_HISTORY_CAP = 500
MAX_HISTORY_CAP = 100_000
DEFAULT_MAX_TOPICS = 20_000
RATE_WINDOW_S = 1.0  # one rate sample per second
TICK_BUDGET = 2_000  # rate windows closed per pump at most (about 3 ms)
RATE_HISTORY = 60  # samples kept for the sparkline


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One message seen on a topic: the trace event plus its running number."""

    number: int
    event: TraceEvent

    @property
    def time_s(self) -> float:
        return (self.event.reception_timestamp_ns or self.event.time_ns) / 1e9

    @property
    def body(self) -> str:
        return self.event.body or ""

    @property
    def replayed(self) -> bool:
        """Sent by a session player, not by a live participant."""
        return is_replayed(self.event.headers)


@dataclass(slots=True)
class TopicStats:
    name: str
    count: int = 0
    bytes: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    rate: float = 0.0  # messages/s over the last full window
    bytes_rate: float = 0.0  # bytes/s over the last full window
    replayed: int = 0  # messages sent by a session player (shown apart from live ones)
    rate_history: deque[float] = field(default_factory=lambda: deque(maxlen=RATE_HISTORY))
    _window_start: float = 0.0
    _window_count: int = 0
    _window_bytes: int = 0

    def add(self, now: float, size: int) -> None:
        if self.count == 0:
            self.first_seen = now
            self._window_start = now
        elif now >= self._window_start + RATE_WINDOW_S:
            # The window this message comes after is closed first, so a window counts
            # exactly what came within it however late the store's tick reaches it.
            self.tick(now)
        self.count += 1
        self.bytes += size
        self.last_seen = now
        self._window_count += 1
        self._window_bytes += size

    @property
    def window_ends(self) -> float:
        """When the current rate window ends (a tick before then changes nothing)."""
        return self._window_start + RATE_WINDOW_S

    def tick(self, now: float) -> None:
        """Close every rate window that has ended by `now` (silent windows count 0)."""
        if self.count == 0:
            return
        elapsed = now - self._window_start
        if elapsed < RATE_WINDOW_S:
            return
        windows = int(elapsed // RATE_WINDOW_S)
        self.rate = self._window_count / RATE_WINDOW_S
        self.bytes_rate = self._window_bytes / RATE_WINDOW_S
        self.rate_history.append(self.rate)
        for _ in range(min(windows - 1, RATE_HISTORY)):
            self.rate_history.append(0.0)
        if windows > 1:
            self.rate = self.bytes_rate = 0.0
        self._window_start += windows * RATE_WINDOW_S
        self._window_count = 0
        self._window_bytes = 0


class TopicStore:
    """Stats for every topic and the last `history_cap` messages of each.

    Memory bound: at most `max_topics` topics with history, each holding at most
    `history_cap` records; further topics are counted in `untracked`."""

    def __init__(
        self,
        history_cap: int = DEFAULT_HISTORY_CAP,
        max_topics: int = DEFAULT_MAX_TOPICS,
    ) -> None:
        self._history_cap = _check_cap(history_cap)
        self.max_topics = max_topics
        self.stats: dict[str, TopicStats] = {}
        self._history: dict[str, deque[MessageRecord]] = {}
        self.total = 0
        self.untracked = 0
        self.version = 0  # bumps when the set of topics changes (for the tree)
        # Topics by the end of their rate window: a tick visits only those whose window
        # ended (10,000 topics are not walked at every pump, many times a second).
        self._due: list[tuple[float, int, TopicStats]] = []
        self._added = 0

    @property
    def history_cap(self) -> int:
        return self._history_cap

    @history_cap.setter
    def history_cap(self, cap: int) -> None:
        cap = _check_cap(cap)
        self._history_cap = cap
        for name, history in self._history.items():
            self._history[name] = deque(history, maxlen=cap)

    def add(self, event: TraceEvent, keep: bool = True) -> None:
        """Count `event`; keep it in the topic's history unless `keep` is False."""
        name = event.name
        stats = self.stats.get(name)
        if stats is None:
            if len(self.stats) >= self.max_topics:
                self.untracked += 1
                return
            stats = self.stats[name] = TopicStats(name)
            self._history[name] = deque(maxlen=self._history_cap)
            self.version += 1
        now = (event.reception_timestamp_ns or event.time_ns) / 1e9
        if stats.count == 0:
            stats.add(now, event.size)
            self._added += 1
            heapq.heappush(self._due, (stats.window_ends, self._added, stats))
        else:
            stats.add(now, event.size)
        if is_replayed(event.headers):
            stats.replayed += 1
        self.total += 1
        if keep:
            self._history[name].append(MessageRecord(stats.count, event))

    def tick(self, now: float) -> None:
        """Close the rate windows that ended by `now`, at most TICK_BUDGET of them: topics
        first seen together (a workbench attaching to 10,000 busy topics) end their
        windows together, and closing them all at once held a key for 30 ms. The rest are
        closed at the next pumps, exactly: a window a message came after is closed by
        that message (TopicStats.add)."""
        due = self._due
        ended = []
        budget = TICK_BUDGET
        while due and due[0][0] <= now and budget:
            budget -= 1
            _, _, stats = heapq.heappop(due)
            if self.stats.get(stats.name) is stats:  # else cleared meanwhile
                if stats.window_ends <= now:  # else a message closed it already
                    stats.tick(now)
                ended.append(stats)
        for stats in ended:
            self._added += 1
            heapq.heappush(due, (stats.window_ends, self._added, stats))

    def history(self, name: str) -> list[MessageRecord]:
        return list(self._history.get(name, ()))

    def previous(self, name: str, number: int) -> MessageRecord | None:
        """The message of `name` just before message `number`, if still held."""
        before = None
        for record in self._history.get(name, ()):
            if record.number >= number:
                break
            before = record
        return before

    def names(self) -> list[str]:
        return sorted(self.stats)

    def clear(self, name: str | None = None) -> None:
        """Forget one topic's history and stats, or everything."""
        if name is None:
            self.stats.clear()
            self._due.clear()
            self._history.clear()
            self.total = 0
            self.untracked = 0
        else:
            self.stats.pop(name, None)
            self._history.pop(name, None)
        self.version += 1

    def held(self) -> int:
        return sum(len(h) for h in self._history.values())

    def __iter__(self) -> Iterator[TopicStats]:
        return iter(self.stats.values())


def _check_cap(cap: int) -> int:
    if not isinstance(cap, int) or not 1 <= cap <= MAX_HISTORY_CAP:
        raise ValueError(f"history cap must be an integer from 1 to {MAX_HISTORY_CAP}")
    return cap


class _Branch:
    """A prefix of the topic index: its children by label, the topic ending here (its
    real name) and every topic at or below it."""

    __slots__ = ("children", "topic", "under")

    def __init__(self) -> None:
        self.children: dict[str, _Branch] = {}
        self.topic: str | None = None
        self.under: list[str] = []


class TreeNode:
    """One node of the topic tree: a path prefix and, if a topic ends here, its name.

    Its children are made when first asked for: 10,000 topics shown as 60 lines need not
    make 11,000 nodes at each change of the filter."""

    __slots__ = ("_branch", "_children", "label", "path", "topic")

    def __init__(self, label: str, path: str, branch: _Branch) -> None:
        self.label = label
        self.path = path
        self.topic = branch.topic
        self._branch = branch
        self._children: tuple[TreeNode, ...] | None = None

    @property
    def children(self) -> tuple[TreeNode, ...]:
        if self._children is None:
            self._children = _nodes(self._branch, self.path)
        return self._children

    @property
    def child_count(self) -> int:
        return len(self._branch.children)

    @property
    def topics(self) -> Sequence[str]:
        """Every topic at or below this node (not a copy: not to be changed)."""
        return self._branch.under

    @property
    def topic_count(self) -> int:
        return len(self._branch.under)

    def __repr__(self) -> str:
        return f"TreeNode({self.label!r}, {self.path!r}, {self.topic!r})"


def _nodes(branch: _Branch, prefix: str) -> tuple[TreeNode, ...]:
    return tuple(
        TreeNode(label, f"{prefix}/{label}" if prefix else label, branch.children[label])
        for label in sorted(branch.children)
    )


def topic_tree(names: Iterable[str]) -> tuple[TreeNode, ...]:
    """Group topic names by `/` into a tree, children sorted by label."""
    root = _Branch()
    for name in names:
        branch = root
        for part in [p for p in name.split("/") if p] or [name]:
            child = branch.children.get(part)
            if child is None:
                child = branch.children[part] = _Branch()
            child.under.append(name)
            branch = child
        branch.topic = name
    return _nodes(root, "")


def topics_under(node: TreeNode) -> tuple[str, ...]:
    """Every topic at or below `node`."""
    return tuple(node.topics)


def paths_to_open(nodes: tuple[TreeNode, ...], lines: int) -> set[str]:
    """The groups to open so that the tree shows at most `lines` lines: level by level,
    each group opened if its children still fit (300 topics must not open as ~600 lines;
    a small tree opens whole)."""
    shown = len(nodes)
    queue = deque(n for n in nodes if n.child_count)
    opened: set[str] = set()
    while queue:
        group = queue.popleft()
        if shown + group.child_count > lines:
            continue
        shown += group.child_count
        opened.add(group.path)
        queue.extend(n for n in group.children if n.child_count)
    return opened
