"""The outbox storage interface: one method per primitive of the queue design.

Each method either succeeds or raises an error. `RetryLaterError` (and its subclass
`StorageFullError`) means the operation did not happen and the stored state is still
consistent: try again later. `VanishedError` means the mail is no longer where the caller
thought it was (purged, or already moved): there is nothing to retry.

A mail has one contents blob and one or more destinations; each destination has its own
metadata and schedule and moves on its own between the states below (the design's
queue, inflight and cleanup, plus two of ours: dead for mail given up on, kept for
inspection, and corrupt for entries set aside because they cannot be read).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from mailbus.errors import MailbusError, TransportError

T = TypeVar("T")


class OutboxError(MailbusError):
    """Base class of the outbox's errors."""


class RetryLaterError(OutboxError, TransportError):
    """The operation failed and changed nothing that matters; it may be retried."""


class StorageFullError(RetryLaterError):
    """The file system holding the outbox is full (or over quota)."""


class ReadOnlyStorageError(RetryLaterError):
    """The file system holding the outbox is read-only (mounted so, or turned so by
    the kernel after an error)."""


class VanishedError(OutboxError):
    """The mail is not (or no longer) in the state the caller named."""


class OutboxLockedError(OutboxError):
    """Another process holds the outbox directory."""


class CorruptEntryError(OutboxError):
    """An entry that cannot be read; `reason` says why."""

    def __init__(self, state: State, name: str, reason: str) -> None:
        super().__init__(f"{state.value}/{name}: {reason}")
        self.state = state
        self.name = name
        self.reason = reason


class State(StrEnum):
    """Where an entry is; the value is the directory that holds its symlink."""

    QUEUED = "queue"
    INFLIGHT = "inflight"
    CLEANUP = "cleanup"
    DEAD = "dead"
    CORRUPT = "corrupt"


@dataclass(frozen=True, slots=True)
class Metadata:
    """What the outbox knows about one destination of a mail (JSON `metadata`)."""

    message_id: str
    sender: str
    recipients: tuple[str, ...]
    subject: str
    size: int
    created_ns: int

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "message_id": self.message_id,
                "sender": self.sender,
                "recipients": list(self.recipients),
                "subject": self.subject,
                "size": self.size,
                "created_ns": self.created_ns,
            },
            ensure_ascii=True,
        ).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> Metadata:
        raw = json_object(data, "metadata")
        recipients = raw.get("recipients")
        if not isinstance(recipients, list) or not all(isinstance(r, str) for r in recipients):
            raise ValueError("metadata: recipients must be a list of strings")
        return cls(
            message_id=_field(raw, "message_id", str),
            sender=_field(raw, "sender", str),
            recipients=tuple(recipients),
            subject=_field(raw, "subject", str),
            size=_field(raw, "size", int),
            created_ns=_field(raw, "created_ns", int),
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """When to try next and what happened so far (JSON `schedule`)."""

    attempts: int = 0
    next_attempt_ns: int = 0
    last_attempt_ns: int = 0
    last_error: str = ""

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "attempts": self.attempts,
                "next_attempt_ns": self.next_attempt_ns,
                "last_attempt_ns": self.last_attempt_ns,
                "last_error": self.last_error,
            },
            ensure_ascii=True,
        ).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> Schedule:
        raw = json_object(data, "schedule")
        return cls(
            attempts=_field(raw, "attempts", int),
            next_attempt_ns=_field(raw, "next_attempt_ns", int),
            last_attempt_ns=_field(raw, "last_attempt_ns", int),
            last_error=_field(raw, "last_error", str),
        )


def json_object(data: bytes, what: str) -> Mapping[str, Any]:
    """The JSON object in `data` (ValueError naming `what` if it is not one)."""
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{what} is not a JSON object")
    return raw


def _field(raw: Mapping[str, Any], key: str, kind: type[T]) -> T:
    value = raw.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"field {key!r} must be {kind.__name__}")
    return value


@dataclass(frozen=True, slots=True)
class Destination:
    """One destination handed to `Enqueuer.commit`."""

    metadata: Metadata
    schedule: Schedule = Schedule()


@dataclass(frozen=True, slots=True)
class Entry:
    """One destination of one mail, in one state. `id` names its symlink."""

    id: str
    mail: str
    dest: str
    state: State
    metadata: Metadata
    schedule: Schedule


