"""`mailbus foxglove --demo` in a process of its own, driven by the protocol's reference
client (FoxgloveClient of @foxglove/ws-protocol under Node) under both subprotocols."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from foxglove_checks import bodies, consecutive, numbers_after
from foxglove_peer import SUBPROTOCOLS, Bridge, probe, start_bridge, stop

DEMO_TOPICS = ["robot/log", "robot/pose", "sensors/temperature", "system/heartbeat"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    log = tmp_path_factory.mktemp("foxglove-demo") / "bridge.log"
    env = {**os.environ, "MAILBUS_CONFIG_FILE": ""}
    # --speed 20: a hundred heartbeats in five seconds.
    args = ["foxglove", "--demo", "--speed", "20", "--port", "0"]
    bridge = start_bridge([*args, "--allow-calls", "--allow-publish"], env, log)
    yield bridge
    stop(bridge.process)


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_the_demo_reaches_the_reference_client(peer: Path, demo: Bridge, subprotocol: str) -> None:
    seen = probe(
        peer,
        {
            "url": demo.url,
            "subprotocol": subprotocol,
            "topics": DEMO_TOPICS,
            "count": 100,
            "graph": DEMO_TOPICS,
            "call": {"service": "demo/add", "body": "[1, 2, 3]"},
        },
    )
    assert seen["protocol"] == subprotocol
    info = seen["serverInfo"]
    assert {"connectionGraph", "services", "clientPublish"} <= set(info["capabilities"])
    assert info["supportedEncodings"] == ["json"]
    assert sorted(seen["channels"]) == DEMO_TOPICS

    temperature = bodies(seen, "sensors/temperature")
    assert len(temperature) == 100
    ticks = [round(b["t"] * 10) for b in temperature]
    assert consecutive(ticks), ticks  # in order, none missing
    assert all(isinstance(b["celsius"], float) for b in temperature)
    assert len(bodies(seen, "robot/pose")) == 100
    # Plain-text bodies travel in the documented wrapper.
    beats = [b["text"] for b in bodies(seen, "system/heartbeat")]
    assert consecutive(numbers_after("alive ", beats)), beats
    events = [b["text"].rpartition(" event ")[2] for b in bodies(seen, "robot/log")]
    assert consecutive([int(n) for n in events]), events

    for topic in DEMO_TOPICS:
        holders = seen["graph"]["published"][topic]
        assert len(holders) == 1 and holders[0].startswith("demo (pid "), holders
    assert seen["graph"]["services"]["demo/add"][0].startswith("demo (pid ")
    assert seen["callResponse"] == {"callId": 7, "encoding": "json", "data": '{"sum": 6}'}
    assert seen["errors"] == []


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_a_client_publish_becomes_a_mailbus_message(
    peer: Path, demo: Bridge, subprotocol: str
) -> None:
    topic = f"foxglove/{subprotocol}"
    seen = probe(
        peer,
        {
            "url": demo.url,
            "subprotocol": subprotocol,
            "publish": {"topic": topic, "body": '{"go": true}'},
            # The system carried it: the bridge's context received it and advertised it.
            "channels": [topic],
        },
    )
    schema = json.loads(seen["channels"][topic]["schema"])
    assert schema["properties"] == {"go": {"type": "boolean"}}


MALFORMED: list[dict[str, Any]] = [
    {"text": "not json"},
    {"text": "[1, 2]"},
    {"text": '{"op": "subscribe"}'},
    {"text": '{"op": "subscribe", "subscriptions": [{"id": -1, "channelId": 1}]}'},
    {"text": '{"op": "dance"}'},
    {"text": '{"op": "getParameters", "parameterNames": []}'},
    {"hex": "09"},
    {"hex": "0201000000"},  # a service call request cut short
    {"hex": "02010000000700000099000000"},  # its encoding runs past the frame
]


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_malformed_messages_get_error_statuses_and_the_server_carries_on(
    peer: Path, demo: Bridge, subprotocol: str
) -> None:
    seen = probe(
        peer,
        {
            "url": demo.url,
            "subprotocol": subprotocol,
            "malformed": MALFORMED,
            "topics": ["robot/pose"],
            "count": 5,
        },
    )
    errors = [s["message"] for s in seen["statuses"] if s["level"] == 2]
    assert len(errors) == len(MALFORMED), errors
    assert errors[0].startswith("malformed message: text frame is not JSON")
    assert "'subscriptions' is missing" in errors[2]
    assert "unknown op 'dance'" in errors[4]
    assert "getParameters is not supported" in errors[5]
    assert "unknown binary opcode 0x09" in errors[6]
    assert "runs past the frame" in errors[8]
    # The connection lives on: the subscription after the garbage is served.
    assert len(bodies(seen, "robot/pose")) == 5
    assert demo.process.poll() is None


SESSION = Path(__file__).resolve().parents[2] / "sample_sessions" / "demo"


def test_a_session_plays_out_with_the_players_controls(peer: Path, tmp_path: Path) -> None:
    env = {**os.environ, "MAILBUS_CONFIG_FILE": ""}
    args = ["foxglove", "--session", str(SESSION), "--paused", "--port", "0"]
    bridge = start_bridge(args, env, tmp_path / "bridge.log")
    try:
        player = "_mailbus/player/"
        seen = probe(
            peer,
            {
                "url": bridge.url,
                "subprotocol": SUBPROTOCOLS[0],
                "calls": [
                    {"service": player + "state", "body": "{}"},
                    {"service": player + "seek", "body": '{"offset_s": 2.0}'},
                    {"service": player + "seek", "body": '"soon"'},
                    {"service": player + "resume", "body": "{}"},
                ],
                "topics": ["robot/pose"],
                "count": 10,
            },
        )
    finally:
        stop(bridge.process)
    first, seeked, refused, resumed = seen["callResponses"]
    assert json.loads(first["data"])["state"] == "paused"
    assert json.loads(first["data"])["position_s"] == 0.0
    assert json.loads(seeked["data"])["position_s"] >= 2.0
    assert "offset_s" in refused["message"]  # a serviceCallFailure, not a crash
    assert json.loads(resumed["data"])["state"] == "playing"
    poses = bodies(seen, "robot/pose")
    assert len(poses) == 10
    assert "services" in seen["serverInfo"]["capabilities"]
    assert "clientPublish" not in seen["serverInfo"]["capabilities"]
