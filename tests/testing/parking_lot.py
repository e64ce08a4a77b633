"""A parking-lot gate, written from scratch as a user of the testing kit writes a system:
it publishes the free places on `lot/free` after each car that enters (`lot/enter`) or
leaves (`lot/exit`), and serves `lot/fee`, the fee of a parked car. It publishes only in
answer to inputs, and its fee depends on what entered before (state a fresh gate lacks).

`run(context, stop)` is what the kit starts (a thread in-process, this file as a
process elsewhere). LOT_CAPACITY (default 3) is read when it starts.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import mailbus

ENTER, EXIT, FREE, FEE = "lot/enter", "lot/exit", "lot/free", "lot/fee"
FEE_PER_VISIT = 2.5


def run(context: mailbus.Context, stop: threading.Event) -> None:
    capacity = int(os.environ.get("LOT_CAPACITY", "3"))
    parked: list[str] = []
    entries = context.subscription(ENTER)
    exits = context.subscription(EXIT)
    free = context.publisher(FREE)
    fees = context.server(FEE)
    waits = context.wait_set("gate")
    waits.add_subscription(entries)
    waits.add_subscription(exits)
    waits.add_server(fees)
    while not stop.is_set():
        if not waits.wait(0.1):
            continue
        # Cars first: a fee asked for after a car entered sees that car.
        while (car := entries.take()) is not None:
            plate = json.loads(car.body)["plate"]
            if len(parked) < capacity and plate not in parked:
                parked.append(plate)
            free.publish(json.dumps({"free": capacity - len(parked), "stamp": time.time()}))
        while (car := exits.take()) is not None:
            plate = json.loads(car.body)["plate"]
            if plate in parked:
                parked.remove(plate)
            free.publish(json.dumps({"free": capacity - len(parked), "stamp": time.time()}))
        while (request := fees.take_request()) is not None:
            plate = json.loads(request.body)["plate"]
            if plate in parked:
                answer = {"plate": plate, "fee": FEE_PER_VISIT}
            else:
                answer = {"plate": plate, "error": "not parked"}
            fees.send_response(request, json.dumps(answer))


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with mailbus.Context() as context:
        run(context, stop)


if __name__ == "__main__":
    main()
