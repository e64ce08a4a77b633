"""The protocol's codecs: every message round-trips, and the decoder of what clients
send raises nothing but ProtocolError on any input."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus.foxglove import protocol as P

u32 = st.integers(0, P.UINT32)
text = st.text(max_size=40)
names = st.lists(text, max_size=4).map(tuple)
graph = st.lists(st.tuples(text, names), max_size=4).map(tuple)
schema = st.builds(P.MessageSchema, text, text, text, text)

client_messages = st.one_of(
    st.builds(P.Subscribe, st.lists(st.tuples(u32, u32), max_size=5).map(tuple)),
    st.builds(P.Unsubscribe, st.lists(u32, max_size=5).map(tuple)),
    st.builds(
        P.ClientAdvertise,
        st.lists(
            st.builds(P.ClientChannel, u32, text, text, text, st.none() | text, st.none() | text),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(P.ClientUnadvertise, st.lists(u32, max_size=5).map(tuple)),
    st.builds(P.ClientMessageData, u32, st.binary(max_size=64)),
    st.builds(P.ServiceCallRequest, u32, u32, text, st.binary(max_size=64)),
    st.just(P.SubscribeConnectionGraph()),
    st.just(P.UnsubscribeConnectionGraph()),
    st.sampled_from(sorted(P._UNSUPPORTED_OPS)).map(P.Unsupported),
)
server_messages = st.one_of(
    st.builds(
        P.ServerInfo,
        text,
        names,
        names,
        st.dictionaries(text, text, max_size=3),
        st.none() | text,
    ),
    st.builds(P.Status, st.sampled_from(P.StatusLevel), text, st.none() | text),
    st.builds(
        P.Advertise,
        st.lists(
            st.builds(P.Channel, u32, text, text, text, text, st.none() | text), max_size=3
        ).map(tuple),
    ),
    st.builds(P.Unadvertise, st.lists(u32, max_size=5).map(tuple)),
    st.builds(
        P.AdvertiseServices,
        st.lists(st.builds(P.Service, u32, text, text, schema, schema), max_size=3).map(tuple),
    ),
    st.builds(P.UnadvertiseServices, st.lists(u32, max_size=5).map(tuple)),
    st.builds(P.ConnectionGraphUpdate, graph, graph, graph, names, names),
    st.builds(P.ServiceCallFailure, u32, u32, text),
    st.builds(P.MessageData, u32, st.integers(0, P.UINT64), st.binary(max_size=64)),
    st.builds(P.ServiceCallResponse, u32, u32, text, st.binary(max_size=64)),
)


@given(client_messages)
def test_client_messages_round_trip(message: P.ClientMessage) -> None:
    assert P.decode_client(P.encode_client(message)) == message


@given(server_messages)
def test_server_messages_round_trip(message: P.ServerMessage) -> None:
    assert P.decode_server(P.encode_server(message)) == message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)
ops = st.sampled_from(["subscribe", "unsubscribe", "advertise", "unadvertise", "x", "fetchAsset"])


@given(
    st.one_of(
        st.binary(max_size=80),
        text,
        st.builds(
            lambda op, rest: json.dumps({"op": op, **rest}),
            ops,
            st.dictionaries(
                st.sampled_from(["subscriptions", "subscriptionIds", "channels", "channelIds"]),
                json_values,
            ),
        ),
        st.builds(lambda op, body: bytes([op]) + body, st.integers(0, 255), st.binary(max_size=40)),
    )
)
def test_the_client_decoder_raises_only_protocol_errors(frame: str | bytes) -> None:
    try:
        decoded = P.decode_client(frame)
    except P.ProtocolError as exc:
        assert str(exc)  # the status message says why
        return
    assert P.decode_client(P.encode_client(decoded)) == decoded


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        ("", "not JSON"),
        ("[]", "must be a JSON object"),
        ('{"op": 3}', "no string field 'op'"),
        ('{"op": "subscribe", "subscriptions": [{"id": true, "channelId": 1}]}', "id must be"),
        ('{"op": "unsubscribe", "subscriptionIds": [4294967296]}', "2^32-1"),
        ('{"op": "advertise", "channels": [{"id": 1}]}', "'topic' is missing"),
        ("{" * 100_000, "not JSON"),
        (b"", "empty binary frame"),
        (b"\x01\x00", "shorter than 5"),
        (b"\x02" + (1).to_bytes(4, "little") * 2 + b"\xff\x00\x00\x00", "runs past"),
        (b"\x02" + (1).to_bytes(4, "little") * 2 + (1).to_bytes(4, "little") + b"\xff", "UTF-8"),
    ],
)
def test_malformed_frames_say_what_is_wrong(frame: str | bytes, why: str) -> None:
    with pytest.raises(P.ProtocolError, match=re.escape(why)):
        P.decode_client(frame)


def test_message_data_is_the_specs_layout() -> None:
    frame = P.encode_server(P.MessageData(5, 2**40 + 3, b"{}"))
    assert frame == b"\x01" + (5).to_bytes(4, "little") + (2**40 + 3).to_bytes(8, "little") + b"{}"
