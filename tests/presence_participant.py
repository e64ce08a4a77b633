"""A participant that announces itself, in its own process, for the participants tests:

    python tests/presence_participant.py OPTIONS_JSON

It serves `prs/echo` from a named wait set (`worker/loop`) and prints `ready`; it shuts
down (saying goodbye) when its stdin closes."""

from __future__ import annotations

import json
import sys
import threading

import mailbus
from mailbus.options import options_from_mapping


def main(raw: dict[str, object]) -> int:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with mailbus.Context(options_from_mapping(raw, {})) as ctx:
        server = ctx.server("prs/echo")
        wait_set = ctx.wait_set("worker/loop")
        wait_set.add_server(server)
        print("ready", flush=True)
        while not stop.is_set():
            if wait_set.wait(0.05):
                request = server.take_request()
                if request is not None:
                    server.send_response(request, request.body)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
