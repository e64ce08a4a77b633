"""One vocabulary of trace events: every kind is an enum member with
its documentation and its declared `extra` keys, docs/trace-events.md is generated from
them, the tracer's fields are TraceEvent's, and an `extra` key a kind does not declare
is found: statically in the product code's literals, and at run time in every event the
test suite emits (tests/conftest.py)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus import trace_catalog
from mailbus.event_kind import EventKind, conforms, type_name
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


# -- declared `extra` keys --------------------------------------------------------------

SOURCES = [ROOT / "core" / "mailbus", ROOT / "workbench" / "mailbus_workbench"]


def literal_extra_problems(source: str, where: str) -> tuple[int, list[str]]:
    """The static half of the check: in `source`, each call naming a kind (`Kind.X`,
    `MailKind.X`, or a module alias of either) with `extra={...}` written out. Returns
    how many such calls it read and what they get wrong (keys, and literal values)."""
    enums = {enum.__name__: enum for _, enum, _ in trace_catalog.AREAS}
    tree = ast.parse(source)
    aliases: dict[str, object] = {}
    for node in tree.body:  # `OVERSIZED = MailKind.OVERSIZED`, `E = StemKind`
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            resolved = _resolve(node.value, enums, aliases)
            if isinstance(target, ast.Name) and resolved is not None:
                aliases[target.id] = resolved
    seen, problems = 0, []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        extra = next((k.value for k in call.keywords if k.arg == "extra"), None)
        kinds = [_resolve(a, enums, aliases) for a in call.args[:1]]
        kinds += [_resolve(k.value, enums, aliases) for k in call.keywords if k.arg == "kind"]
        kind = next((k for k in kinds if isinstance(k, EventKind)), None)
        if extra is None or kind is None:
            continue
        seen += 1
        for literal in _dicts(extra):
            written = {
                key.value: ast.literal_eval(value) if isinstance(value, ast.Constant) else None
                for key, value in zip(literal.keys, literal.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
            for key, value in written.items():
                checked = {key: value} if value is not None else {}
                declared = key in kind.extra
                found = kind.extra_problems(checked) if declared else [f"{kind.value}: {key!r}"]
                problems += [f"{where}:{call.lineno}: {p}" for p in found]
    return seen, problems


def _resolve(
    node: ast.expr, enums: dict[str, type[EventKind]], aliases: dict[str, object]
) -> object:
    if isinstance(node, ast.Name):
        return enums.get(node.id) or aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, enums, aliases)
        if isinstance(owner, type) and issubclass(owner, EventKind):
            return owner.__members__.get(node.attr)
    return None


def _dicts(node: ast.expr) -> Iterator[ast.Dict]:
    """The dict literals an `extra=` expression is made of (`{...} | {...}` included)."""
    if isinstance(node, ast.Dict):
        yield node
    elif isinstance(node, ast.BinOp):
        yield from _dicts(node.left)
        yield from _dicts(node.right)
    elif isinstance(node, ast.IfExp):
        yield from _dicts(node.body)
        yield from _dicts(node.orelse)


@pytest.mark.slow
def test_every_extra_written_out_in_the_product_code_is_declared() -> None:
    seen, problems = 0, []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            count, found = literal_extra_problems(path.read_text(), str(path.relative_to(ROOT)))
            seen, problems = seen + count, problems + found
    assert seen >= 40, f"only {seen} calls with a kind and extra={{...}}: is the scan blind?"
    assert not problems


def test_the_static_check_finds_a_misspelt_or_mistyped_key() -> None:
    source = (
        "from mailbus.trace import Kind\n"
        "from mailbus.mail.kinds import MailKind\n"
        "SKIPPED = Kind.SKIPPED\n"
        "tracer.event(Kind.WAIT_STARTED, extra={'timeout': t})\n"
        "tracer.event(SKIPPED, detail='x', extra={'origin': 'uid:1', 'reason': 3})\n"
        "trace(MailKind.OVERSIZED, extra={'origin': o} | ({'sise': s} if s else {}))\n"
        "tracer.event(Kind.ERROR, extra={'retry_in_s': delay})\n"
    )
    seen, problems = literal_extra_problems(source, "x.py")
    assert seen == 4
    assert problems == [
        "x.py:4: wait.started: 'timeout'",
        "x.py:5: email.skipped: extra['reason'] = 3 is not str",
        "x.py:6: mail.oversized: 'sise'",
    ]


def test_an_emitted_event_with_a_misspelt_or_mistyped_key_is_caught(extra_check: Any) -> None:
    """The run-time half (tests/conftest.py wraps the tracer for the whole suite): it
    sees events with no listener too, and those built by hand and emitted."""
    tracer = Tracer()
    tracer.event(Kind.WAIT_STARTED, name="w", extra={"timeout": 1.0})  # no listener
    tracer.add_listener(lambda event: None)
    tracer.emit(TraceEvent(Kind.ERROR, 0, extra={"retry_in_s": "soon"}))
    tracer.event(Kind.WAIT_TIMED_OUT, extra={"timeout_s": 0.5})  # declared: fine
    assert extra_check.take() == [
        "wait.started: extra key 'timeout' is not declared",
        "error: extra['retry_in_s'] = 'soon' is not float",
    ]


@pytest.mark.slow
def test_a_test_that_emits_an_undeclared_key_fails(tmp_path: Path) -> None:
    """End to end: the suite's conftest, a test that emits a misspelt key: it errors."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_misspelt.py").write_text(
        "from mailbus.trace import Kind, Tracer\n\n"
        "def test_misspelt():\n"
        "    Tracer().event(Kind.ERROR, extra={'retry_in': 1.0})\n\n"
        "def test_declared():\n"
        "    Tracer().event(Kind.ERROR, extra={'retry_in_s': 1.0})\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    # The test body runs through; the check fails it at teardown (an error), and only it.
    assert "2 passed, 1 error" in run.stdout, run.stdout + run.stderr
    assert "ERROR test_misspelt.py::test_misspelt" in run.stdout
    assert "error: extra key 'retry_in' is not declared" in run.stdout


def test_each_declared_type_is_one_the_check_understands() -> None:
    samples: dict[str, object] = {}
    for kind in trace_catalog.all_kinds().values():
        for key, declared in kind.extra.items():
            assert declared.type is not None, f"{kind.value}: {key}"
            samples[f"{kind.value}.{key}"] = type_name(declared.type)
    assert samples["email.skipped.origin"] == "str"
    assert samples["mail.send_rejected.smtp_codes"] == "list[int]"
    assert samples["postoffice.letter_in.to"] == "str | None"


@pytest.mark.parametrize(
    ("value", "declared", "ok"),
    [
        (1, float, True),
        (True, int, False),
        (None, str | None, True),
        (["a"], list[str], True),
        ([1], list[str], False),
        (("a", "b"), tuple[str, ...], True),
        ("ab", list[str], False),
        ({"k": [1]}, dict[str, object], True),
        ({1: "v"}, dict[str, object], False),
    ],
)
def test_conforms(value: object, declared: object, ok: bool) -> None:
    assert conforms(value, declared) is ok
