"""A running sender for test_outbox_control.py: an OutboxSender whose inner sender fails
while the file `down` exists, with the first retry 600 s away. It enqueues `count` mails,
prints one JSON line per delivery attempt (from the delivery thread) and the ids it
queued, then runs until its stdin closes.

    outbox_control_child.py DIR DOWN COUNT MAX_ATTEMPTS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mailbus.email_message import Email
from mailbus.errors import TransportError
from mailbus.outbox import OutboxSender, RetryPolicy
from mailbus.transport import EmailSender
from outbox_support import make_email


class Flaky(EmailSender):
    def __init__(self, down: Path) -> None:
        self.down = down

    def deliver(self, email: Email) -> None:
        ok = not self.down.exists()
        print(json.dumps({"attempt": email.message_id, "ok": ok}), flush=True)
        if not ok:
            raise TransportError("server down (test)")


def main() -> int:
    directory, down, count, max_attempts = sys.argv[1:5]
    policy = RetryPolicy(
        first_delay_s=600.0, max_delay_s=600.0, jitter=0.0, max_attempts=int(max_attempts)
    )
    sender = OutboxSender(Flaky(Path(down)), directory, policy=policy)
    for i in range(int(count)):
        sender.send(make_email(i, message_id=f"<ctl.{i}@control.test>"))
    idle = sender.wait_idle(30.0)
    storage = sender.storage
    entries = [*storage.list_queue().entries, *storage.list_dead().entries]
    print(
        json.dumps({"ready": idle, "ids": {e.id: e.metadata.message_id for e in entries}}),
        flush=True,
    )
    sys.stdin.read()
    sender.close()
    print(json.dumps({"closed": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
