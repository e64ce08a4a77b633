"""The topic tree: topics grouped by `/`, with count and rate, filtered fuzzily; pinned
topics first.

Made for tens of thousands of topics: a closed group's children become nodes only when
it opens, labels are refreshed on the nodes that exist, and the filtered names are kept
until the filter or the set of topics changes (a longer filter narrows the last names)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode as UINode

from mailbus_workbench.model.fuzzy import FuzzyIndex
from mailbus_workbench.model.session_control import REPLAY_MARK
from mailbus_workbench.model.topics import (
    TopicStore,
    TreeNode,
    paths_to_open,
    topic_tree,
)
from mailbus_workbench.textual_internals import FixedTree
from mailbus_workbench.widgets import format as fmt

# A tree opens whole up to this many lines; a bigger one opens its groups level by level
# while they fit, the rest collapsed with their totals on them.
OPEN_LINES = 60
PIN_MARK = "★ "
_PINNED = "\x00"  # the key of a pinned row (no topic name holds a control character)

Figures = tuple[int, float, int, int]  # count, rate, replayed, topics
# A filter's names, as a set, and their tree once made (a list, to be filled once).
_Listing = tuple[tuple[str, ...], frozenset[str], list[tuple[TreeNode, ...]]]
KEPT_FILTERS = 16


def _path(topic: str) -> str:
    """Where `topic` sits in the tree (as model.topics.topic_tree files it)."""
    return "/".join(p for p in topic.split("/") if p) or topic


class TopicTree(FixedTree[str]):
    """Node data is the topic name (None for a pure prefix)."""

    class TopicSelected(Message):
        def __init__(self, topic: str) -> None:
            super().__init__()
            self.topic = topic

    # The vertical scrollbar is always there, its empty track the tree's colour: one
    # coming or going as a filter changes the tree laid the whole screen out (20-30 ms
    # under a flow). No horizontal one, for the same reason: the pane is widened instead.
    DEFAULT_CSS = """
    TopicTree {
        height: 1fr;
        overflow-y: scroll;
        overflow-x: hidden;
        scrollbar-background: $surface;
        scrollbar-background-hover: $surface;
        scrollbar-background-active: $surface;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("topics", id=id)
        self.show_root = False
        self.guide_depth = 2
        self.filter_text = ""
        self.pinned: tuple[str, ...] = ()  # shown first, in this order
        self._store: TopicStore | None = None
        self._shape: tuple[str, ...] | None = None
        self._built_for: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        # The names the filter let through, for (filter, the store's set of topics).
        self._names_key: tuple[str, int, int] | None = None
        # For the set of topics `_kept_for`: every topic ready to filter, and the listings
        # of the last filters typed (backspace shows one again at once).
        self._kept_for: tuple[int, int] | None = None
        self._index: FuzzyIndex | None = None
        self._kept: dict[str, _Listing] = {}
        self._names: tuple[str, ...] = ()
        self._name_set: frozenset[str] = frozenset()
        self._topic_nodes: dict[str, UINode[str]] = {}
        self._pinned_nodes: dict[str, UINode[str]] = {}
        self._labels: dict[str, str] = {}
        # Every node made (groups too) by its path, and back: the cursor survives a rebuild.
        self._path_nodes: dict[str, UINode[str]] = {}
        self._node_paths: dict[int, str] = {}
        # Group nodes by path, with their label and their part of the topic tree.
        self._groups: dict[str, tuple[UINode[str], str, TreeNode]] = {}
        self._unfilled: dict[int, TreeNode] = {}  # closed groups whose children wait
        self._shown: dict[int, Figures] = {}  # the figures each node's label shows
        self._opened: set[str] = set()
        self._chosen: dict[str, bool] = {}
        self._around: set[str] = set()

    def get_label_width(self, node: UINode[str]) -> int:
        """What Textual's own measure gives, without rendering the label: it rendered
        (copied and styled) every line's label at each rebuild to find the widest, 9 ms
        of a filter letter's 40 with 10,000 topics (Textual invites the override)."""
        label = node.label
        width = label.cell_len if isinstance(label, Text) else cell_len(label)
        if node.allow_expand:
            width += cell_len(self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE)
        return width

    # -- what is listed ---------------------------------------------------------------------
    def _filtered(self, store: TopicStore) -> tuple[str, ...]:
        text = self.filter_text
        key = (text, store.version, id(store))
        if key == self._names_key:
            return self._names
        kept = self._kept
        if self._kept_for != key[1:]:
            # The set of topics changed: what was kept for the old one no longer holds.
            self._kept_for, self._index = key[1:], None
            kept.clear()
        listing = kept.pop(text, None)  # put back last: the least recent goes first
        if listing is None:
            listing = self._listing(store, text)
            if len(kept) >= KEPT_FILTERS:
                del kept[next(iter(kept))]
        kept[text] = listing
        self._names_key, (self._names, self._name_set, _) = key, listing
        return self._names

    def _listing(self, store: TopicStore, text: str) -> _Listing:
        # Typing on only narrows: every match of a longer text matched its start, so the
        # longest start kept is filtered again when it is much shorter than every topic.
        start = next(
            (
                self._kept[text[:i]][0]
                for i in range(len(text) - 1, 0, -1)
                if text[:i] in self._kept
            ),
            None,
        )
        if start is not None and len(start) * 4 < len(store.stats):
            names = tuple(FuzzyIndex(start).filter(text))
        else:
            if self._index is None:
                self._index = FuzzyIndex(sorted(store.stats))
            names = tuple(self._index.filter(text)) if text else self._index.names
        return names, frozenset(names), []

    def sync(self, store: TopicStore, *, force: bool = False) -> None:
        """Rebuild when the (filtered) topics or the pins changed, then refresh the labels."""
        self._store = store
        names = self._filtered(store)
        pinned = tuple(p for p in self.pinned if p in self._name_set)
        if force or (pinned, names) != self._built_for:
            self._rebuild(pinned, names)
        self._relabel(store, [*self._topic_nodes.items(), *self._pinned_nodes.items()])

    def _relabel(self, store: TopicStore, nodes: list[tuple[str, UINode[str]]]) -> None:
        shown = self._shown
        pinned_ids = {node.id for node in self._pinned_nodes.values()}
        for name, node in nodes:
            stats = store.stats.get(name)
            if stats is not None:
                figures = (stats.count, stats.rate, stats.replayed, 0)
                if shown.get(node.id) != figures:
                    shown[node.id] = figures
                    label = f"{PIN_MARK}{name}" if node.id in pinned_ids else self._labels[name]
                    node.set_label(self._label(label, *figures))
        for node, label, part in self._groups.values():
            if node.data is not None and node.data in self._topic_nodes:
                continue  # a topic that is also a group shows its own figures
            figures = self._group_figures(store, part)
            if shown.get(node.id) != figures:
                shown[node.id] = figures
                node.set_label(self._label(label, *figures))

    @staticmethod
    def _group_figures(store: TopicStore, part: TreeNode) -> Figures:
        counted = [s for s in map(store.stats.get, part.topics) if s is not None]
        return sum(s.count for s in counted), sum(s.rate for s in counted), 0, part.topic_count

    def _born_label(self, n: TreeNode) -> tuple[Text, Figures | None]:
        """A new node's label with its figures, as `_relabel` would set them (a label set
        after the node is made costs Textual a callback per node: 200 at a filter letter)."""
        store = self._store
        stats = store.stats.get(n.topic) if store is not None and n.topic is not None else None
        if stats is not None:
            figures: Figures = (stats.count, stats.rate, stats.replayed, 0)
        elif store is not None and n.child_count and n.topic is None:
            figures = self._group_figures(store, n)
        else:
            return fmt.plain(n.label), None
        return self._label(n.label, *figures), figures

    # -- building ---------------------------------------------------------------------------
    def _rebuild(self, pinned: tuple[str, ...], names: tuple[str, ...]) -> None:
        cursor = self.cursor_node
        selected = self._node_paths.get(cursor.id) if cursor is not None else None
        # Groups the user opened or closed keep that state through a rebuild.
        self._chosen = {path: node.is_expanded for path, (node, _, _) in self._groups.items()}
        self._built_for = (pinned, names)
        listed = set(pinned)
        self._shape = pinned + tuple(n for n in names if n not in listed) if pinned else names
        self._groups = {}
        self._topic_nodes = {}
        self._pinned_nodes = {}
        self._labels = {}
        self._path_nodes = {}
        self._node_paths = {}
        self._unfilled = {}
        self._shown = {}
        self.clear()
        with self.changing_nodes():
            for topic in pinned:
                node = self.root.add_leaf(fmt.plain(f"{PIN_MARK}{topic}"), data=topic)
                self._pinned_nodes[topic] = node
                self._path_nodes[_PINNED + topic] = node
                self._node_paths[node.id] = _PINNED + topic
            tree = self._tree_of(names)
            self._opened = paths_to_open(tree, OPEN_LINES - len(pinned))
            # The selection stays in sight: its groups open.
            parts = selected.split("/") if selected and selected[:1] != _PINNED else []
            self._around = {"/".join(parts[:i]) for i in range(1, len(parts))}
            self._add(self.root, tree)
        if selected is not None and selected in self._path_nodes:
            # A new node knows its line only once the tree has laid its lines out (else
            # the cursor lands on whatever sits on the old line number): lay them out now.
            self.get_node_at_line(0)
            self.move_cursor(self._path_nodes[selected])

    def _tree_of(self, names: tuple[str, ...]) -> tuple[TreeNode, ...]:
        """The topic tree of `names`, kept with them: a filter taken back, or typed again,
        shows its tree without regrouping (10,000 names take 25 ms to group)."""
        listing = self._kept.get(self.filter_text)
        if listing is None or listing[0] is not names:
            return topic_tree(names)
        if not listing[2]:
            listing[2].append(topic_tree(names))
        return listing[2][0]

    def _add(self, parent: UINode[str], nodes: tuple[TreeNode, ...]) -> list[UINode[str]]:
        made = []
        for n in nodes:
            label, figures = self._born_label(n)
            if n.child_count:
                expand = self._chosen.get(n.path, n.path in self._opened) or n.path in self._around
                child = parent.add(label, data=n.topic, expand=expand)
                self._groups[n.path] = (child, n.label, n)
                if expand:
                    made += self._add(child, n.children)
                else:
                    self._unfilled[child.id] = n
            else:
                child = parent.add_leaf(label, data=n.topic)
            if figures is not None:
                self._shown[child.id] = figures
            made.append(child)
            self._path_nodes[n.path] = child
            self._node_paths[child.id] = n.path
            if n.topic is not None:
                self._topic_nodes[n.topic] = child
                self._labels[n.topic] = n.label
        return made

    def _fill(self, node: UINode[str]) -> None:
        """Make a closed group's children (with their figures) before it opens."""
        part = self._unfilled.pop(node.id, None)
        if part is None:
            return
        with self.changing_nodes():
            self._add(node, part.children)

    # Every way a group opens makes its children first: space, enter (and a click on a
    # row) through these actions, shift+space on siblings; a click on the toggle icon
    # opens it directly, and NodeExpanded fills it then.
    def action_toggle_node(self) -> None:
        if self.cursor_node is not None:
            self._fill(self.cursor_node)
        super().action_toggle_node()

    def action_select_cursor(self) -> None:
        if self.cursor_node is not None:
            self._fill(self.cursor_node)
        super().action_select_cursor()

    def action_toggle_expand_all(self) -> None:
        if self.cursor_node is not None:
            for sibling in self.cursor_node.siblings:
                self._fill(sibling)
        super().action_toggle_expand_all()

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[str]) -> None:
        self._fill(event.node)

    @staticmethod
    def _label(name: str, count: int, rate: float, replayed: int = 0, topics: int = 0) -> Text:
        label = Text(name)
        label.append(f"  {count}", style="bold")
        label.append(f"  {fmt.rate(rate)}", style="dim")
        if replayed:  # replayed traffic is never taken for live traffic
            label.append(f"  {REPLAY_MARK}replay", style="italic magenta")
        if topics:
            label.append(f"  {topics} topic{'s' if topics > 1 else ''}", style="dim italic")
        return label

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        if event.node.data is not None:
            self.post_message(self.TopicSelected(event.node.data))

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        # A click on the row already under the cursor highlights nothing new: select it.
        if event.node.data is not None:
            self.post_message(self.TopicSelected(event.node.data))

    @property
    def shown_topics(self) -> tuple[str, ...]:
        """The topics the tree lists now (the filter applied), in its order: the pinned
        ones first."""
        return self._shape or ()

    @property
    def pinned_shown(self) -> tuple[str, ...]:
        """The pinned topics listed at the top now (those the filter lets through)."""
        return tuple(self._pinned_nodes)

    def select_topic(self, topic: str) -> bool:
        node = self._pinned_nodes.get(topic)
        if node is None and topic in self._name_set:
            parts = _path(topic).split("/")
            for i in range(1, len(parts)):  # a topic inside closed groups: open the way
                group = self._groups.get("/".join(parts[:i]))
                if group is not None:
                    self._fill(group[0])
                    group[0].expand()
            node = self._topic_nodes.get(topic)
        if node is None:
            return False
        self.get_node_at_line(0)  # lay the opened lines out before moving to one
        self.move_cursor(node)
        return True
