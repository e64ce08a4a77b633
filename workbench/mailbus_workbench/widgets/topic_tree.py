"""The topic tree: topics grouped by `/`, with count and rate, filtered fuzzily."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode as UINode

from mailbus_workbench.model.fuzzy import fuzzy_filter
from mailbus_workbench.model.session_control import REPLAY_MARK
from mailbus_workbench.model.topics import (
    TopicStore,
    TreeNode,
    paths_to_open,
    topic_tree,
    topics_under,
)
from mailbus_workbench.widgets import format as fmt

# A tree opens whole up to this many lines; a bigger one opens its groups level by level
# while they fit, the rest collapsed with their totals on them.
OPEN_LINES = 60


class TopicTree(Tree[str]):
    """Node data is the topic name (None for a pure prefix)."""

    class TopicSelected(Message):
        def __init__(self, topic: str) -> None:
            super().__init__()
            self.topic = topic

    DEFAULT_CSS = "TopicTree { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("topics", id=id)
        self.show_root = False
        self.guide_depth = 2
        self.filter_text = ""
        self._shape: tuple[str, ...] | None = None
        self._topic_nodes: dict[str, UINode[str]] = {}
        self._labels: dict[str, str] = {}
        # Every node (groups too) by its path, and back: the cursor survives a rebuild.
        self._path_nodes: dict[str, UINode[str]] = {}
        self._node_paths: dict[int, str] = {}
        # Group nodes by path, with their label and the topics below them (for totals).
        self._groups: dict[str, tuple[UINode[str], str, tuple[str, ...]]] = {}

    def sync(self, store: TopicStore, *, force: bool = False) -> None:
        """Rebuild when the set of (filtered) topics changed, then refresh the labels."""
        names = (
            tuple(fuzzy_filter(self.filter_text, store.stats))
            if self.filter_text
            else tuple(sorted(store.stats))
        )
        if force or names != self._shape:
            self._rebuild(names)
        for name, node in self._topic_nodes.items():
            stats = store.stats.get(name)
            if stats is not None:
                node.set_label(
                    self._label(
                        self._labels[name], stats.count, stats.rate, replayed=stats.replayed
                    )
                )
        for node, label, topics in self._groups.values():
            if node.data is not None and node.data in self._topic_nodes:
                continue  # a topic that is also a group shows its own figures
            counted = [store.stats[t] for t in topics if t in store.stats]
            node.set_label(
                self._label(
                    label,
                    sum(s.count for s in counted),
                    sum(s.rate for s in counted),
                    topics=len(topics),
                )
            )

    def _rebuild(self, names: tuple[str, ...]) -> None:
        cursor = self.cursor_node
        selected = self._node_paths.get(cursor.id) if cursor is not None else None
        # Groups the user opened or closed keep that state through a rebuild.
        chosen = {path: node.is_expanded for path, (node, _, _) in self._groups.items()}
        self._shape = names
        self._groups = {}
        self._topic_nodes = {}
        self._labels = {}
        self._path_nodes = {}
        self._node_paths = {}
        self.clear()

        tree = topic_tree(names)
        opened = paths_to_open(tree, OPEN_LINES)
        # The selection stays in sight: its groups open.
        parts = selected.split("/") if selected is not None else []
        around = {"/".join(parts[:i]) for i in range(1, len(parts))}

        def add(parent: UINode[str], nodes: tuple[TreeNode, ...]) -> None:
            for n in nodes:
                if n.children:
                    expand = chosen.get(n.path, n.path in opened) or n.path in around
                    child = parent.add(fmt.plain(n.label), data=n.topic, expand=expand)
                    self._groups[n.path] = (child, n.label, topics_under(n))
                    add(child, n.children)
                else:
                    child = parent.add_leaf(fmt.plain(n.label), data=n.topic)
                self._path_nodes[n.path] = child
                self._node_paths[child.id] = n.path
                if n.topic is not None:
                    self._topic_nodes[n.topic] = child
                    self._labels[n.topic] = n.label

        add(self.root, tree)
        if selected is not None and selected in self._path_nodes:
            # A new node knows its line only once the tree has laid its lines out (else
            # the cursor lands on whatever sits on the old line number): lay them out now.
            self.get_node_at_line(0)
            self.move_cursor(self._path_nodes[selected])

    @staticmethod
    def _label(name: str, count: int, rate: float, *, topics: int = 0, replayed: int = 0) -> Text:
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
        """The topics the tree lists now (the filter applied), in its order."""
        return self._shape or ()

    def select_topic(self, topic: str) -> bool:
        node = self._topic_nodes.get(topic)
        if node is None:
            return False
        parent = node.parent
        while parent is not None:  # a topic inside closed groups: open the way to it
            parent.expand()
            parent = parent.parent
        self.get_node_at_line(0)  # lay the opened lines out before moving to one
        self.move_cursor(node)
        return True
