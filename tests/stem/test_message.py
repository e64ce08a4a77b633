from __future__ import annotations

import json

import pytest
from mailbus.stem import Address, MessageError, StemMessage


def full() -> StemMessage:
    return StemMessage(
        to="h:c:t",
        from_="f",
        reply_to="r:rc",
        cmd="go",
        reply_type="answer",
        data={"k": [1, 2]},
        log="main",
        status="ok",
        ack_req=True,
        in_portal="p",
        msg_id=77,
        reply_id=5,
    )


def test_every_constructor_attribute_is_kept() -> None:
    m = full()
    assert (m.to, m.from_, m.reply_to) == (
        Address("c", "h", "t"),
        Address("f"),
        Address("rc", "r"),
    )
    assert (m.type, m.cmd, m.reply_type, m.data) == ("cmd", "go", "answer", {"k": [1, 2]})
    assert (m.log, m.status, m.ack_req, m.in_portal) == ("main", "ok", True, "p")
    assert (m.msg_id, m.reply_id) == (77, 5)


def test_defaults_and_fresh_ids() -> None:
    a, b = StemMessage(to="x", from_="y", type="data"), StemMessage(to="x", from_="y", type="data")
    assert a.reply_type == "response"
    assert a.ack_req is False and a.data is None and a.reply_id is None
    assert isinstance(a.msg_id, int) and a.msg_id != b.msg_id


def test_cmd_means_type_cmd() -> None:
    assert StemMessage(cmd="foo").type == "cmd"
    assert StemMessage(cmd="foo", type="cmd").type == "cmd"
    with pytest.raises(MessageError, match="of type cmd, not 'data'"):
        StemMessage(cmd="foo", type="data")
    later = StemMessage(type="data", to="a", from_="b")
    later.cmd = "foo"  # set after construction: refused before dispatch
    with pytest.raises(MessageError, match="is of type cmd"):
        later.validate()


def test_from_keyword_and_combined_part_names() -> None:
    m = StemMessage(**{"from": "a:b"}, to_cell="c", to_hub="h", from_target="t")
    assert m.from_ == Address("b", "a", "t")
    assert m.to == Address("c", "h")
    with pytest.raises(TypeError, match="once"):
        StemMessage(**{"from": "a"}, from_="b")
    with pytest.raises(TypeError, match="unexpected keyword argument 'orig'"):
        StemMessage(orig="x")
    with pytest.raises(TypeError, match="'to_port'"):
        StemMessage(to_port="x")


def test_part_accessors_read_and_write() -> None:
    m = full()
    assert (m.to_hub, m.to_cell, m.to_target) == ("h", "c", "t")
    assert (m.from_hub, m.from_cell, m.from_target) == ("", "f", "")
    assert (m.reply_to_hub, m.reply_to_cell) == ("r", "rc")
    m.to_hub = "other"
    m.from_target = "tt"
    assert str(m.to) == "other:c:t" and str(m.from_) == ":f:tt"
    m.to_target = None
    assert str(m.to) == "other:c"
    empty = StemMessage()
    assert empty.to_cell is None
    empty.to_cell = "late"
    assert empty.to == Address("late")


def test_whole_address_as_mapping_and_by_name() -> None:
    m = full()
    assert dict(m.to) == {"hub": "h", "cell": "c", "target": "t"}  # type: ignore[arg-type]
    m.to = {"cell": "z", "target": "q"}
    assert m["to"] == Address("z", target="q")
    assert m["from"] == Address("f")
    assert m["to_target"] == "q" and m["status"] == "ok"
    with pytest.raises(KeyError):
        m["orig"]
    m.reply_to = None
    assert m.reply_to is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"from_": "b", "type": "data"}, "no 'to' address"),
        ({"to": "a", "type": "data"}, "no 'from' address"),
        ({"to": "a", "from_": "b"}, "no type"),
        ({"to": "a", "from_": "b", "type": ""}, "no type"),
        ({"to_hub": "h", "from_": "b", "type": "data"}, "'to' address names no cell"),
        ({"to": "a", "from_": "b", "reply_to_hub": "h", "type": "data"}, "'reply_to'"),
        ({"to": "a", "from_": "b", "type": "cmd"}, "needs its 'cmd'"),
        ({"to": "a", "from_": "b", "type": "status"}, "needs its 'status'"),
        ({"to": "a", "from_": "b", "type": "data", "ack_req": 1}, "'ack_req' must be a bool"),
        ({"to": "a", "from_": "b", "type": "data", "msg_id": 1.5}, "'msg_id' must be"),
        ({"to": "a", "from_": "b", "type": "data", "reply_id": True}, "'reply_id' must be"),
        ({"to": "a", "from_": "b", "type": "data", "log": 3}, "'log' must be a str"),
    ],
)
def test_validate_names_what_is_missing(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(MessageError, match=problem):
        StemMessage(**fields).validate()  # type: ignore[arg-type]


def test_valid_messages_pass() -> None:
    full().validate()
    StemMessage(to="a", from_="b", type="status", status="").validate()
    StemMessage(to="a", from_="b", type="any string at all").validate()


def test_reply_goes_to_reply_to_else_from() -> None:
    m = full()
    r = m.reply(data=1)
    assert (r.to, r.from_, r.type, r.reply_id, r.data) == (m.reply_to, m.to, "answer", 77, 1)
    m.reply_to = None
    assert m.reply().to == Address("f")
    assert m.reply(type="msg_ack").type == "msg_ack"


def test_dump_is_json_with_every_set_attribute() -> None:
    m = full()
    m.data = {"obj": object()}  # not JSON: shown by repr, the dump never fails
    dumped = json.loads(m.dump())
    assert dumped["to"] == "h:c:t" and dumped["reply_to"] == "r:rc" and dumped["cmd"] == "go"
    assert (
        dumped["ack_req"] is True and dumped["msg_id"] == 77 and "object" in dumped["data"]["obj"]
    )
    assert "ack_req" not in StemMessage(to="a", from_="b", type="t").to_dict()
    assert "StemMessage(" in repr(m)
