"""Find: search every topic's kept messages (docs/workbench.md, "Find").

A query is words separated by spaces; a message matches when every word does:

    text          the body contains it (any case); "two words" in quotes for a space,
                  'say "hi"' in single quotes around double ones
    /regex/       the body matches a Python regular expression; /regex/i ignores case
    Name=value, Name~text, Name!=value, Name>n, Name<n, Name>=n, Name<=n
                  a header, else a JSON field of the body (model/query.py)

    celsius>25                      every reading above 25
    Subject~robot "event 4"         robot topics whose body says "event 4"
    /ERROR|WARN/ Client-GID=7f3a…   one client's warnings and errors
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from mailbus.query import LazyBody, Term, parse_term

from mailbus_workbench.model.topics import MessageRecord, TopicStore

MAX_RESULTS = 10_000  # results listed at most (the history cap bounds what is searched)
MAX_QUERY_CHARS = 2_000


class QueryError(ValueError):
    """A query that cannot be understood; the message says why and how to write it."""


@dataclass(frozen=True, slots=True)
class Query:
    text: tuple[str, ...]  # lower case: the body contains each
    patterns: tuple[re.Pattern[str], ...]
    terms: tuple[Term, ...]

    @property
    def empty(self) -> bool:
        return not (self.text or self.patterns or self.terms)

    def matches(self, record: MessageRecord) -> bool:
        event = record.event
        body = event.body or ""
        if self.text:
            lowered = body.lower()
            if not all(word in lowered for word in self.text):
                return False
        if not all(pattern.search(body) for pattern in self.patterns):
            return False
        lazy = LazyBody(event.body)
        return all(term.matches(event, lazy) for term in self.terms)


@dataclass(frozen=True, slots=True)
class FindResult:
    records: list[MessageRecord]  # in time order, oldest first
    searched: int  # messages looked at
    truncated: bool  # more matched than MAX_RESULTS


def parse_query(text: str) -> Query:
    """The query in `text`; QueryError with a readable reason when it is malformed."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""  # a backslash belongs to the regular expression
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError:
        raise QueryError('a quote is not closed: write "two words" with both quotes') from None
    plain: list[str] = []
    patterns: list[re.Pattern[str]] = []
    terms: list[Term] = []
    for word in words:
        if len(word) >= 2 and word.startswith("/") and (word.endswith("/") or word.endswith("/i")):
            patterns.append(_regex(word))
            continue
        term = parse_term(word)
        if term is not None:
            terms.append(term)
        elif word:
            plain.append(word.lower())
    return Query(tuple(plain), tuple(patterns), tuple(terms))


def _regex(word: str) -> re.Pattern[str]:
    ignore_case = word.endswith("/i") and len(word) > 2
    source = word[1:-2] if ignore_case else word[1:-1]
    if not source:
        raise QueryError(f"{word}: the regular expression is empty")
    try:
        return re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise QueryError(f"{word}: not a regular expression ({exc})") from None


def kept(store: TopicStore) -> list[MessageRecord]:
    """Every kept message, taken on the thread that feeds the store (copies of its
    lists: a search may then run on another thread)."""
    return [record for name in store.names() for record in store.history(name)]


def search(records: list[MessageRecord], query: Query, limit: int = MAX_RESULTS) -> FindResult:
    """The `records` that `query` matches, oldest first; the newest `limit` of them."""
    found = [record for record in records if query.matches(record)]
    found.sort(key=lambda r: (r.time_s, r.event.name, r.number))
    truncated = len(found) > limit
    if truncated:
        found = found[-limit:]  # the newest are what a user looks for
    return FindResult(found, len(records), truncated)


def find(store: TopicStore, query: Query, limit: int = MAX_RESULTS) -> FindResult:
    """Every kept message of every topic that `query` matches, oldest first."""
    return search(kept(store), query, limit)
