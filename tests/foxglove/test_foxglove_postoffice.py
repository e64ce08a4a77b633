"""`mailbus foxglove` on a PostOffice system in other processes (the daemon, the demo,
a numbered publisher), driven by the reference FoxgloveClient under both subprotocols;
and a client that stops reading, cut off while the system loses nothing."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mailbus
import pytest
from foxglove_checks import bodies, numbers_after
from foxglove_peer import SUBPROTOCOLS, Bridge, probe, start_bridge, stop
from journeys.postoffice_system import PASSWORD, environment, spawn, start_daemon
from mailbus.options import load_options
from waiting import eventually

NUMBERED = Path(__file__).resolve().parent / "numbered_participant.py"
TOPICS = ["lab/list", "lab/numbers", "lab/text"]
DEMO_TOPICS = ["robot/log", "robot/pose", "sensors/temperature", "system/heartbeat"]


@dataclass
class System:
    bridge: Bridge
    port: int
    env: dict[str, str]
    tmp: Path
    numbered_log: Path

    def config(self, box: str, name: str) -> Path:
        path = self.tmp / f"{box}.toml"
        path.write_text(
            f'transport = "postoffice"\nname = "{name}"\nannounce-period-s = 1.0\n'
            f'[postoffice]\nport = {self.port}\nbox = "{box}"\n'
        )
        return path


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    tmp = tmp_path_factory.mktemp("foxglove-postoffice")
    env = {**os.environ, **environment(tmp)}
    daemon, port = start_daemon(tmp / "po" / "postoffice.db", env)
    started: list[subprocess.Popen[Any]] = [daemon]
    try:
        partial = System(None, port, env, tmp, tmp / "numbered.log")  # type: ignore[arg-type]
        demo_config = partial.config("lab.demo", "lab-demo")
        started.append(spawn(["--config", str(demo_config), "demo"], env, tmp / "demo.log"))
        numbered_env = {**env, "MAILBUS_CONFIG_FILE": str(partial.config("lab.num", "lab-num"))}
        with partial.numbered_log.open("wb") as out:
            started.append(
                subprocess.Popen(
                    [sys.executable, str(NUMBERED)],
                    env=numbered_env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        bridge_config = partial.config("lab.fox", "lab-foxglove")
        args = ["--config", str(bridge_config), "foxglove", "--port", "0"]
        bridge = start_bridge([*args, "--allow-calls", "--allow-publish"], env, tmp / "b.log")
        started.append(bridge.process)
        partial.bridge = bridge
        yield partial
    finally:
        for process in reversed(started):
            stop(process)


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_a_postoffice_system_reaches_the_reference_client(
    peer: Path, system: System, subprotocol: str
) -> None:
    go = {"run": subprotocol, "count": 100}
    seen = probe(
        peer,
        {
            "url": system.bridge.url,
            "subprotocol": subprotocol,
            "topics": TOPICS,
            "count": 100,
            "ignore": ["ready"],
            # Published from the app once it subscribes; the numbered participant, a
            # Mailbus subscriber of lab/go, answers with its hundred messages per topic.
            "publish": {"topic": "lab/go", "body": json.dumps(go)},
            "graph": ["lab/numbers", *DEMO_TOPICS],
            "call": {"service": "demo/add", "body": "[40, 2]"},
            "channels": DEMO_TOPICS,
        },
        seconds=60,
    )
    assert seen["protocol"] == subprotocol
    assert f"go {json.dumps(go)}" in system.numbered_log.read_text()

    assert [b["seq"] for b in bodies(seen, "lab/numbers")] == list(range(1, 101))
    texts = [b["text"] for b in bodies(seen, "lab/text")]
    assert numbers_after("line ", texts) == list(range(1, 101))
    # A JSON list is not an object: it travels in the wrapper, as it was sent.
    lists = [json.loads(b["text"]) for b in bodies(seen, "lab/list")]
    assert lists == [[n, 2 * n] for n in range(1, 101)]

    published = seen["graph"]["published"]
    assert all(h[0].startswith("lab-demo (pid ") for t in DEMO_TOPICS for h in [published[t]])
    assert published["lab/numbers"][0].startswith("lab-num (pid ")
    assert seen["graph"]["subscribed"]["lab/go"][0].startswith("lab-num (pid ")
    assert seen["graph"]["services"]["demo/add"][0].startswith("lab-demo (pid ")
    assert json.loads(seen["callResponse"]["data"]) == {"sum": 42}
    assert seen["errors"] == []


def test_a_slow_client_is_cut_off_and_the_system_loses_nothing(
    peer: Path, system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAILBUS_POSTOFFICE_PASSWORD", PASSWORD)
    count, pad = 300, 32_000  # 9.6 MB on lab/numbers: well past what the sockets buffer
    args = ["--config", str(system.config("lab.fox2", "lab-foxglove-2")), "foxglove"]
    bridge = start_bridge(
        [*args, "--port", "0", "--send-queue", "8"], system.env, system.tmp / "slow-bridge.log"
    )
    slow = subprocess.Popen(
        [
            "node",
            str(peer / "slow.mjs"),
            json.dumps(
                {"url": bridge.url, "subprotocol": SUBPROTOCOLS[1], "topics": ["lab/numbers"]}
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert _line(slow) == {"paused": True}
        options = load_options(str(system.config("lab.test", "lab-test")))
        with mailbus.Context(options) as ctx:
            numbers = ctx.subscription("lab/numbers", depth=count * 4)
            seqs: list[int] = []

            def all_arrived() -> bool:
                while (message := numbers.take()) is not None:
                    seq = json.loads(message.body)["seq"]
                    if seq:
                        seqs.append(seq)
                return len(seqs) >= count

            ctx.publisher("lab/go").publish(json.dumps({"run": "slow", "count": count, "pad": pad}))
            eventually(all_arrived, 60, "the test's subscriber to get every message")
        assert seqs == list(range(1, count + 1))  # the system lost nothing
        eventually(lambda: "cut off" in bridge.output(), 30, "the bridge to cut the client off")
        assert bridge.process.poll() is None
        assert slow.stdin is not None
        slow.stdin.write("resume\n")
        slow.stdin.flush()
        ended = _line(slow)
        assert ended["closed"] in (1006, 1008), ended
        assert ended["received"] < count, ended
    finally:
        stop(slow)
        stop(bridge.process)


def _line(process: subprocess.Popen[str], timeout: float = 60.0) -> dict[str, Any]:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        line = process.stdout.readline() if selector.select(timeout) else ""
    assert line, f"no line from the slow client within {timeout:g} s"
    result: dict[str, Any] = json.loads(line)
    return result