@dataclass(frozen=True, slots=True)
class Cleanup:
    """A destination whose removal is pending; its data may already be partly gone."""

    id: str
    mail: str
    dest: str


@dataclass(frozen=True, slots=True)
class Corrupt:
    """An entry that was found unreadable; `name` is its file name in `state`."""

    state: State
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """What a listing found: readable entries and the ones that are corrupt."""

    entries: tuple[Entry, ...]
    corrupt: tuple[Corrupt, ...] = ()


@dataclass(frozen=True, slots=True)
class CleanupListing:
    entries: tuple[Cleanup, ...]
    corrupt: tuple[Corrupt, ...] = ()


class Enqueuer(abc.ABC):
    """A mail being enqueued: write its contents, then commit or abort. Until `commit`
    returns, the mail is not in the queue; a crash before that leaves data that the next
    start-up removes."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Append `data` to the mail's contents."""

    @abc.abstractmethod
    def commit(self, destinations: Sequence[Destination]) -> list[Entry]:
        """Make the mail durable and queue one entry per destination. On error, remove
        everything this enqueue made and raise RetryLaterError / StorageFullError."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Remove everything this enqueue made. Safe to call after a failed commit."""


class Storage(abc.ABC):
    """The primitives of the queue design (plus dead letters and setting aside)."""

    # -- listing what previous runs left ------------------------------------------------
    @abc.abstractmethod
    def list_queue(self) -> Listing:
        """Entries waiting to be sent."""

    @abc.abstractmethod
    def find_inflight(self) -> Listing:
        """Entries a sender had started on."""

    @abc.abstractmethod
    def find_pending_cleanup(self) -> CleanupListing:
        """Entries sent or dropped whose removal did not finish."""

    # -- queuing and reading ------------------------------------------------------------
    @abc.abstractmethod
    def enqueue(self) -> Enqueuer:
        """Start enqueuing a mail."""

    @abc.abstractmethod
    def read_inflight(self, entry: Entry) -> bytes:
        """The contents of an in-flight entry."""

    # -- state changes ------------------------------------------------------------------
    @abc.abstractmethod
    def reschedule(self, entry: Entry, schedule: Schedule) -> Entry:
        """Replace the schedule of a queued, in-flight or dead entry."""

    @abc.abstractmethod
    def send_start(self, entry: Entry) -> Entry:
        """queue -> inflight."""

    @abc.abstractmethod
    def send_done(self, entry: Entry) -> Cleanup:
        """inflight -> cleanup, after a successful send."""

    @abc.abstractmethod
    def send_cancel(self, entry: Entry) -> Entry:
        """inflight -> queue, after a failed send."""

    @abc.abstractmethod
    def drop(self, entry: Entry) -> Cleanup:
        """Give up on an entry in any state (queue, inflight, dead) -> cleanup."""

    @abc.abstractmethod
    def cleanup(self, entry: Cleanup) -> None:
        """Remove the entry's data, the mail when no destination is left, then its link."""

    # -- beyond the design ------------------------------------------------------------
    @abc.abstractmethod
    def dead_letter(self, entry: Entry) -> Entry:
        """inflight -> dead: given up on, kept for inspection."""

    @abc.abstractmethod
    def list_dead(self) -> Listing:
        """Entries given up on."""

    @abc.abstractmethod
    def revive(self, entry: Entry) -> Entry:
        """dead -> queue (retry)."""

    @abc.abstractmethod
    def set_aside(self, corrupt: Corrupt) -> None:
        """Move an unreadable entry out of the way (to the corrupt state)."""

    @abc.abstractmethod
    def replay_journal(self) -> int:
        """Bring the stored state in line with the write-ahead journal after a power
        cut; how many entries were put back. Call first at start-up, under the lock."""

    @abc.abstractmethod
    def checkpoint(self) -> None:
        """Make what the journal covers durable without it, and empty it. Call under
        the lock (after recovery, and before releasing it)."""

    @abc.abstractmethod
    def remove_uncommitted(self) -> list[str]:
        """Remove data no entry refers to (enqueues that never committed, leftovers of
        an interrupted cleanup, temporary files). Returns the mail ids removed. Only
        safe when no enqueue is in progress: call it at start-up, under the lock."""
