"""One of two processes started together on one outbox directory (test_outbox_lock.py):
waits for the outbox lock, enqueues its own mails, delivers everything it finds, and
prints what it did as JSON."""

from __future__ import annotations

import json
import sys

from mailbus.outbox import OutboxSender
from outbox_support import SmtplibSender, make_email


def main() -> int:
    directory, port, name, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    inner = SmtplibSender(port)
    sender = OutboxSender(inner, directory, lock_timeout=60.0)
    for i in range(count):
        sender.send(make_email(i, message_id=f"<{name}.{i}@lock.test>"))
    idle = sender.wait_idle(30.0)
    sender.close()
    print(json.dumps({"idle": idle, "sent": inner.sent, "recovered": sender.recovery.queued}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
