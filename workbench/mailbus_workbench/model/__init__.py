"""The workbench's model: plain Python fed by trace events, testable without Textual.

Engine threads push events into a bounded feed; the UI drains it at a fixed refresh
rate and folds the events into the stores (topics, services, wait sets)."""

from mailbus_workbench.model.feed import EventFeed
from mailbus_workbench.model.services import ServiceStore, Trace, TraceStatus
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.model.topics import MessageRecord, TopicStats, TopicStore

__all__ = [
    "EventFeed",
    "MessageRecord",
    "ServiceStore",
    "TopicStats",
    "TopicStore",
    "Trace",
    "TraceStatus",
    "WorkbenchModel",
]
