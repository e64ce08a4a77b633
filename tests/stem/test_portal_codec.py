"""The portal's wire format, byte by byte: encode/decode are pure functions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus import Email, from_bytes, to_bytes
from mailbus.stem import Address, PortalFormatError, StemMessage, inbox_topic
from mailbus.stem.portal import MAX_DATA_CHARS, decode, encode

PART = st.text(alphabet="abcXYZ019_", min_size=1, max_size=6)
ADDRESS = st.builds(Address, PART, st.one_of(st.just(""), PART), st.one_of(st.just(""), PART))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
TEXT = st.text(max_size=60)


def sample() -> StemMessage:
    return StemMessage(to="B:echo:t", from_="client", reply_to="A:other", cmd="echo", data={"x": 1})


def test_headers_and_body_of_a_command() -> None:
    message = sample()
    headers, body = encode(message, "A", 1)
    assert headers == {
        "Stem-Hub": "A",
        "Stem-Hops": "1",
        "Stem-To": "B:echo:t",
        "Stem-From": "A:client",  # the sending hub fills in a missing from_hub
        "Stem-Reply-To": "A:other",
        "Stem-Type": '"cmd"',
        "Stem-Cmd": '"echo"',
        "Stem-Reply-Type": '"response"',
        "Stem-Msg-Id": str(message.msg_id),
    }
    assert body == '{"x": 1}'
    assert message.from_ == Address("client")  # the message itself is not changed


def test_a_from_hub_already_set_is_kept() -> None:
    headers, _ = encode(StemMessage(to="C:x", from_="A:c", reply_to="A:r", type="data"), "B", 2)
    assert headers["Stem-From"] == "A:c" and headers["Stem-Hub"] == "B"
    assert headers["Stem-Reply-To"] == "A:r"


def test_reply_to_without_hub_names_a_cell_of_the_sending_hub() -> None:
    headers, _ = encode(StemMessage(to="C:x", from_="c", reply_to=":r:t", type="data"), "B", 0)
    assert headers["Stem-Reply-To"] == "B:r:t"


@given(
    to=ADDRESS,
    from_=ADDRESS,
    reply_to=st.none() | ADDRESS,
    type_=TEXT.filter(lambda t: t not in ("", "cmd", "status")),
    log=st.none() | TEXT,
    status=st.none() | TEXT,
    ack_req=st.booleans(),
    msg_id=st.integers(min_value=0) | st.text(max_size=20),
    reply_id=st.none() | st.integers() | st.text(max_size=20),
    data=JSON,
    hops=st.integers(min_value=0, max_value=99),
)
def test_round_trip_through_real_email_bytes(
    to: Address,
    from_: Address,
    reply_to: Address | None,
    type_: str,
    log: str | None,
    status: str | None,
    ack_req: bool,
    msg_id: int | str,
    reply_id: int | str | None,
    data: Any,
    hops: int,
) -> None:
    message = StemMessage(
        to=to, from_=from_, reply_to=reply_to, type=type_, log=log, status=status,
        ack_req=ack_req, msg_id=msg_id, reply_id=reply_id, data=data,
    )  # fmt: skip
    headers, body = encode(message, "hubA", hops)
    email = from_bytes(to_bytes(Email(subject=inbox_topic("hubB"), body=body, headers=headers)))
    back, sender, back_hops = decode(email.headers, email.body)
    assert (sender, back_hops) == ("hubA", hops)
    expected = message.to_dict()
    expected["from"] = str(from_.replace(hub=from_.hub or "hubA"))
    if reply_to is not None:
        expected["reply_to"] = str(reply_to.replace(hub=reply_to.hub or "hubA"))
    assert back.to_dict() == expected


def good() -> tuple[dict[str, str], str]:
    return encode(StemMessage(to="B:c", from_="A:d", type="data", data=[1]), "A", 0)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"Stem-Hub": None}, "no Stem-Hub header"),
        ({"Stem-Hub": "a b"}, "Stem-Hub"),
        ({"Stem-Hops": None}, "not a small number"),
        ({"Stem-Hops": "-1"}, "not a small number"),
        ({"Stem-Hops": "99999"}, "not a small number"),
        ({"Stem-To": "a:b/c"}, "Stem-To"),
        ({"Stem-To": None}, "no 'to' address"),
        ({"Stem-From": None}, "no 'from' address"),
        ({"Stem-Type": None}, "no type"),
        ({"Stem-Type": "data"}, "Stem-Type is not valid JSON"),
        ({"Stem-Type": "7"}, "Stem-Type must be a JSON str"),
        ({"Stem-Type": '"cmd"'}, "needs its 'cmd'"),
        ({"Stem-Cmd": '"x"', "Stem-Type": '"data"'}, "of type cmd"),
        ({"Stem-Ack-Req": "1"}, "Stem-Ack-Req must be a JSON bool"),
        ({"Stem-Msg-Id": "true"}, "Stem-Msg-Id must be a JSON int or str"),
        ({"Stem-Msg-Id": "1.5"}, "Stem-Msg-Id must be"),
        ({"Stem-Reply-Id": "[]"}, "Stem-Reply-Id must be"),
    ],
)
def test_bad_headers_are_refused_with_what_is_wrong(
    change: dict[str, str | None], problem: str
) -> None:
    headers, body = good()
    for name, value in change.items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    with pytest.raises(PortalFormatError, match=problem):
        decode(headers, body)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("", "body is not valid JSON"),
        ("{", "body is not valid JSON"),
        ("NaN", "NaN is not JSON"),
        ("[Infinity]", "Infinity is not JSON"),
        ("[" * 100_000 + "]" * 100_000, "body is not valid JSON"),  # deep nesting
        ("cos(0)", "body is not valid JSON"),  # never evaluated
    ],
)
def test_bad_bodies_are_refused(body: str, problem: str) -> None:
    headers, _ = good()
    with pytest.raises(PortalFormatError, match=problem):
        decode(headers, body)


def test_oversized_data_is_refused_both_ways() -> None:
    headers, _ = good()
    with pytest.raises(PortalFormatError, match="longer than"):
        decode(headers, '"' + "x" * MAX_DATA_CHARS + '"')
    big = StemMessage(to="B:c", from_="d", type="data", data="x" * MAX_DATA_CHARS)
    with pytest.raises(PortalFormatError, match="longer than"):
        encode(big, "A", 0)


def test_header_names_are_read_in_any_case() -> None:
    headers, body = good()
    message, sender, _ = decode({k.upper(): v for k, v in headers.items()}, body)
    assert sender == "A" and message.data == [1]


@pytest.mark.parametrize(
    ("data", "problem"),
    [({1, 2}, "not JSON serializable"), (float("nan"), "Out of range"), (object(), "object")],
)
def test_data_json_cannot_hold_is_refused_at_encode(data: Any, problem: str) -> None:
    with pytest.raises(PortalFormatError, match=problem):
        encode(StemMessage(to="B:c", from_="d", type="data", data=data), "A", 0)


def test_attribute_too_long_for_a_header_is_refused() -> None:
    long_status = StemMessage(to="B:c", from_="d", type="status", status="s" * 2000)
    with pytest.raises(PortalFormatError, match="'status' is too long"):
        encode(long_status, "A", 0)


def test_control_characters_in_attributes_cannot_inject_headers() -> None:
    sneaky = StemMessage(to="B:c", from_="d", type="data\r\nBcc: evil@x", log="a\nb")
    headers, body = encode(sneaky, "A", 0)
    raw = to_bytes(Email(subject="stem/B", body=body, headers=headers))
    assert b"\r\nBcc:" not in raw
    back, _, _ = decode(from_bytes(raw).headers, body)
    assert back.type == "data\r\nBcc: evil@x" and back.log == "a\nb"


def test_inbox_topic_is_checked() -> None:
    assert inbox_topic("B") == "stem/B"
    with pytest.raises(ValueError):
        inbox_topic("B/../x")
    assert json.loads(good()[1]) == [1]


HEADER_NAMES = st.sampled_from(
    ["Stem-Hub", "Stem-Hops", "Stem-To", "Stem-From", "Stem-Reply-To", "Stem-Type",
     "Stem-Cmd", "Stem-Status", "Stem-Ack-Req", "Stem-Msg-Id", "Stem-Reply-Id", "Other"]
)  # fmt: skip


@given(
    st.dictionaries(HEADER_NAMES, st.text(max_size=30) | st.sampled_from(['"cmd"', "1", "A"])),
    st.text(max_size=50),
)
def test_garbage_decodes_or_raises_portal_format_error(headers: dict[str, str], body: str) -> None:
    try:
        message, sender, hops = decode(headers, body)
    except PortalFormatError:
        return
    message.validate()  # whatever decodes is a message that can be dispatched
    assert sender and hops >= 0
