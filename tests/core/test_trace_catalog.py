"""One vocabulary of trace events (issue 14 item 2): every kind is an enum member with
its documentation, docs/trace-events.md is generated from them, and the tracer's fields
are TraceEvent's."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from mailbus import trace_catalog
from mailbus.trace import Kind, TraceEvent, Tracer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "trace-events.md"
AREA_PREFIXES = (
    "message|email|request|response|subscription|wait|transport|participant|mail|"
    "postoffice|outbox|broker|stem|recorder|replay"
)
LITERAL = re.compile(rf'"((?:{AREA_PREFIXES})\.[a-z_]+)"')
# Dotted strings that are option keys or file names, not event kinds.
NOT_KINDS = {
    "mail.idle",
    "mail.routing",
    "mail.share",
    "outbox.dir",
    "outbox.factor",
    "outbox.jitter",
    "postoffice.db",
    "postoffice.box",
    "postoffice.password",
    "postoffice.port",
    "postoffice.peers",
    "postoffice.group",
}


def test_the_document_lists_exactly_the_kinds_in_the_code() -> None:
    assert trace_catalog.with_catalog(DOC.read_text()) == DOC.read_text(), (
        "docs/trace-events.md is out of date: run `python -m mailbus.trace_catalog`"
    )


def test_every_kind_has_a_documented_when() -> None:
    for kind in trace_catalog.all_kinds().values():
        assert kind.doc.strip(), f"{kind.value} has no documentation"
        assert not kind.doc.startswith("|"), kind.value


def test_no_kind_is_spelt_outside_the_catalog() -> None:
    """A kind written as a bare string must at least be one the catalog defines, so a
    renamed kind cannot leave a silent reader or writer behind."""
    known = set(trace_catalog.all_kinds())
    unknown = []
    for path in (ROOT / "core" / "mailbus").rglob("*.py"):
        for literal in LITERAL.findall(path.read_text()):
            if literal not in known | NOT_KINDS and not literal.endswith(".md"):
                unknown.append(f"{path.relative_to(ROOT)}: {literal}")
    assert not unknown


def test_a_kind_defined_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailbus.event_kind import EventKind

    class Twice(EventKind):
        PUBLISHED = ("message.published", "again")

    monkeypatch.setattr(trace_catalog, "AREAS", (*trace_catalog.AREAS, ("Twice", Twice, "")))
    with pytest.raises(ValueError, match="defined twice"):
        trace_catalog.all_kinds()


def test_a_kind_is_its_string_and_keeps_its_doc() -> None:
    assert Kind.PUBLISHED == "message.published" and Kind("message.published") is Kind.PUBLISHED
    assert f"{Kind.ERROR}" == "error" and "publisher sent" in Kind.PUBLISHED.doc


def test_the_tracer_takes_exactly_the_event_fields() -> None:
    fields = [f.name for f in dataclasses.fields(TraceEvent)]
    parameters = list(inspect.signature(Tracer.event).parameters)
    assert parameters[1:] == [fields[0], *fields[2:]]  # self, kind, then all but time_ns
    tracer = Tracer()
    got: list[TraceEvent] = []
    tracer.add_listener(got.append)
    tracer.event(Kind.ERROR, name="n", detail="d", raw=b"x", sequence_number=3)
    assert (got[0].kind, got[0].name, got[0].detail, got[0].raw, got[0].sequence_number) == (
        "error",
        "n",
        "d",
        b"x",
        3,
    )
    with pytest.raises(TypeError):
        Tracer().event(Kind.ERROR, detial="misspelt")  # type: ignore[call-arg]  # no listener
