"""The bridge's state machine, fed by hand: what each event makes it send and do."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from mailbus.foxglove import protocol as P
from mailbus.foxglove.bridge import Bridge, Call, Effect, Publish, Send
from mailbus.foxglove.schema import MAX_DEPTH, TopicSchema, as_message
from mailbus.presence import Announcement, EntityInfo, PresenceState

C = 1  # the client


def frames(effects: list[Effect]) -> list[P.ServerMessage]:
    assert all(isinstance(e, Send) and e.client == C for e in effects), effects
    return [P.decode_server(e.frame) for e in effects if isinstance(e, Send)]


def connected(**options: Any) -> Bridge:
    bridge = Bridge(**options)
    bridge.connect(C)
    return bridge


def subscribe(bridge: Bridge, topic: str, sub_id: int = 0) -> None:
    channel = next(c for c in bridge.channels if c.topic == topic)
    frame = P.encode_client(P.Subscribe(((sub_id, channel.id),)))
    assert bridge.on_frame(C, frame) == []


def test_by_default_only_the_graph_is_offered() -> None:
    bridge = Bridge()
    info, advertise = frames(bridge.connect(C))
    assert isinstance(info, P.ServerInfo) and info.capabilities == ("connectionGraph",)
    assert info.supported_encodings == ()
    assert advertise == P.Advertise(())
    channel = P.ClientChannel(1, "lab/cmd", "json", "cmd")
    (status,) = frames(bridge.on_frame(C, P.encode_client(P.ClientAdvertise((channel,)))))
    assert isinstance(status, P.Status) and "--allow-publish" in status.message
    call = P.ServiceCallRequest(1, 1, "json", b"[]")
    (failure,) = frames(bridge.on_frame(C, P.encode_client(call)))
    assert isinstance(failure, P.ServiceCallFailure) and failure.message == "no service 1"


def test_a_topic_is_advertised_at_its_first_message_and_costs_nothing_unwatched() -> None:
    bridge = connected()
    (advertise,) = frames(bridge.on_message("lab/t", '{"c": 1.5}', 10, 0.0))
    assert isinstance(advertise, P.Advertise)
    (channel,) = advertise.channels
    assert (channel.topic, channel.encoding, channel.schema_encoding) == (
        "lab/t",
        "json",
        "jsonschema",
    )
    assert json.loads(channel.schema)["properties"] == {"c": {"type": "number"}}
    assert bridge.known == {"lab/t"} and bridge.wanted == frozenset()
    assert bridge.on_message("lab/t", '{"c": 2}', 11, 0.1) == []

    subscribe(bridge, "lab/t", sub_id=9)
    assert bridge.wanted == {"lab/t"}
    (data,) = frames(bridge.on_message("lab/t", '{"c": 3}', 12, 0.2))
    assert data == P.MessageData(9, 12, b'{"c": 3}')  # the body's own bytes, log time
    (again,) = frames(bridge.on_message("lab/t", '{"c": 4}', 13, 0.3))
    assert isinstance(again, P.MessageData) and again.timestamp_ns == 13

    assert bridge.on_frame(C, P.encode_client(P.Unsubscribe((9,)))) == []
    assert bridge.wanted == frozenset()
    bridge.disconnect(C)
    assert bridge.on_message("lab/t", "{}", 14, 0.4) == []


def test_a_wider_body_is_sent_then_the_topic_is_advertised_again() -> None:
    bridge = connected()
    bridge.on_message("lab/t", '{"a": 1}', 1, 0.0)
    subscribe(bridge, "lab/t")
    old = bridge.channels[0].id
    data, unadvertise, advertise = frames(bridge.on_message("lab/t", '{"a": 1, "b": "x"}', 2, 0))
    assert isinstance(data, P.MessageData) and data.subscription_id == 0
    assert unadvertise == P.Unadvertise((old,))
    assert isinstance(advertise, P.Advertise)
    (channel,) = advertise.channels
    assert channel.id != old
    assert set(json.loads(channel.schema)["properties"]) == {"a", "b"}
    assert bridge.wanted == frozenset()  # the client subscribes to the new channel
    (status,) = frames(bridge.on_frame(C, P.encode_client(P.Subscribe(((1, old),)))))
    assert isinstance(status, P.Status) and f"no channel {old}" in status.message


def announcement(gid: str, name: str, *entities: tuple[str, str], **kw: Any) -> Announcement:
    return Announcement(
        gid=gid * 32,
        name=name,
        host="h",
        pid=7,
        transport="postoffice",
        period_s=1.0,
        entities=tuple(EntityInfo(kind, topic) for kind, topic in entities),
        **kw,
    )


def test_the_graph_follows_announcements_and_topics_go_when_nobody_has_them() -> None:
    bridge = connected()
    assert frames(bridge.on_frame(C, P.encode_client(P.SubscribeConnectionGraph()))) == [
        P.ConnectionGraphUpdate()
    ]
    arm = announcement("a", "arm", ("publisher", "robot/pose"), ("server", "arm/move"))
    (update,) = frames(bridge.on_announcement(arm, 0.0))
    assert update == P.ConnectionGraphUpdate(
        published_topics=(("robot/pose", ("arm (pid 7 on h)",)),),
        advertised_services=(("arm/move", ("arm (pid 7 on h)",)),),
    )
    bridge.on_message("robot/pose", "{}", 1, 0.0)
    bridge.on_message("lab/once", "{}", 1, 0.0)
    assert bridge.on_announcement(arm, 9.0) == []  # the same again: nothing new
    assert bridge.tick(10.0) == []
    bridge.on_announcement(arm, 60.5)
    # Past linger_s: the topic nobody announces goes, the announced one stays.
    once = next(c.id for c in bridge.channels if c.topic == "lab/once")
    assert frames(bridge.tick(61.0)) == [P.Unadvertise((once,))]
    assert [c.topic for c in bridge.channels] == ["robot/pose"]
    # A participant that stops announcing is gone after three of its periods, and with
    # it the topic whose last message is older than linger_s.
    pose = bridge.channels[0].id
    removed = P.ConnectionGraphUpdate(
        removed_topics=("robot/pose",), removed_services=("arm/move",)
    )
    assert frames(bridge.tick(61.0 + 3.0)) == [P.Unadvertise((pose,)), removed]
    # A goodbye removes it at once; a topic with a recent message lingers.
    bridge.on_announcement(arm, 70.0)
    bridge.on_message("robot/pose", "{}", 2, 70.0)
    bye = replace(arm, state=PresenceState.GOODBYE)
    assert frames(bridge.on_announcement(bye, 70.5)) == [removed]
    assert bridge.tick(71.0) == [] and [c.topic for c in bridge.channels] == ["robot/pose"]


def test_client_publishing_and_calls_when_allowed() -> None:
    bridge = Bridge(allow_publish=True, allow_calls=True)
    info = frames(bridge.connect(C))[0]
    assert isinstance(info, P.ServerInfo)
    assert set(info.capabilities) == {"connectionGraph", "services", "clientPublish"}
    channels = (
        P.ClientChannel(1, "lab/cmd", "json", "cmd"),
        P.ClientChannel(2, "lab/raw", "cdr", "raw"),
        P.ClientChannel(3, "_mailbus/participants", "json", "x"),
        P.ClientChannel(4, "bad\nname", "json", "x"),
    )
    statuses = frames(bridge.on_frame(C, P.encode_client(P.ClientAdvertise(channels))))
    assert len(statuses) == 3 and all(isinstance(s, P.Status) for s in statuses)
    published = bridge.on_frame(C, P.encode_client(P.ClientMessageData(1, b'{"go": 1}')))
    assert published == [Publish(C, "lab/cmd", '{"go": 1}')]
    (status,) = frames(bridge.on_frame(C, P.encode_client(P.ClientMessageData(2, b"{}"))))
    assert isinstance(status, P.Status) and "not advertised" in status.message

    (advertised,) = frames(bridge.on_service_seen("demo/add", 0.0))
    assert isinstance(advertised, P.AdvertiseServices)
    service = advertised.services[0]
    request = P.ServiceCallRequest(service.id, 4, "json", b"[1, 2]")
    (call,) = bridge.on_frame(C, P.encode_client(request))
    assert call == Call(C, service.id, 4, "demo/add", "[1, 2]")
    assert isinstance(call, Call)
    (response,) = frames(bridge.call_done(call, "3"))
    assert response == P.ServiceCallResponse(service.id, 4, "json", b'{"text": "3"}')
    (failure,) = frames(bridge.call_done(call, None, "no response within 10 s"))
    assert failure == P.ServiceCallFailure(service.id, 4, "no response within 10 s")


def test_bodies_that_are_not_json_objects_travel_in_the_wrapper() -> None:
    assert as_message('{"a": 1}') == (b'{"a": 1}', {"a": 1})
    for body in ("plain", "[1, 2]", "3", '"s"', '{"a": NaN}', "{broken", ""):
        payload, value = as_message(body)
        assert value == {"text": body} and json.loads(payload) == value


def test_schemas_widen_with_new_types_and_stay_bounded() -> None:
    schema = TopicSchema()
    assert schema.widen({"v": 1})
    assert not schema.widen({"v": 2.5})  # an int then a float: both numbers
    assert schema.widen({"v": "high"})
    assert json.loads(schema.text("t"))["properties"]["v"]["type"] == ["number", "string"]
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(MAX_DEPTH + 5):
        inner["d"] = {}
        inner = inner["d"]
    schema.widen(deep)
    text = schema.text("t")
    assert text.count('"d"') == MAX_DEPTH


def test_a_declared_schema_is_advertised_and_never_widened() -> None:
    declared = '{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}'
    bridge = connected(schemas={"robot/pose": declared})
    (advertise,) = frames(bridge.on_message("robot/pose", '{"x": 1}', 1, 0.0))
    assert isinstance(advertise, P.Advertise) and advertise.channels[0].schema == declared
    subscribe(bridge, "robot/pose")
    (data,) = frames(bridge.on_message("robot/pose", '{"x": 2, "extra": true}', 2, 0.1))
    assert isinstance(data, P.MessageData)  # no advertisement again
