"""The PostOffice conversation grammar, sans-IO: which frames each request exchanges
(from ERRATA.md), where a conversation stands (`Position`) and the pure transitions
between positions, memoized per interned position (the hot path of both roles)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from enum import Enum

from mailbus.postoffice.codec import (
    Digest,
    Field,
    Name,
    Payload,
    RequestCode,
    ResponseCode,
    StateError,
    Timeout,
)


# -- the conversation grammar ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Step:
    """One step of a request: what the client sends (None: only the code) and which
    replies end the request. REQDATA moves on to the next step."""

    sends: Field | None
    ends: frozenset[ResponseCode]


def _steps(*steps: tuple[Field | None, tuple[ResponseCode, ...]]) -> tuple[Step, ...]:
    return tuple(Step(sends, frozenset(ends)) for sends, ends in steps)


R = ResponseCode
# From ERRATA.md. CREATEBOX has one refusal, BOXEXISTS, also for names that are invalid,
# a group's, over a limit (see docs/postoffice.md).
SEQUENCES: Mapping[RequestCode, tuple[Step, ...]] = {
    RequestCode.CREATEBOX: _steps(
        (None, ()), (Field.NAME, ()), (Field.DIGEST, (R.REQGRANTED, R.BOXEXISTS))
    ),
    RequestCode.REQBOX: _steps(
        (None, (R.ALREADYCONN,)),
        (Field.NAME, ()),
        (Field.DIGEST, (R.REQGRANTED, R.NONEXISTBOX, R.NOAUTH, R.BOXINUSE)),
    ),
    RequestCode.RETBOX: _steps((None, (R.NOBOXCONN, R.REQGRANTED))),
    RequestCode.REMOVEBOX: _steps((None, (R.NOBOXCONN, R.REQGRANTED, R.NONEXISTBOX, R.NOAUTH))),
    RequestCode.SENDLETTER: _steps(
        (None, (R.NOBOXCONN,)), (Field.NAME, ()), (Field.PAYLOAD, (R.REQGRANTED, R.DELFAIL))
    ),
    # After the timeout, REQDATA opens the NEXTLETTER/SATIATED loop.
    RequestCode.GETMAIL: _steps((None, (R.NOBOXCONN,)), (Field.TIMEOUT, (R.MAILTIMEOUT,))),
    RequestCode.EMPTYBOX: _steps((None, (R.REQGRANTED, R.NOBOXCONN))),
    RequestCode.DISCONNECT: _steps((None, (R.REQGRANTED,))),
    RequestCode.NEXTLETTER: _steps((None, (R.BADCOMMAND,))),
    RequestCode.SATIATED: _steps((None, (R.BADCOMMAND,))),
}
_BAD = _steps((None, (R.BADCOMMAND,)))
# The server may send these at any point; the connection ends after them.
ANYTIME = frozenset((ResponseCode.SHUTDOWN, ResponseCode.COMMTIMEOUT))
REFUSALS = frozenset((ResponseCode.BADCOMMAND, ResponseCode.UNSUPPORTED))


@functools.lru_cache(maxsize=128)
def allowed_replies(request: RequestCode | None, step: int) -> frozenset[ResponseCode]:
    """Replies the server may give at `step` of `request` (None: an unknown code)."""
    steps = _BAD if request is None else SEQUENCES[request]
    current = steps[step]
    more = frozenset((ResponseCode.REQDATA,)) if step + 1 < len(steps) else frozenset()
    if request is RequestCode.GETMAIL and step == 1:
        more = frozenset((ResponseCode.REQDATA,))
    if step == 0:
        # Any request code may be refused outright by a server that does not know it
        # (BADCOMMAND) or does not offer it (UNSUPPORTED); this daemon knows them all.
        more |= REFUSALS
    return current.ends | more | ANYTIME


class Phase(Enum):
    IDLE = "idle"  # between requests
    REPLY = "reply"  # the server owes a reply to the current step
    DATA = "data"  # the client owes the current step's data
    MAIL_LOOP = "mail loop"  # inside GETMAIL: NEXTLETTER or SATIATED expected
    MAIL_REPLY = "mail reply"  # the server owes an answer to NEXTLETTER/SATIATED/other
    # The server is sending a letter (INMAIL came): its sender is due, then its payload.
    # Only a client reading the letter is ever here.
    MAIL_SENDER = "mail sender"
    MAIL_PAYLOAD = "mail payload"
    CLOSED = "closed"
    # A machine that raised on a protocol violation: every later call raises too, since
    # neither side can know what the next bytes mean (as h11's ERROR state).
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Position:
    """Where a conversation stands; both roles share this bookkeeping."""

    phase: Phase = Phase.IDLE
    request: RequestCode | None = None
    step: int = 0
    loop_request: RequestCode | None = None  # what the client sent inside the mail loop
    # A small int naming this position, for the transition memos, and what the client
    # sends next there (both set by position_at, for the hot path).
    key: int = dc_field(default=-1, compare=False, repr=False)
    expects: Field | None = dc_field(default=None, compare=False, repr=False)


_POSITIONS: dict[tuple[Phase, RequestCode | None, int, RequestCode | None], Position] = {}


def position_at(
    phase: Phase, request: RequestCode | None = None, step: int = 0, loop: RequestCode | None = None
) -> Position:
    """The interned Position: conversations move through a few dozen of them, built
    once each, so that transitions can be memoized by `key`."""
    index = (phase, request, step, loop)
    pos = _POSITIONS.get(index)
    if pos is None:
        plain = Position(phase, request, step, loop)
        pos = Position(phase, request, step, loop, len(_POSITIONS), expected_field(plain))
        _POSITIONS[index] = pos
    return pos


# Transitions are pure functions of (position, code): memoized per interned position.
# A transition that raises StateError is not memoized (it is an error every time).
_REPLY_MEMO: dict[tuple[int, int], Position] = {}
_CODE_MEMO: dict[tuple[int, int], Position] = {}


def after_reply(pos: Position, response: ResponseCode) -> Position:
    key = (pos.key, response)
    after = _REPLY_MEMO.get(key)
    if after is None:
        after = _REPLY_MEMO[key] = _reply_transition(pos, response)
    return after


def after_code(pos: Position, code: int) -> Position:
    key = (pos.key, code)
    after = _CODE_MEMO.get(key)
    if after is None:
        after = _CODE_MEMO[key] = _code_transition(pos, code)
    return after


_DATA_MEMO: dict[int, Position] = {}


def after_data(pos: Position) -> Position:
    """The position after the client sent the data its step asked for."""
    after = _DATA_MEMO.get(pos.key)
    if after is None:
        after = _DATA_MEMO[pos.key] = position_at(Phase.REPLY, pos.request, pos.step)
    return after


def _reply_transition(pos: Position, response: ResponseCode) -> Position:
    """The position after the server's reply `response` at `pos` (StateError if the
    reply is not allowed there)."""
    if pos.phase is Phase.ERROR:
        raise StateError("the conversation broke earlier: nothing can be sent on it")
    if response in ANYTIME:
        return position_at(Phase.CLOSED)
    if pos.phase is Phase.REPLY:
        allowed = allowed_replies(pos.request, pos.step)
        if response not in allowed:
            name = pos.request.name if pos.request is not None else "an unknown code"
            raise StateError(f"{response.name} is not a reply to step {pos.step} of {name}")
        if response is ResponseCode.REQDATA:
            assert pos.request is not None
            if pos.request is RequestCode.GETMAIL and pos.step == 1:
                return position_at(Phase.MAIL_LOOP, RequestCode.GETMAIL)
            return position_at(Phase.DATA, pos.request, pos.step + 1)
        if pos.request is RequestCode.DISCONNECT:
            return position_at(Phase.CLOSED)
        return position_at(Phase.IDLE)
    if pos.phase is Phase.MAIL_REPLY:
        loop = pos.loop_request
        if loop is RequestCode.NEXTLETTER:
            allowed = frozenset((ResponseCode.INMAIL, ResponseCode.MAILTIMEOUT))
        elif loop is RequestCode.SATIATED:
            allowed = frozenset((ResponseCode.REQGRANTED,))
        else:
            allowed = frozenset((ResponseCode.BADCOMMAND,))
        if response not in allowed:
            raise StateError(f"{response.name} is not an answer inside GETMAIL")
        if response in (ResponseCode.MAILTIMEOUT, ResponseCode.REQGRANTED):
            return position_at(Phase.IDLE)
        return position_at(Phase.MAIL_LOOP, RequestCode.GETMAIL)
    raise StateError(f"no reply is due ({pos.phase.value})")


FRAME_OF: Mapping[Field, type] = {
    Field.NAME: Name,
    Field.DIGEST: Digest,
    Field.PAYLOAD: Payload,
    Field.TIMEOUT: Timeout,
}


def _code_transition(pos: Position, code: int) -> Position:
    """The position after the client sent code byte `code` at `pos`."""
    if pos.phase is Phase.IDLE:
        try:
            request: RequestCode | None = RequestCode(code)
        except ValueError:
            request = None
        return position_at(Phase.REPLY, request, 0)
    if pos.phase is Phase.MAIL_LOOP:
        try:
            loop: RequestCode | None = RequestCode(code)
        except ValueError:
            loop = None
        if loop not in (RequestCode.NEXTLETTER, RequestCode.SATIATED):
            loop = None
        return position_at(Phase.MAIL_REPLY, RequestCode.GETMAIL, 0, loop)
    raise StateError(f"a request code is not expected ({pos.phase.value})")


def expected_field(pos: Position) -> Field | None:
    """What the client sends next at `pos` (None when it is the server's turn)."""
    if pos.phase in (Phase.IDLE, Phase.MAIL_LOOP):
        return Field.CODE
    if pos.phase is Phase.DATA:
        assert pos.request is not None
        return SEQUENCES[pos.request][pos.step].sends
    return None
