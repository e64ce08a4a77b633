"""One query language for messages (docs/queries.md): the workbench's topic filter and
Find, the notebook, `mailbus topic echo --where` and the test kit's `where=`. Pure.

    Name=value    the whole value, case-insensitive
    Name~text     a part of the value, case-insensitive
    Name!=value   present, and not that value
    Name>n  Name<n  Name>=n  Name<=n
                  numbers compare as numbers (a number never matches text),
                  other values as text

`Name` is a header (`Client-GID`, `Subject`, `Message-ID`, `In-Reply-To`) when the
message has one of that name, else a field of its JSON body by path (the one field-path
grammar, mailbus.field_path): `celsius`, `pose.x`, `items.0.id` or `items[0].id`.
`topic/name.path` reads the field only on that topic: `sensors/temperature.celsius>25`.
`signature=verified|unsigned|failed` reads a received email's signature status
(docs/mail.md, "Signed mail"), where `failed` matches every "failed: why". In the topic
filter, the other words are the fuzzy topic filter; `parse_where` takes terms only,
and also `/regex/` (`/regex/i`: any case), a Python regular expression the body must
match, as in the workbench's Find.

    robot signature=failed        topics like "robot", messages whose signature failed
    Client-GID=7f3a…  Subject~pose  celsius>25
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mailbus import field_path
from mailbus.field_path import MISSING as _MISSING
from mailbus.field_path import FieldPathError, Step

# The longest body parsed for a field comparison (the inspector's pretty-print bound).
MAX_JSON_CHARS = 256 * 1024

# A name (printable ASCII but ':' and the operators' characters), an operator, a value.
_TERM = re.compile(r"^([!-9;-~]+?)(!=|>=|<=|[=~<>])(.*)$")
_NAME = re.compile(r"^[!-9;-~]+$")
_OPERATORS = ("=", "~", "!=", ">", "<", ">=", "<=")


class QueryError(ValueError):
    """A query that cannot be read; the message says which word and what to write."""


class QueryMessage(Protocol):
    """What a query reads of a message (a trace event has all of it)."""

    @property
    def name(self) -> str: ...  # the topic or service
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def body(self) -> str | None: ...
    @property
    def message_id(self) -> str: ...
    @property
    def in_reply_to(self) -> str: ...
    @property
    def extra(self) -> Mapping[str, object]: ...


class LazyBody:
    """One message's JSON body, parsed at most once however many terms read it."""

    __slots__ = ("_body", "_doc")

    def __init__(self, body: str | None) -> None:
        self._body = body
        self._doc: Any = None

    @property
    def doc(self) -> Any:
        if self._doc is None:
            self._doc = _MISSING
            body = (self._body or "").strip()
            if body[:1] in ("{", "[") and len(body) <= MAX_JSON_CHARS:
                with contextlib.suppress(ValueError, RecursionError):
                    self._doc = json.loads(body)
        return self._doc


@dataclass(frozen=True, slots=True)
class Term:
    name: str  # lower case
    exact: bool  # "=" (the whole value) or "~" (a part); unused for other operators
    value: str  # lower case
    op: str = ""  # "", or one of != > < >= <= ("" means "=" or "~" as `exact` says)
    topic: str | None = None  # `topic/name.path`: the field is read on this topic only
    path: tuple[Step, ...] = field(default=())  # the JSON path of `name`
    limit: float | None = None  # `value` as a number, when it is one (parsed once)
    pattern: re.Pattern[str] | None = None  # `/regex/`: the body must match it

    @property
    def operator(self) -> str:
        return self.op or ("=" if self.exact else "~")

    def matches(self, event: QueryMessage, body: LazyBody | None = None) -> bool:
        if self.pattern is not None:
            return self.pattern.search(event.body or "") is not None
        if self.topic is not None and event.name != self.topic:
            return False
        found = _MISSING if self.topic is not None else _header(event, self.name)
        if found is _MISSING:
            key = self.path[0]
            # A body without the key's text has no such field: no parse (Find reads
            # whole histories). A key written with \u escapes is not found this way.
            body_text = event.body or ""
            if isinstance(key, str) and not key.isdigit() and f'"{key}"' not in body_text:
                return False
            found = field_path.get((body or LazyBody(event.body)).doc, self.path)
        if found is _MISSING:
            return False
        return _compare(self.operator, found, self.value, self.name == "signature", self.limit)


@dataclass(frozen=True, slots=True)
class Query:
    topic_text: str  # the words that are no terms: the fuzzy topic filter (Find: body text)
    terms: tuple[Term, ...]

    def matches(self, event: QueryMessage) -> bool:
        body = LazyBody(event.body)
        return all(term.matches(event, body) for term in self.terms)


