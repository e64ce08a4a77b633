"""One Mailbus participant in its own process, for the multi-process tests.

    python participant.py ROLE CONFIG.toml NAME COUNT [TIMEOUT_S]

The options come from CONFIG.toml, the password from MAILBUS_PASSWORD (as a user
would run it). It prints `READY` once its context is initialised (so the receiver is
at the inbox's UIDNEXT), then one JSON line with what it did, and exits 0; on a
timeout it still prints what it has and exits 3.

Roles: publish, subscribe (topic NAME); serve, call (service NAME); observe (every
email: pairs each request's Message-ID with the response's In-Reply-To).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import mailbus
from mailbus.options import load_options
from mailbus.trace import Kind, TraceEvent


def main() -> int:
    role, config, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
    deadline = time.monotonic() + timeout
    seen: list[dict[str, str]] = []
    lock = threading.Lock()
    enough = threading.Event()

    def observe(event: TraceEvent) -> None:
        if event.kind != Kind.RECEIVED:
            return
        with lock:
            seen.append(
                {"kind": event.detail, "id": event.message_id, "reply_to": event.in_reply_to}
            )
            requests = sum(1 for s in seen if s["kind"] == "request")
            responses = sum(1 for s in seen if s["kind"] == "response")
            if requests >= count and responses >= count:
                enough.set()

    ctx = mailbus.Context(load_options(config))
    if role == "observe":
        ctx.tracer.add_listener(observe)
    # Made before init(): a receiver catching up (start-uid) delivers the backlog as soon
    # as init() starts it, and a topic with no subscription yet would drop it.
    sub = ctx.subscription(name, depth=count + 10) if role == "subscribe" else None
    with ctx:
        result: dict[str, object] = {"role": role}
        print("READY", flush=True)
        if role == "publish":
            pub = ctx.publisher(name)
            ids = [pub.publish(f"message {i}") for i in range(count)]
            flushed = ctx.transport.sender.flush(max(0.0, deadline - time.monotonic()))  # type: ignore[attr-defined]
            result |= {"ids": ids, "flushed": flushed}
        elif role == "subscribe":
            assert sub is not None
            bodies: list[str] = []
            while len(bodies) < count and time.monotonic() < deadline:
                message = mailbus.wait_for_message(sub, min(1.0, deadline - time.monotonic()))
                if message is not None:
                    bodies.append(message.body)
            result |= {"bodies": bodies}
        elif role == "serve":
            server = ctx.server(name)
            served = 0
            while served < count and time.monotonic() < deadline:
                request = mailbus.wait_for_request(server, min(1.0, deadline - time.monotonic()))
                if request is not None:
                    server.send_response(request, f"echo {request.body}")
                    served += 1
            ctx.transport.sender.flush(max(0.0, deadline - time.monotonic()))  # type: ignore[attr-defined]
            result |= {"served": served}
        elif role == "call":
            client = ctx.client(name)
            answers = []
            for i in range(count):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                answers.append(client.call(f"request {i}", timeout=left).body)
            result |= {"answers": answers}
        elif role == "observe":
            enough.wait(max(0.0, deadline - time.monotonic()))
            with lock:
                result |= {"seen": list(seen)}
        else:
            print(f"unknown role {role}", file=sys.stderr)
            return 2
        result["counters"] = dict(ctx.counters)
        # Judged before shutdown: closing the connections on a loaded machine may take
        # a while and says nothing about whether the role was done in time.
        in_time = time.monotonic() < deadline
    print(json.dumps(result), flush=True)
    return 0 if in_time else 3


if __name__ == "__main__":
    sys.exit(main())
