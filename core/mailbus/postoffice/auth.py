"""Password checks under load: scrypt on a bounded pool of its own, and the wrong passwords
remembered per peer host (for the back-off that slows guessing)."""

from __future__ import annotations

import asyncio
import enum
import hmac
import logging
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from mailbus.postoffice import store as st
from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.kinds import PostOfficeKind

if TYPE_CHECKING:
    from mailbus.postoffice.mailbox import Box

log = logging.getLogger(__name__)
T = TypeVar("T")


MAX_FAILING_PEERS = 10_000  # peer hosts whose wrong passwords are remembered


@dataclass(slots=True)
class PeerFailures:
    """Wrong passwords from one peer host (all its connections, all boxes)."""

    count: int = 0
    last: float = 0.0  # loop time of the last one
    waiting: int = 0  # its connections waiting out a back-off now
    until: float = 0.0  # loop time its back-off ends: no password is hashed before


class HashPoolFull(Exception):
    """The scrypt threads and their queue are all taken."""


class HashPool:
    """scrypt on threads of its own, with a bounded queue: beyond `workers + queue` jobs
    in hand, `run` refuses at once (HashPoolFull) rather than queue without limit."""

    def __init__(self, workers: int, queue: int) -> None:
        self.executor = ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="postoffice-scrypt"
        )
        self.limit = max(1, workers) + max(0, queue)
        self.in_hand = 0  # jobs running or queued (only touched on the loop)
        self.refused = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        if self.in_hand >= self.limit:
            self.refused += 1
            raise HashPoolFull
        self.in_hand += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        finally:
            self.in_hand -= 1

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class Verdict(enum.Enum):
    """What a password check tells the clerk to do."""

    GRANTED = "granted"
    REFUSED = "refused"  # answer NOAUTH
    CLOSE = "close"  # answer NOAUTH and close the connection
    GONE = "gone"  # the connection went away while it waited: answer nothing


class Gatekeeper:
    """Checks passwords for the whole daemon: the scrypt pool, the memo of digests found
    right, and the wrong passwords of each peer host (for the back-off)."""

    def __init__(self, config: ServerConfig, trace: Callable[..., None]) -> None:
        self.config = config
        self.trace = trace
        queue = config.max_connections if config.hash_queue is None else config.hash_queue
        self.hasher = HashPool(config.hash_workers, queue)
        self._memo_key = secrets.token_bytes(32)  # this process only, never stored
        # Wrong passwords by peer host, oldest first; bounded (MAX_FAILING_PEERS).
        self.failures: dict[str, PeerFailures] = {}

    def memo(self, box: Box, digest: bytes) -> bytes:
        """A keyed fast hash of a digest found right for `box` (in memory only, with a key
        that dies with the process): a later check-out with the same password is
        recognised without scrypt, so it is granted at once even while its host is in
        back-off, and wrong guesses cannot lock out an owner already seen."""
        return hmac.digest(self._memo_key, box.secret.encode() + b"\0" + digest, "sha256")

    def failed(self, host: str, now: float) -> PeerFailures:
        """Count a wrong password from `host`; its record, the count included."""
        forget_s = self.config.auth_forget_s
        failures = self.failures.pop(host, None)
        if failures is None or (failures.waiting == 0 and now - failures.last >= forget_s):
            failures = PeerFailures()
        failures.count += 1
        failures.last = now
        self.failures[host] = failures  # re-inserted: the dict stays oldest first
        # Forget hosts quiet for long, and the oldest beyond the bound (oldest first, so
        # this stops at the first one to keep).
        while True:
            oldest = next(iter(self.failures))
            record = self.failures[oldest]
            stale = record.waiting == 0 and now - record.last >= forget_s
            if record is failures or (not stale and len(self.failures) <= MAX_FAILING_PEERS):
                break
            del self.failures[oldest]
        return failures

    async def verify(
        self, box: Box, digest: bytes, host: str, peer: str, gone: Callable[[], bool]
    ) -> Verdict:
        """Check a password, hashing as little as a flood allows.

        - A digest found right before (`memo`) is granted at once, without scrypt and
          whatever failed before: guessing cannot lock out a known owner.
        - Otherwise nothing is hashed while the peer's host is in back-off (after a
          wrong password, a wait that doubles with the host's recent failures, across
          its connections and boxes so reconnecting does not reset it): the attempt
          waits until the back-off ends, then is checked. A host with
          `auth_max_waiting` connections waiting already has the next one answered
          NOAUTH and closed at once, without hashing: its waits and hashes are bounded.
        - scrypt runs on `HashPool`; when its queue is full the attempt is answered
          NOAUTH at once, without hashing.
        - A wrong password is answered NOAUTH after the back-off it starts (less what
          the attempt already waited)."""
        config, loop = self.config, asyncio.get_running_loop()
        memo = self.memo(box, digest)
        if box.known and hmac.compare_digest(box.known, memo):
            return Verdict.GRANTED
        started = loop.time()
        failures = self.failures.get(host)
        if failures is not None and started < failures.until:
            if failures.waiting >= config.auth_max_waiting:
                self._refuse_unhashed(box, peer, "too many attempts waiting, closing")
                return Verdict.CLOSE
            await self._sit_out(failures, failures.until - started)
            if gone():
                return Verdict.GONE  # nothing to check
        try:
            ok = await self.hasher.run(st.verify_digest, digest, box.secret)
        except HashPoolFull:
            self._refuse_unhashed(box, peer, "password checks busy")
            return Verdict.REFUSED
        if ok:
            box.known = memo
            return Verdict.GRANTED
        now = loop.time()
        failures = self.failed(host, now)
        backoff = min(
            config.auth_delay_s * 2 ** min(failures.count - 1, 30), config.auth_delay_max_s
        )
        failures.until = max(failures.until, now + backoff)
        crowded = failures.waiting >= config.auth_max_waiting
        self.trace(
            PostOfficeKind.AUTH_FAILED,
            name=box.name,
            detail=f"wrong password from {peer}"
            + ("; too many attempts waiting, closing" if crowded else ""),
            extra={"peer": peer, "failures": failures.count},
        )
        if crowded:
            log.info("%s: wrong password for %s; too many attempts waiting", peer, box.name)
            return Verdict.CLOSE
        delay = backoff - (now - started)  # an attempt that waited before has been slowed
        if delay > 0:
            await self._sit_out(failures, delay)
        return Verdict.REFUSED

    @staticmethod
    async def _sit_out(failures: PeerFailures, seconds: float) -> None:
        """Wait out a back-off, counted among the host's waiting attempts."""
        failures.waiting += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            failures.waiting -= 1

    def _refuse_unhashed(self, box: Box, peer: str, reason: str) -> None:
        """Refused without checking the password (back-off crowded, hashing busy)."""
        log.info("%s: password for %s not checked: %s", peer, box.name, reason)
        self.trace(
            PostOfficeKind.AUTH_REFUSED,
            name=box.name,
            detail=f"password from {peer} not checked: {reason}",
            extra={"peer": peer},
        )
