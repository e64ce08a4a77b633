"""A participant of the Foxglove tests, in a process of its own on the system that
MAILBUS_CONFIG_FILE names:

    python tests/foxglove/numbered_participant.py

Until it is told to go it publishes a `ready` message on each of its topics now and
then, so that they exist for a client to subscribe to. Each message on `lab/go` (a
JSON object: `run`, `count`, `pad`; published by a Foxglove client or a test) is
printed as `go <body>`, then answered with `count` numbered messages on each topic:
`lab/numbers` ({"seq": n, "pad": ...}), `lab/text` ("line n") and `lab/list` ([n, 2n],
not an object: it travels in the `{"text": ...}` wrapper), and `published <run>`.
It stops (saying goodbye) on SIGTERM."""

from __future__ import annotations

import json
import signal
import sys
import threading

import mailbus

READY_PERIOD_S = 0.3


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with mailbus.Context() as ctx:
        numbers = ctx.publisher("lab/numbers")
        text = ctx.publisher("lab/text")
        listed = ctx.publisher("lab/list")
        go = ctx.subscription("lab/go", depth=100)
        wait_set = ctx.wait_set("numbered/loop")
        wait_set.add_subscription(go)
        print("ready", flush=True)
        while not stop.is_set():
            if not wait_set.wait(READY_PERIOD_S):  # the ready messages' period
                numbers.publish(json.dumps({"seq": 0, "pad": "", "ready": True}))
                text.publish("ready")
                listed.publish('["ready"]')
                continue
            while (message := go.take()) is not None:
                print(f"go {message.body}", flush=True)
                order = json.loads(message.body)
                pad = "x" * int(order.get("pad", 0))
                for n in range(1, int(order.get("count", 100)) + 1):
                    numbers.publish(json.dumps({"seq": n, "pad": pad}))
                    text.publish(f"line {n}")
                    listed.publish(json.dumps([n, 2 * n]))
                print(f"published {order.get('run')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
