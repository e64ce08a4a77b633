"""Stem messages: an address section (to, from, reply_to) and a content section.

Every attribute given to the constructor is kept (the reference's constructor dropped
status, ack_req, in_portal, msg_id and reply_id). Attributes can be read and changed
afterwards; an address part can be read or set directly (`to_cell`, `from_hub`,
`reply_to_target`, ...) and a whole address through its type name (`msg.to`), which
gives a read-only mapping {"hub", "cell", "target"} and takes a string or a mapping.

A message is checked when it is dispatched, not when it is built (see `validate`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mailbus.stem.address import PARTS, Address
from mailbus.stem.errors import MessageError

ADDRESS_TYPES = ("to", "from", "reply_to")
# The content attributes, in the order `dump` shows them.
ATTRIBUTES = (
    "type",
    "cmd",
    "reply_type",
    "data",
    "log",
    "status",
    "ack_req",
    "in_portal",
    "msg_id",
    "reply_id",
)
DEFAULT_REPLY_TYPE = "response"
AddressLike = Address | str | Mapping[str, Any]

# Ids are unique within a process; a reply is matched by the address it comes back to
# and its reply_id, so ids from other processes never need to be compared.
_ids = itertools.count(1)


def new_msg_id() -> int:
    return next(_ids)


def _address(value: AddressLike | None) -> Address | None:
    return None if value is None else Address.of(value)


class StemMessage:
    """One Stem message. Construct with keyword arguments; `from` is a Python keyword,
    so pass it as `from_=` (or `**{"from": ...}`)."""

    __slots__ = (
        "_from",
        "_reply_to",
        "_to",
        "ack_req",
        "cmd",
        "data",
        "in_portal",
        "log",
        "msg_id",
        "reply_id",
        "reply_type",
        "status",
        "type",
    )

    if TYPE_CHECKING:  # the part accessors, made below the class
        to_hub: str | None
        to_cell: str | None
        to_target: str | None
        from_hub: str | None
        from_cell: str | None
        from_target: str | None
        reply_to_hub: str | None
        reply_to_cell: str | None
        reply_to_target: str | None

    def __init__(
        self,
        *,
        to: AddressLike | None = None,
        from_: AddressLike | None = None,
        reply_to: AddressLike | None = None,
        type: str | None = None,
        cmd: str | None = None,
        reply_type: str = DEFAULT_REPLY_TYPE,
        data: Any = None,
        log: str | None = None,
        status: str | None = None,
        ack_req: bool = False,
        in_portal: str | None = None,
        msg_id: int | str | None = None,
        reply_id: int | str | None = None,
        **combined: Any,
    ) -> None:
        if "from" in combined:
            if from_ is not None:
                raise TypeError("give the from address once, as from_ or from")
            from_ = combined.pop("from")
        if cmd is not None:
            if type is not None and type != "cmd":
                raise MessageError(f"a message with cmd {cmd!r} is of type cmd, not {type!r}")
            type = "cmd"
        self._to = _address(to)
        self._from = _address(from_)
        self._reply_to = _address(reply_to)
        self.type = type
        self.cmd = cmd
        self.reply_type = reply_type
        self.data = data
        self.log = log
        self.status = status
        self.ack_req = ack_req
        self.in_portal = in_portal
        self.msg_id = new_msg_id() if msg_id is None else msg_id
        self.reply_id = reply_id
        for name, value in combined.items():  # to_cell=..., from_hub=... after the wholes
            address_type, _, part = name.rpartition("_")
            if address_type not in ADDRESS_TYPES or part not in PARTS:
                raise TypeError(f"StemMessage() got an unexpected keyword argument {name!r}")
            setattr(self, name, value)

    # -- whole addresses ----------------------------------------------------------------
    @property
    def to(self) -> Address | None:
        return self._to

    @to.setter
    def to(self, value: AddressLike | None) -> None:
        self._to = _address(value)

    @property
    def from_(self) -> Address | None:
        return self._from

    @from_.setter
    def from_(self, value: AddressLike | None) -> None:
        self._from = _address(value)

    @property
    def reply_to(self) -> Address | None:
        return self._reply_to

    @reply_to.setter
    def reply_to(self, value: AddressLike | None) -> None:
        self._reply_to = _address(value)

    def address(self, address_type: str) -> Address | None:
        """The address of `address_type` ("to", "from" or "reply_to")."""
        if address_type not in ADDRESS_TYPES:
            raise KeyError(address_type)
        value: Address | None = getattr(self, "_" + address_type)
        return value

    def __getitem__(self, name: str) -> Any:
        """Any attribute by its design name, including "from" and "to_hub"."""
        if name in ADDRESS_TYPES:
            return self.address(name)
        if name in ATTRIBUTES or _is_part_name(name):
            return getattr(self, name)
        raise KeyError(name)

    # -- helpers --------------------------------------------------------------------------
    def reply(self, **attributes: Any) -> StemMessage:
        """A reply: to `reply_to` or else `from`, from this message's `to`, of type
        `reply_type`, with `reply_id` set to this message's `msg_id`."""
        fields: dict[str, Any] = {
            "to": self._reply_to or self._from,
            "from_": self._to,
            "type": self.reply_type or DEFAULT_REPLY_TYPE,
            "reply_id": self.msg_id,
        }
        fields.update(attributes)
        return StemMessage(**fields)

    def validate(self) -> None:
        """Raise MessageError unless the message can be dispatched."""
        for name, address in (("to", self._to), ("from", self._from)):
            if address is None:
                raise MessageError(f"message has no {name!r} address: {self.dump()}")
            if not address.cell:
                raise MessageError(f"message's {name!r} address names no cell: {self.dump()}")
        if self._reply_to is not None and not self._reply_to.cell:
            raise MessageError(f"message's 'reply_to' address names no cell: {self.dump()}")
        if not self.type or not isinstance(self.type, str):
            raise MessageError(f"message has no type: {self.dump()}")
        if self.type == "cmd" and (not self.cmd or not isinstance(self.cmd, str)):
            raise MessageError(f"a cmd message needs its 'cmd' attribute: {self.dump()}")
        if self.cmd is not None and self.type != "cmd":
            # The constructor enforces it; an attribute set later must not slip through.
            raise MessageError(f"a message with cmd {self.cmd!r} is of type cmd: {self.dump()}")
        if self.type == "status" and self.status is None:
            raise MessageError(f"a status message needs its 'status' attribute: {self.dump()}")
        for name in ("cmd", "reply_type", "log", "status", "in_portal"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise MessageError(f"attribute {name!r} must be a str: {self.dump()}")
        if not isinstance(self.ack_req, bool):
            raise MessageError(f"attribute 'ack_req' must be a bool: {self.dump()}")
        for name in ("msg_id", "reply_id"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
                raise MessageError(f"attribute {name!r} must be an int or a str: {self.dump()}")

    def to_dict(self) -> dict[str, Any]:
        """The attributes that are set, addresses as strings (for dumps and traces)."""
        out: dict[str, Any] = {}
        for name in ADDRESS_TYPES:
            address = self.address(name)
            if address is not None:
                out[name] = str(address)
        for name in ATTRIBUTES:
            value = getattr(self, name)
            if value is not None and not (name == "ack_req" and value is False):
                out[name] = value
        return out

    def dump(self) -> str:
        """A one-line JSON dump; data that JSON cannot hold is shown by its repr."""
        return json.dumps(self.to_dict(), default=repr, ensure_ascii=False)

    def __repr__(self) -> str:
        return f"StemMessage({self.dump()})"


def _is_part_name(name: str) -> bool:
    address_type, _, part = name.rpartition("_")
    return address_type in ADDRESS_TYPES and part in PARTS


def _part_property(address_type: str, part: str) -> property:
    slot = "_" + address_type

    def get(self: StemMessage) -> str | None:
        address: Address | None = getattr(self, slot)
        return None if address is None else address[part]

    def set_(self: StemMessage, value: str | None) -> None:
        address: Address | None = getattr(self, slot)
        base = address if address is not None else Address("")
        setattr(self, slot, base.replace(**{part: value or ""}))

    return property(get, set_, doc=f"The {part} part of the {address_type!r} address.")


for _type in ADDRESS_TYPES:
    for _part in PARTS:
        setattr(StemMessage, f"{_type}_{_part}", _part_property(_type, _part))
