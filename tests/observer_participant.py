"""A client or a server in its own process, on any transport, for the observer tests.

    python tests/observer_participant.py server OPTIONS_JSON
    python tests/observer_participant.py client OPTIONS_JSON CALLS

The server answers `obs/echo` until its stdin closes. The client makes CALLS calls one
after the other and prints `answered N` (each call waits up to 20 s)."""

from __future__ import annotations

import json
import sys
import threading

import mailbus
from mailbus.options import options_from_mapping

SERVICE = "obs/echo"


def serve(options: dict[str, object]) -> int:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with mailbus.Context(options_from_mapping(options, {})) as ctx:
        server = ctx.server(SERVICE)
        print("ready", flush=True)
        while not stop.is_set():
            request = mailbus.wait_for_request(server, 0.05)
            if request is not None:
                server.send_response(request, f"echo: {request.body}")
    return 0


def call(options: dict[str, object], calls: int) -> int:
    answered = 0
    with mailbus.Context(options_from_mapping(options, {})) as ctx:
        client = ctx.client(SERVICE)
        for n in range(calls):
            response = client.call(f"call {n}", 20.0)
            answered += response.body == f"echo: call {n}"
    print(f"answered {answered}", flush=True)
    return 0


if __name__ == "__main__":
    role, raw = sys.argv[1], json.loads(sys.argv[2])
    sys.exit(serve(raw) if role == "server" else call(raw, int(sys.argv[3])))
