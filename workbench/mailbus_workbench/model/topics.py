"""Topic statistics and bounded per-topic message history."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from mailbus.trace import TraceEvent

from mailbus_workbench.model.session_control import is_replayed

DEFAULT_HISTORY_CAP = 500
MAX_HISTORY_CAP = 100_000
DEFAULT_MAX_TOPICS = 5_000
RATE_WINDOW_S = 1.0  # one rate sample per second
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
        self.count += 1
        self.bytes += size
        self.last_seen = now
        self._window_count += 1
        self._window_bytes += size

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
        stats.add(now, event.size)
        if is_replayed(event.headers):
            stats.replayed += 1
        self.total += 1
        if keep:
            self._history[name].append(MessageRecord(stats.count, event))

    def tick(self, now: float) -> None:
        for stats in self.stats.values():
            stats.tick(now)

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


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One node of the topic tree: a path prefix and, if a topic ends here, its name."""

    label: str
    path: str
    topic: str | None
    children: tuple[TreeNode, ...]


def topic_tree(names: Iterable[str]) -> tuple[TreeNode, ...]:
    """Group topic names by `/` into a tree, children sorted by label."""
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    ends: dict[str, str] = {}  # normalised path -> the topic's real name
    for name in names:
        node = root
        parts = [p for p in name.split("/") if p] or [name]
        for part in parts:
            node = node.setdefault(part, {})
        ends["/".join(parts)] = name

    def build(level: dict, prefix: str) -> tuple[TreeNode, ...]:  # type: ignore[type-arg]
        out = []
        for label in sorted(level):
            path = f"{prefix}/{label}" if prefix else label
            out.append(TreeNode(label, path, ends.get(path), build(level[label], path)))
        return tuple(out)

    return build(root, "")


def topics_under(node: TreeNode) -> tuple[str, ...]:
    """Every topic at or below `node`."""
    own = (node.topic,) if node.topic is not None else ()
    return own + tuple(t for child in node.children for t in topics_under(child))


def paths_to_open(nodes: tuple[TreeNode, ...], lines: int) -> set[str]:
    """The groups to open so that the tree shows at most `lines` lines: level by level,
    each group opened if its children still fit (300 topics must not open as ~600 lines;
    a small tree opens whole)."""
    shown = len(nodes)
    queue = [n for n in nodes if n.children]
    opened: set[str] = set()
    while queue:
        group = queue.pop(0)
        if shown + len(group.children) > lines:
            continue
        shown += len(group.children)
        opened.add(group.path)
        queue.extend(n for n in group.children if n.children)
    return opened
