"""What one SMTP attempt means for each recipient of an email: delivered, refused for
good, or to try again (sans-IO: decided from the transaction's result and its RCPT
replies)."""

from __future__ import annotations

from dataclasses import dataclass

from mailbus.mail.rcpt import RcptReply


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one attempt at an email (sans-IO: see `settle`)."""

    done: bool  # nothing more to send: delivered, or refused for good
    failure: tuple[int, int, str] | None = None  # (curl code, SMTP code, message) to report
    rejected: tuple[RcptReply, ...] = ()  # recipients refused for good (5xx)
    retry: tuple[str, ...] = ()  # recipients to try again (4xx, or the whole email)
    delivered: bool = False  # the server took the email for some recipient


def settle(
    recipients: tuple[str, ...], failure: tuple[int, int, str] | None, replies: list[RcptReply]
) -> Outcome:
    """Decide from one transaction's result and its RCPT replies."""
    refused = [r for r in replies if r.refused]
    by_index = [
        RcptReply(r.index, recipients[r.index], r.code, r.text) if r.index < len(recipients) else r
        for r in refused
    ]
    rejected = tuple(r for r in by_index if r.permanent)
    deferred = tuple(r.address for r in by_index if not r.permanent)
    every_rcpt_refused = len(replies) == len(recipients) and len(refused) == len(recipients)
    if failure is None or every_rcpt_refused:
        # Delivered to the accepted recipients, or the transaction ended at RCPT: each
        # recipient has its own answer; the deferred ones are tried again.
        return Outcome(
            done=not deferred,
            failure=None if not deferred else _deferred_failure(by_index),
            rejected=rejected,
            retry=deferred,
            delivered=failure is None,
        )
    # It failed elsewhere (connection, TLS, MAIL FROM, DATA): the whole email, less
    # the recipients refused for good, is in question.
    refused_for_good = {x.address for x in rejected}
    rest = tuple(r for r in recipients if r not in refused_for_good)
    if not rest:
        return Outcome(done=True, rejected=rejected)
    return Outcome(done=False, failure=failure, rejected=rejected, retry=rest)


def _deferred_failure(refused: list[RcptReply]) -> tuple[int, int, str]:
    first = next(r for r in refused if not r.permanent)
    names = ", ".join(r.address for r in refused if not r.permanent)
    return (0, first.code, f"recipients deferred ({first.code} {first.text}): {names}")
