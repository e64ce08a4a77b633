"""The topic tree: topics grouped by `/`, with count and rate, filtered fuzzily."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode as UINode

from mailbus_workbench.model.fuzzy import fuzzy_filter
from mailbus_workbench.model.topics import TopicStore, TreeNode, topic_tree
from mailbus_workbench.widgets import format as fmt


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
                node.set_label(self._label(self._labels[name], stats.count, stats.rate))

    def _rebuild(self, names: tuple[str, ...]) -> None:
        cursor = self.cursor_node
        selected = self._node_paths.get(cursor.id) if cursor is not None else None
        self._shape = names
        self._topic_nodes = {}
        self._labels = {}
        self._path_nodes = {}
        self._node_paths = {}
        self.clear()

        def add(parent: UINode[str], nodes: tuple[TreeNode, ...]) -> None:
            for n in nodes:
                if n.children:
                    child = parent.add(fmt.plain(n.label), data=n.topic, expand=True)
                    add(child, n.children)
                else:
                    child = parent.add_leaf(fmt.plain(n.label), data=n.topic)
                self._path_nodes[n.path] = child
                self._node_paths[child.id] = n.path
                if n.topic is not None:
                    self._topic_nodes[n.topic] = child
                    self._labels[n.topic] = n.label

        add(self.root, topic_tree(names))
        if selected is not None and selected in self._path_nodes:
            # A new node knows its line only once the tree has laid its lines out (else
            # the cursor lands on whatever sits on the old line number): lay them out now.
            self.get_node_at_line(0)
            self.move_cursor(self._path_nodes[selected])

    @staticmethod
    def _label(name: str, count: int, rate: float) -> Text:
        label = Text(name)
        label.append(f"  {count}", style="bold")
        label.append(f"  {fmt.rate(rate)}", style="dim")
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
        self.move_cursor(node)
        return True
