"""Per-recipient refusals: the sans-IO reader of libcurl's protocol trace and the
decision taken from it (no servers)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mailbus.mail.outcome import Outcome, settle
from mailbus.mail.rcpt import RcptReply, RcptTracker
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.trace import Tracer
from test_integration import Events
from test_sender import email_to

SECRET_B64 = b"AHJvYm90AGh1bnRlcjI="  # "\0robot\0hunter2"

# What libcurl's debug callback shows of one transaction: (out?, bytes).
TRANSCRIPT: list[tuple[bool, bytes]] = [
    (False, b"220 mx ESMTP\r\n"),
    (True, b"EHLO vm\r\n"),
    (False, b"250-mx\r\n"),
    (False, b"250-AUTH PLAIN LOGIN\r\n"),
    (False, b"250 CHUNKING\r\n"),
    (True, b"AUTH PLAIN\r\n"),
    (False, b"334 \r\n"),
    (True, SECRET_B64 + b"\r\n"),
    (False, b"235 2.7.0 Authentication successful\r\n"),
    (True, b"MAIL FROM:<me@mailbus.test> SIZE=21\r\n"),
    (False, b"250 2.1.0 Ok\r\n"),
    (True, b"RCPT TO:<a@mailbus.test>\r\n"),
    (False, b"250 2.1.5 Ok\r\n"),
    (True, b"RCPT TO:<rejected@mailbus.test>\r\n"),
    (False, b"550-5.1.1 first line\r\n"),
    (False, b"550 5.1.1 <rejected@mailbus.test>: no such user\r\n"),
    (True, b"rcpt to:<deferred@mailbus.test> NOTIFY=NEVER\r\n"),
    (False, b"450 4.2.1 try again later\r\n"),
    (True, b"DATA\r\n"),
    (False, b"354 End data\r\n"),
    (False, b"250 2.0.0 Ok: queued\r\n"),
]
EXPECTED = [
    RcptReply(0, "a@mailbus.test", 250, "2.1.5 Ok"),
    RcptReply(1, "rejected@mailbus.test", 550, "5.1.1 <rejected@mailbus.test>: no such user"),
    RcptReply(2, "deferred@mailbus.test", 450, "4.2.1 try again later"),
]


def feed(tracker: RcptTracker, transcript: list[tuple[bool, bytes]]) -> None:
    for out, data in transcript:
        (tracker.sent if out else tracker.received)(data)


def test_each_rcpt_is_paired_with_its_final_reply() -> None:
    tracker = RcptTracker()
    feed(tracker, TRANSCRIPT)
    assert tracker.replies == EXPECTED
    assert [r.address for r in tracker.refused] == [
        "rejected@mailbus.test",
        "deferred@mailbus.test",
    ]
    assert [r.permanent for r in tracker.refused] == [True, False]
    tracker.reset()
    assert tracker.replies == [] and tracker.refused == []


def test_the_auth_exchange_is_never_kept() -> None:
    tracker = RcptTracker()
    feed(tracker, TRANSCRIPT)
    kept = repr(tracker.replies) + repr(vars(tracker) if hasattr(tracker, "__dict__") else "")
    assert SECRET_B64.decode() not in kept and "hunter2" not in kept


def test_replies_without_a_pending_rcpt_and_garbage_are_ignored() -> None:
    tracker = RcptTracker()
    feed(
        tracker,
        [
            (False, b"550 unsolicited\r\n"),
            (True, b"RCPT TO:<x@y.z>\r\n"),
            (False, b"garbage\r\n"),
            (False, b"25\r\n"),
            (False, b"2x0 nope\r\n"),
            (False, b"421 4.4.2 bye\r\n"),
            (False, b"250 late\r\n"),
        ],
    )
    assert tracker.replies == [RcptReply(0, "x@y.z", 421, "4.4.2 bye")]


def test_an_endless_line_is_cut_not_kept_whole() -> None:
    tracker = RcptTracker()
    tracker.sent(b"RCPT TO:<x@y.z>\r\n")
    tracker.received(b"550 " + b"x" * 100_000)
    tracker.received(b"\r\n")
    [reply] = tracker.replies
    assert reply.code == 550 and len(reply.text) < 5000
    tracker.sent(b"y" * 100_000)  # no newline: forgotten, not buffered for ever
    assert len(tracker._out) == 0


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60))
def test_any_chunking_of_the_trace_gives_the_same_replies(cuts: list[int]) -> None:
    """libcurl may hand lines over in pieces: the result must not depend on it."""
    tracker = RcptTracker()
    for out, data in TRANSCRIPT:
        pos = 0
        for size in cuts:
            if pos >= len(data):
                break
            (tracker.sent if out else tracker.received)(data[pos : pos + size])
            pos += size
        if pos < len(data):
            (tracker.sent if out else tracker.received)(data[pos:])
    assert tracker.replies == EXPECTED


# -- the decision -------------------------------------------------------------------------

A, R, D = "a@mailbus.test", "rejected@mailbus.test", "deferred@mailbus.test"


def reply(index: int, address: str, code: int) -> RcptReply:
    return RcptReply(index, address, code, "text")


def test_delivered_to_all_is_done() -> None:
    outcome = settle((A,), None, [reply(0, A, 250)])
    assert outcome == Outcome(done=True, delivered=True)


def test_one_refused_recipient_does_not_stop_the_others() -> None:
    outcome = settle((A, R), None, [reply(0, A, 250), reply(1, R, 550)])
    assert outcome.done and outcome.delivered and outcome.failure is None
    assert [r.address for r in outcome.rejected] == [R]


def test_a_deferred_recipient_is_retried_alone() -> None:
    outcome = settle((A, R, D), None, [reply(0, A, 250), reply(1, R, 550), reply(2, D, 450)])
    assert not outcome.done and outcome.delivered
    assert outcome.retry == (D,) and [r.address for r in outcome.rejected] == [R]
    assert outcome.failure is not None and outcome.failure[1] == 450 and D in outcome.failure[2]


def test_every_recipient_refused_for_good_is_a_rejection() -> None:
    failure = (55, 550, "RCPT failed: 550")
    outcome = settle((R, R.upper()), failure, [reply(0, R, 550), reply(1, R.upper(), 550)])
    assert outcome.done and not outcome.delivered and len(outcome.rejected) == 2


def test_a_failure_elsewhere_retries_all_but_the_rejected() -> None:
    lost = (56, 0, "connection reset")
    outcome = settle((A, R, D), lost, [reply(0, A, 250), reply(1, R, 550)])
    assert not outcome.done and outcome.failure == lost and outcome.retry == (A, D)
    down = settle((A,), (7, 0, "could not connect"), [])
    assert not down.done and down.retry == (A,)


def test_replies_are_named_by_position_as_the_caller_spelled_them() -> None:
    # libcurl may rewrite an address (IDN); the caller's spelling names it.
    outcome = settle(("x@Mailbus.Test", A), None, [reply(0, "x@mailbus.test", 550)])
    assert [r.address for r in outcome.rejected] == ["x@Mailbus.Test"]


# -- the sender's bookkeeping across attempts (transactions scripted, no server) ----------


def test_a_recipient_deferred_then_rejected_is_reported_with_the_earlier_delivery() -> None:
    tracer = Tracer()
    events = Events()
    tracer.add_listener(events)
    sender = SmtpSender(SmtpSettings("smtps://127.0.0.1:1", "me@mailbus.test", "pw"), tracer)
    script = [
        (None, [reply(0, A, 250), reply(1, D, 450)]),  # A gets it, D later
        ((55, 550, "RCPT failed: 550"), [reply(0, D, 550)]),  # D refused for good
    ]
    seen: list[tuple[str, ...]] = []

    def transfer(item):  # type: ignore[no-untyped-def]
        seen.append(item.recipients)
        item.attempts += 1
        return script[len(seen) - 1]

    sender._transfer = transfer  # type: ignore[method-assign]
    item = sender._outgoing(email_to(A, D))
    assert sender._attempt(item) is not None  # a delay: D is retried
    assert sender._attempt(item) is None  # done: D refused for good
    assert seen == [(A, D), (D,)]
    [failed] = events.of("mail.send_failed")
    assert failed.extra["recipients"] == [D] and failed.extra["smtp_code"] == 450
    [rejected] = events.of("mail.send_rejected")
    assert rejected.extra["recipients"] == [D] and rejected.extra["attempt"] == 2
    assert rejected.extra["delivered_to_others"] is True
    assert "the other recipients got it" in str(rejected.detail)
    sender.close(timeout=0)
