"""`monitor.to_test(path)`: what the notebook monitor saw, saved as a pytest file that
runs green as saved (in a subprocess, through `mailbus test`) and fails when the system
answers otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import mailbus
import pytest
from mailbus.notebook import Monitor
from waiting import eventually

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thermo"
CONVERTER = (str(EXAMPLE / "converter.py"), ["server:thermo/convert"])
SENSOR = (str(EXAMPLE / "sensor.py"), ["publisher:sensors/temp"])


def run_saved(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailbus", "test", str(path)],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_message_the_monitor_saw_becomes_a_green_test(tmp_path: Path) -> None:
    with mailbus.Context() as context:
        monitor = Monitor(context)
        try:
            with pytest.raises(ValueError, match="no message on 'sensors/temp' seen yet"):
                monitor.to_test(tmp_path / "test_none.py", topic="sensors/temp")
            context.publisher("sensors/temp").publish(
                json.dumps({"sensor": "s1", "seq": 0, "celsius": 20.0})
            )
            eventually(lambda: monitor.model.latest_body("sensors/temp"), 10.0)
            saved = monitor.to_test(
                tmp_path / "test_saved.py", topic="sensors/temp", start=[SENSOR]
            )
            with pytest.raises(FileExistsError):
                monitor.to_test(saved, topic="sensors/temp")
        finally:
            monitor.stop()
    source = saved.read_text()
    assert (
        "expect.topic('sensors/temp', where={'sensor': 's1', 'seq': 0, 'celsius': 20.0}" in source
    )
    done = run_saved(saved)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_call_the_monitor_saw_becomes_a_test_of_the_service(tmp_path: Path) -> None:
    answer = {"celsius": 100.0, "fahrenheit": 212.0}
    with mailbus.Context() as context:
        monitor = Monitor(context)
        server = context.server("thermo/convert")

        def serve() -> None:
            request = mailbus.wait_for_request(server, timeout=10.0)
            if request is not None:
                server.send_response(request, json.dumps(answer))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            context.client("thermo/convert").call('{"celsius": 100}', timeout=10.0)
            thread.join(10.0)
            eventually(lambda: monitor.model.latest_call("thermo/convert"), 10.0)
            saved = monitor.to_test(
                tmp_path / "test_call.py", service="thermo/convert", start=[CONVERTER]
            )
        finally:
            monitor.stop()
    done = run_saved(saved)
    assert done.returncode == 0, done.stdout + done.stderr
    # The same test against a service that answers otherwise fails, saying how.
    saved.write_text(saved.read_text().replace("212.0", "200.0"))
    failed = run_saved(saved)
    assert failed.returncode == 1
    assert "fahrenheit: expected 200.0, got 212.0" in failed.stdout
