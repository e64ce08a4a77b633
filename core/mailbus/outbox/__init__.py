"""The durable outbox: the filesystem queue of the design, crash-safe, under any
EmailSender. See docs/outbox.md.

- storage: the interface (one method per primitive) and its errors
- fs_storage: the directory layout on a local file system
- scheduler: due sends, back-off, dead letters, start-up recovery, the lock
- sender: OutboxSender, the EmailSender that enqueues and delivers in the background
- listing: the plain view used by `mailbus queue` and the workbench
- admin: retry and purge by hand, directly or through the running sender
- control: the request/answer files by which admin reaches a running sender
- cli: `mailbus queue`
"""

from mailbus.outbox.retry import RetryPolicy
from mailbus.outbox.sender import OutboxSender, wrap_transport
from mailbus.outbox.storage import (
    OutboxError,
    OutboxLockedError,
    ReadOnlyStorageError,
    RetryLaterError,
    StorageFullError,
    VanishedError,
)

__all__ = [
    "OutboxError",
    "OutboxLockedError",
    "OutboxSender",
    "ReadOnlyStorageError",
    "RetryLaterError",
    "RetryPolicy",
    "StorageFullError",
    "VanishedError",
    "wrap_transport",
]