def parse_term(word: str) -> Term | None:
    """`word` as a message term, or None when it is no term (plain text)."""
    match = _TERM.match(word)
    if not match:
        return None
    name, op, value = match.groups()
    if not _NAME.match(name) or name[-1] in "<>!":  # `a<>b`, `a!~b`: no operator we know
        return None
    topic = None
    dotted = name
    slash = name.rfind("/")
    if slash > 0 and "." in name[slash:]:
        dot = name.index(".", slash)
        topic, dotted = name[:dot], name[dot + 1 :]
    try:
        path = field_path.parse(dotted).steps
    except FieldPathError:
        return None
    exact = op != "~"
    operator = "" if op in "=~" else op
    return Term(name.lower(), exact, value.lower(), operator, topic, path, _number(value))


def parse(text: str) -> Query:
    """Split a filter box's text into the topic filter and the message terms."""
    words, terms = [], []
    for word in text.split():
        term = parse_term(word)
        if term is None:
            words.append(word)
        else:
            terms.append(term)
    return Query(" ".join(words), tuple(terms))


def parse_regex(word: str) -> Term | None:
    """`/regex/` or `/regex/i` as a term on the body, None if `word` is not one;
    QueryError if it is not a regular expression."""
    if len(word) < 2 or not word.startswith("/") or not word.endswith(("/", "/i")):
        return None
    ignore_case = word.endswith("/i") and len(word) > 2
    source = word[1:-2] if ignore_case else word[1:-1]
    if not source:
        raise QueryError(f"{word}: the regular expression is empty")
    try:
        pattern = re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise QueryError(f"{word}: not a regular expression ({exc})") from None
    return Term(word, False, word, "/", pattern=pattern)


def _check_value(word: str, term: Term) -> None:
    """Refuse what would silently match nothing: `x>>2`, `x==2`, `x>` (no value)."""
    if term.value[:1] in ("=", "<", ">", "!", "~"):
        raise QueryError(
            f"{word!r}: the value {term.value!r} starts with an operator "
            "(write Name=value, Name>n, Name>=n, ...)"
        )
    if term.op and not term.value:
        raise QueryError(f"{word!r}: no value after {term.op!r}")


def parse_where(text: str) -> Query:
    """Terms only (`--where`, `where=`): every word must be a condition or a `/regex/`,
    all must hold."""
    regexes: list[Term] = []
    words: list[str] = []
    for word in text.split():
        found = parse_regex(word)
        if found is None:
            words.append(word)
        else:
            regexes.append(found)
    query = parse(" ".join(words))
    for word in words:
        term = parse_term(word)
        if term is not None:
            _check_value(word, term)
    query = Query(query.topic_text, (*query.terms, *regexes))
    if query.topic_text:
        word = query.topic_text.split()[0]
        raise QueryError(
            f"{word!r} is not a condition: write Name=value, Name~part, Name!=value or "
            "Name>n (Name: a header or a JSON field such as pose.x; docs/queries.md)"
        )
    if not query.terms:
        raise QueryError("an empty query: write at least one condition, such as celsius>25")
    return query


def _header(event: QueryMessage, name: str) -> Any:
    if name == "signature":
        value = event.extra.get("signature") if event.extra else None
        return value if isinstance(value, str) else _MISSING
    for key, value in event.headers.items():
        if key.lower() == name:
            return value
    # Headers the trace event keeps as fields rather than in `headers`.
    if name == "subject":
        return event.name
    if name == "message-id" and event.message_id:
        return event.message_id
    if name == "in-reply-to" and event.in_reply_to:
        return event.in_reply_to
    return _MISSING


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _text(value: Any) -> str:
    """A value as the query writes it: JSON literals for true/false/null, JSON text for a
    list or an object, the string itself for a string."""
    return value if isinstance(value, str) else json.dumps(value)


def _compare(
    op: str, found: Any, wanted: str, signature: bool = False, limit: float | None = None
) -> bool:
    """`found` (a header's text or a JSON value) against the query's lower-case `wanted`
    (`limit`: `wanted` as a number, if it is one)."""
    if op == "~":
        return wanted in _text(found).lower()
    number = _number(found)
    if isinstance(found, str) and op in ("=", "!="):
        # Text equality as the topic filter always had it (whole value, any case).
        text = found.lower()
        equal = text == wanted or (signature and text.startswith(wanted + ":"))
        if not equal and number is not None and limit is not None:
            equal = number == limit
        return equal if op == "=" else not equal
    if number is not None and limit is not None:
        pair: tuple[Any, Any] = (number, limit)
    elif limit is not None and op != "!=":
        return False  # a number orders only numbers: `celsius>25` never matches "hot"
    elif isinstance(found, bool | None) or not isinstance(found, int | float):
        pair = (_text(found).lower(), wanted)
    else:
        return op == "!="  # a number against text: never equal, never ordered
    a, b = pair
    if op == "=":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == ">":
        return bool(a > b)
    if op == "<":
        return bool(a < b)
    if op == ">=":
        return bool(a >= b)
    return bool(a <= b)
