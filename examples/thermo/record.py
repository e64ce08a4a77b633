"""Record the session the golden test replays (`python record.py`, writes ./recording).

The sensor's readings and the converter's alerts, on one in-process context: sixteen
readings, of which four are hot. Run it again only to change the recording on purpose.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import converter
import mailbus
import sensor
from mailbus.sessions.recorder import Recorder

HERE = Path(__file__).parent
READINGS = 16


def record(directory: Path) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    with mailbus.Context() as context, Recorder(str(directory), context=context):
        alerts = context.subscription(converter.ALERTS)
        stop = threading.Event()
        worker = threading.Thread(target=converter.run, args=(context, stop))
        worker.start()
        publisher = context.publisher(sensor.TOPIC)
        hot = 0
        for n in range(READINGS):
            stop.wait(sensor.PERIOD_S)  # the sensor's pace, which the replay keeps
            publisher.publish(sensor.reading(n))
            if converter.alert(sensor.reading(n)) is not None:
                hot += 1
                if mailbus.wait_for_message(alerts, 5.0) is None:
                    raise SystemExit(f"no alert for reading {n}")
        stop.set()
        worker.join(5.0)
    print(f"recorded {READINGS} readings and {hot} alerts in {directory}")


if __name__ == "__main__":
    record(HERE / "recording")
