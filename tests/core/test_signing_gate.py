"""The replay guard (age window, bounded seen-set, state dir) and the engine's receive
path with a signature gate: what require-signature keeps out, and what it lets through
with its status."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mailbus import headers as H
from mailbus.email_message import to_bytes
from mailbus.errors import ConfigError
from mailbus.options import options_from_mapping
from mailbus.polling import PollingManager
from mailbus.signing.gate import SignatureGate
from mailbus.signing.keys import PrivateKey, new_ed25519_key
from mailbus.signing.replay import LOG_NAME, ReplayGuard
from mailbus.trace import Kind, TraceEvent, Tracer
from mailbus.transport import EmailReceiver, Inbound, RawEmail
from test_signing import NAME, mailbus_email, signed


@pytest.fixture(scope="module")
def ed_key() -> tuple[PrivateKey, str]:
    return new_ed25519_key()


# -- replay guard -------------------------------------------------------------------------


def test_replay_guard_age_window_and_seen_ids() -> None:
    guard = ReplayGuard(max_age_s=60, capacity=100)
    now = time.time_ns()
    assert guard.check("<a@x>", now, now) is None
    assert "taken already" in (guard.check("<a@x>", now, now) or "")
    assert "older than max-age-s" in (guard.check("<b@x>", now - 61 * 10**9, now) or "")
    assert "in the future" in (guard.check("<c@x>", now + 61 * 10**9, now) or "")
    assert guard.check("<d@x>", now - 59 * 10**9, now) is None
    assert "cannot be checked" in (guard.check("<é@x>", now, now) or "")


def test_replay_guard_is_bounded() -> None:
    guard = ReplayGuard(max_age_s=600, capacity=50)
    now = time.time_ns()
    refused = [guard.check(f"<{i}@x>", now, now) for i in range(500)]
    assert refused[:50] == [None] * 50
    assert all(r is not None and r.startswith("replay window full") for r in refused[50:])
    assert len(guard) == 50
    # Entries that left the window are forgotten first, even below capacity.
    guard = ReplayGuard(max_age_s=10, capacity=1000)
    for i in range(20):
        guard.check(f"<old{i}@x>", now, now)
    guard.check("<new@x>", now + 11 * 10**9, now + 11 * 10**9)
    assert len(guard) == 1


def test_replay_guard_state_survives_a_restart_and_is_locked(tmp_path: Path) -> None:
    now = time.time_ns()
    first = ReplayGuard(max_age_s=600, capacity=100, state_dir=tmp_path / "state")
    assert first.check("<a@x>", now) is None
    with pytest.raises(ConfigError, match="in use by another process"):
        ReplayGuard(max_age_s=600, capacity=100, state_dir=tmp_path / "state")
    first.close()  # a crash releases the lock the same way: the file closes
    # A torn line (crash mid-write) and an expired entry are dropped on load.
    with open(tmp_path / "state" / LOG_NAME, "a") as log:
        log.write(f"{now - 10**12} <old@x>\n17 <torn")
    second = ReplayGuard(max_age_s=600, capacity=100, state_dir=tmp_path / "state")
    assert "taken already" in (second.check("<a@x>", now) or "")
    assert second.skipped_lines == 1 and len(second) == 1
    assert second.check("<b@x>", now) is None
    second.close()
    assert (tmp_path / "state" / LOG_NAME).read_text().splitlines()[-1] == f"{now} <b@x>"


# -- the receive path ---------------------------------------------------------------------


class ListReceiver(EmailReceiver):
    """Hands the polling manager what a test puts in, like a transport would."""

    def __init__(self) -> None:
        self.items: list[Inbound] = []
        self._cond = threading.Condition()

    def put(self, item: Inbound) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def receive(self, timeout: float | None) -> list[Inbound]:
        with self._cond:
            if not self.items:
                self._cond.wait(timeout)
            taken, self.items = self.items, []
            return taken

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


def dispatcher(
    gate: SignatureGate,
) -> tuple[Callable[[Inbound], None], list[Any], list[TraceEvent], dict[str, int]]:
    tracer = Tracer()
    events: list[TraceEvent] = []
    tracer.add_listener(events.append)
    delivered: list[Any] = []
    counts: dict[str, int] = {}

    def count(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    def handler(envelope: Any) -> int:
        delivered.append(envelope)
        return 1

    manager = PollingManager(ListReceiver(), [handler], tracer, count, 0.01, gate=gate)
    return manager.dispatch, delivered, events, counts


def test_require_signature_keeps_unsigned_forged_and_replayed_mail_out(
    tmp_path: Path, ed_key: Any
) -> None:
    key, record = ed_key
    options = options_from_mapping(
        {
            "signing": {
                "require-signature": True,
                "keyring": {NAME: record},
                "state-dir": str(tmp_path / "state"),
            }
        }
    )
    gate = SignatureGate.from_sections(options.sections)
    assert gate is not None
    dispatch, delivered, events, counts = dispatcher(gate)
    _, good = signed(key)
    forger, _ = new_ed25519_key()
    _, forged = signed(forger)
    dispatch(RawEmail(to_bytes(mailbus_email()), origin="uid:1"))
    dispatch(RawEmail(forged, origin="uid:2"))
    dispatch(RawEmail(good, origin="uid:3"))
    dispatch(RawEmail(b"Received: by relay\r\n" + good, origin="uid:4"))  # the same again
    stale = mailbus_email()
    stale.headers = {**stale.headers, H.SOURCE_TIMESTAMP: str(time.time_ns() - 3600 * 10**9)}
    dispatch(RawEmail(signed(key, stale)[1], origin="uid:5"))
    assert len(delivered) == 1
    # The copy is caught by the engine's in-memory duplicate check first.
    assert counts == {
        "unsigned": 1,
        "bad_signature": 1,
        "received": 1,
        "duplicates": 1,
        "replayed": 1,
    }
    skipped = [e for e in events if e.kind == Kind.SKIPPED and e.extra]
    assert [(e.extra["origin"], e.extra["reason"]) for e in skipped] == [
        ("uid:1", "unsigned"),
        ("uid:2", "bad_signature"),
        ("uid:5", "replayed"),
    ]
    assert skipped[0].detail == "unsigned: the email has no DKIM signature"
    assert "does not verify" in skipped[1].detail
    assert "older than max-age-s" in skipped[2].detail
    received = [e for e in events if e.kind == Kind.RECEIVED]
    assert [e.extra["signature"] for e in received] == ["verified"]
    gate.close()
    # After a restart the in-memory check is empty: the state dir remembers.
    gate = SignatureGate.from_sections(options.sections)
    assert gate is not None
    dispatch, delivered, events, counts = dispatcher(gate)
    dispatch(RawEmail(good, origin="uid:4"))
    assert delivered == [] and counts == {"replayed": 1}
    [event] = [e for e in events if e.kind == Kind.SKIPPED]
    assert "was taken already" in event.detail
    gate.close()


def test_without_require_mixed_mail_is_taken_with_its_status(ed_key: Any) -> None:
    key, record = ed_key
    gate = SignatureGate.from_sections(
        options_from_mapping({"signing": {"keyring": {NAME: record}}}).sections
    )
    assert gate is not None and gate.replay is None
    dispatch, delivered, events, _ = dispatcher(gate)
    _, good = signed(key)
    dispatch(RawEmail(to_bytes(mailbus_email()), origin="uid:1"))
    dispatch(RawEmail(good, origin="uid:2"))
    _, other = signed(key)  # its own Message-ID: a copy would be dropped as a duplicate
    dispatch(RawEmail(other.replace(b'celsius": 21', b'celsius": 99'), origin="uid:3"))
    assert len(delivered) == 3
    statuses = [e.extra["signature"] for e in events if e.kind == Kind.RECEIVED]
    assert statuses == ["unsigned", "verified", "failed: body hash mismatch (the body was changed)"]
