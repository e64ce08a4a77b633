"""A service and a watcher: `thermo/convert` answers {"celsius": c} with
{"celsius": c, "fahrenheit": f}, and every reading on `sensors/temp` hotter than
HOT_CELSIUS is announced on `alerts/hot`.

Run it alone with `python converter.py`, or let a test start it
(`system.start("converter.py", ready=["server:thermo/convert"])`).
"""

from __future__ import annotations

import json
import signal
import threading

import mailbus

SERVICE = "thermo/convert"
READINGS = "sensors/temp"
ALERTS = "alerts/hot"
HOT_CELSIUS = 28.0


def convert(body: str) -> str:
    try:
        celsius = float(json.loads(body)["celsius"])
    except (ValueError, KeyError, TypeError):
        return json.dumps({"error": 'send {"celsius": number}'})
    return json.dumps({"celsius": celsius, "fahrenheit": round(celsius * 9 / 5 + 32, 2)})


def alert(body: str) -> str | None:
    """The alert for a reading, or None when it is not hot."""
    try:
        doc = json.loads(body)
        celsius = float(doc["celsius"])
    except (ValueError, KeyError, TypeError):
        return None
    if celsius <= HOT_CELSIUS:
        return None
    return json.dumps({"sensor": doc.get("sensor", "?"), "celsius": celsius, "level": "hot"})


def run(context: mailbus.Context, stop: threading.Event) -> None:
    server = context.server(SERVICE)
    readings = context.subscription(READINGS)
    alerts = context.publisher(ALERTS)
    waits = context.wait_set("converter")
    waits.add_server(server)
    waits.add_subscription(readings)
    while not stop.is_set():
        if not waits.wait(0.1):
            continue
        while (request := server.take_request()) is not None:
            server.send_response(request, convert(request.body))
        while (message := readings.take()) is not None:
            text = alert(message.body)
            if text is not None:
                alerts.publish(text)


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with mailbus.Context() as context:
        run(context, stop)


if __name__ == "__main__":
    main()
