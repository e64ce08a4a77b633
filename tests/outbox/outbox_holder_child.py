"""Holds an outbox's lock the way a sender does, saying it serves control requests, but
never answers one: `silent` does not look at them, `claim` claims each (as a sender
about to apply it) and stops there, `claim-exit` claims one and exits (as a sender
dying while applying it). Prints `held`, then runs until stdin closes.

    outbox_holder_child.py DIR silent|claim|claim-exit
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from mailbus.outbox import control
from mailbus.outbox.lock import OutboxLock


def main() -> int:
    root, mode = Path(sys.argv[1]), sys.argv[2]
    lock = OutboxLock(root / "lock")
    lock.acquire(10.0)
    lock.set_note(control.SERVES_CONTROL)
    print("held", flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    while not done.wait(0.02):
        if mode in ("claim", "claim-exit"):
            for incoming in control.scan(root):
                print(json.dumps({"claimed": incoming.request_id}), flush=True)
                if mode == "claim-exit":
                    return 0  # the kernel drops the lock
    lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
