"""What the engine asks on receipt: is this email's signature good, may it be taken?

Built from the `[signing]` options. Verifies every email that arrived as bytes (the
in-process transport hands over objects that never left the process: nothing to check),
and, with `require-signature = true`, refuses what is unsigned, badly signed or replayed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import dkim

from mailbus.email_message import Email
from mailbus.errors import ConfigError
from mailbus.signing.config import SigningConfig, signing_config
from mailbus.signing.keys import load_private_key
from mailbus.signing.replay import WINDOW_FULL, ReplayGuard
from mailbus.signing.sign import Signer
from mailbus.signing.verify import UNSIGNED, Verdict, Verifier


def check_keyring(keyring: Mapping[str, str]) -> None:
    """Every record must be a key dkimpy can use; ConfigError naming the entry if not."""
    for name, record in keyring.items():
        try:
            dkim.evaluate_pk(name.encode("ascii"), record.encode("ascii"))
        except (dkim.DKIMException, ValueError, TypeError, IndexError) as exc:
            raise ConfigError(f"signing.keyring.{name}", f"not a usable DKIM key: {exc}") from None


def signer_from_sections(
    sections: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> Signer | None:
    """The signer the options' tables (`Options.sections`) configure, or None: the private
    key is read and checked here (at init), so a bad key is a ConfigError before anything
    is sent. The tables, not the `Options`: the options module reads `[signing]` through
    this package, which therefore sits below it."""
    config = signing_config(sections)
    if config is None or not config.signs:
        return None
    return Signer(load_private_key(config, environ), config.selector, config.domain)


class SignatureGate:
    def __init__(self, config: SigningConfig) -> None:
        check_keyring(config.keyring)
        self.config = config
        self.require = config.require_signature
        self.verifier = Verifier(config.keyring)
        self.replay: ReplayGuard | None = None
        if self.require:
            self.replay = ReplayGuard(
                config.max_age_s, config.seen_capacity, config.state_dir or None
            )

    @classmethod
    def from_sections(cls, sections: Mapping[str, Any]) -> SignatureGate | None:
        config = signing_config(sections)
        if config is None or not config.verifies:
            return None
        return cls(config)

    def verify(self, email: Email) -> Verdict | None:
        """The verdict on `email`, or None when it never travelled as bytes."""
        if email.raw is None:
            return None
        return self.verifier.verify(email.raw, email.fields)

    def refusal(self, verdict: Verdict | None) -> tuple[str, str] | None:
        """(counter, reason) when `verdict` keeps the email out, else None."""
        if not self.require or verdict is None or verdict.verified:
            return None
        if verdict.status == UNSIGNED:
            return "unsigned", "unsigned: the email has no DKIM signature"
        return "bad_signature", f"bad signature: {verdict.status.removeprefix('failed: ')}"

    def replayed(self, message_id: str, sent_ns: int) -> tuple[str, str] | None:
        """(counter, reason) when a verified email may not be taken again, or None (it is
        then remembered). A full replay window is counted apart from a replay."""
        if self.replay is None:
            return None
        reason = self.replay.check(message_id, sent_ns)
        if reason is None:
            return None
        return ("replay_window_full" if reason.startswith(WINDOW_FULL) else "replayed"), reason

    def close(self) -> None:
        if self.replay is not None:
            self.replay.close()

    @staticmethod
    def trusted(email: Email, verdict: Verdict) -> Email:
        """`email` with only the headers its signature covers: what a relay added (Received,
        Delivered-To) or anyone else inserted is not passed on as if it were signed."""
        headers = email.headers
        if all(name.lower() in verdict.signed_headers for name in headers):
            return email
        signed = verdict.signed_headers
        kept = {name: value for name, value in headers.items() if name.lower() in signed}
        return dataclasses.replace(email, headers=kept)
