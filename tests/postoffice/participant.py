"""A participant in its own process for the transport tests: serves `echo` over a
PostOffice daemon until told to stop (a message on topic `control.stop`).

    python -m tests.postoffice.participant PORT BOX
"""

from __future__ import annotations

import sys

import mailbus
from mailbus.options import options_from_mapping


def main(port: int, box: str) -> int:
    options = options_from_mapping(
        {"transport": "postoffice", "postoffice": {"port": port, "box": box}},
        {"MAILBUS_POSTOFFICE_PASSWORD": "participant-pw"},
    )
    # The env mapping above only feeds options_from_mapping; the transport reads
    # os.environ, where the test put the same password.
    with mailbus.Context(options) as ctx:
        server = ctx.server("echo")
        stop = ctx.subscription("control.stop")
        print("ready", flush=True)
        while True:
            request = mailbus.wait_for_request(server, 0.05)
            if request is not None:
                server.send_response(request, f"echo: {request.body}")
            if stop.take() is not None:
                return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2]))
