"""Gateway files: strict parsing, loaders (import path, entry point), building and
tearing down, the wildcard at run time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from broker_helpers import Recorder, wait_until
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.broker import (
    Backpressure,
    BrokerError,
    Gateway,
    GatewayConfigError,
    LinkSpec,
    ModuleSpec,
    ModuleStartError,
    Overflow,
    parse_gateway,
)
from mailbus.broker import gateway as gateway_module
from mailbus.broker.gateway import load_gateway_file, parse_gateway_json
from mailbus.broker.samples import Counter, Ticker

TICKER = "mailbus.broker.samples:Ticker"
COUNTER = "mailbus.broker.samples:Counter"

# Instances made by `make_recorder`, so tests can look at modules a gateway built.
MADE: list[Recorder] = []


def make_recorder(broker: object, args: Any) -> Recorder:
    recorder = Recorder()
    MADE.append(recorder)
    return recorder


def explode(broker: object, args: Any) -> Recorder:
    raise RuntimeError("cannot create")


class StartFails(Recorder):
    def start(self) -> None:
        raise OSError("start failed")


def test_a_full_description_parses() -> None:
    spec = parse_gateway(
        {
            "modules": [
                {"name": "t", "loader": TICKER, "args": {"count": 1}},
                {
                    "name": "c",
                    "loader": {"name": "python", "entrypoint": COUNTER},
                    "capacity": 50,
                    "backpressure": {"overflow": "drop_oldest"},
                },
                {"name": "e", "loader": {"name": "entry_point", "entrypoint": "counter"}},
            ],
            "links": [
                {"source": "t", "sink": "c", "backpressure": {"timeout": None}},
                {"source": "*", "sink": "e"},
            ],
        }
    )
    assert spec.modules == (
        ModuleSpec("t", "python", TICKER, {"count": 1}),
        ModuleSpec("c", "python", COUNTER, None, 50, Backpressure(Overflow.DROP_OLDEST)),
        ModuleSpec("e", "entry_point", "counter"),
    )
    assert spec.links == (LinkSpec("t", "c", Backpressure(timeout=None)), LinkSpec("*", "e"))


def _modules(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "loader": COUNTER} for n in names]


@pytest.mark.parametrize(
    ("data", "where", "problem"),
    [
        ([], "", "expected an object"),
        ({}, "", "missing key 'modules'"),
        ({"modules": [], "extra": 1}, "", "unknown key 'extra'"),
        ({"modules": {}}, "modules", "expected a list"),
        ({"modules": ["x"]}, "modules[0]", "expected an object"),
        ({"modules": [{"name": "a"}]}, "modules[0]", "missing key 'loader'"),
        ({"modules": [{"name": "*", "loader": COUNTER}]}, "modules[0].name", "reserved"),
        ({"modules": [{"name": "", "loader": COUNTER}]}, "modules[0].name", "empty"),
        ({"modules": [{"name": "a\nb", "loader": COUNTER}]}, "modules[0].name", "control"),
        ({"modules": [{"name": 5, "loader": COUNTER}]}, "modules[0].name", "expected a string"),
        ({"modules": _modules("a", "a")}, "modules[1].name", "duplicate module name 'a'"),
        (
            {"modules": [{"name": "a", "loader": {"name": "native", "entrypoint": "x"}}]},
            "modules[0].loader.name",
            "not a loader",
        ),
        (
            {"modules": [{"name": "a", "loader": {"name": "python"}}]},
            "modules[0].loader",
            "missing key 'entrypoint'",
        ),
        (
            {"modules": [{"name": "a", "loader": COUNTER, "capacity": 0}]},
            "modules[0].capacity",
            "integer",
        ),
        (
            {"modules": [{"name": "a", "loader": COUNTER, "capacity": True}]},
            "modules[0].capacity",
            "integer",
        ),
        (
            {
                "modules": [
                    {"name": "a", "loader": COUNTER, "backpressure": {"overflow": "sometimes"}}
                ]
            },
            "modules[0].backpressure.overflow",
            "not one of",
        ),
        (
            {"modules": [{"name": "a", "loader": COUNTER, "backpressure": {"timeout": -1}}]},
            "modules[0].backpressure.timeout",
            ">= 0",
        ),
        (
            {"modules": [{"name": "a", "loader": COUNTER, "backpressure": {"timeout": "1"}}]},
            "modules[0].backpressure.timeout",
            "a number",
        ),
        ({"modules": _modules("a"), "links": {}}, "links", "expected a list"),
        (
            {"modules": _modules("a"), "links": [{"source": "a"}]},
            "links[0]",
            "missing key 'sink'",
        ),
        (
            {"modules": _modules("a"), "links": [{"source": "b", "sink": "a"}]},
            "links[0].source",
            "no module named 'b'",
        ),
        (
            {"modules": _modules("a"), "links": [{"source": "a", "sink": "b"}]},
            "links[0].sink",
            "no module named 'b'",
        ),
        (
            {"modules": _modules("a"), "links": [{"source": "a", "sink": "*"}]},
            "links[0].sink",
            "only be a link's source",
        ),
        (
            {"modules": _modules("a"), "links": [{"source": "a", "sink": "a"}]},
            "links[0]",
            "itself",
        ),
        (
            {"modules": _modules("a", "b"), "links": [{"source": "a", "sink": "b"}] * 2},
            "links[1]",
            "duplicate link 'a' -> 'b'",
        ),
        (
            {
                "modules": _modules("a", "b"),
                "links": [{"source": "*", "sink": "b"}, {"source": "a", "sink": "b"}],
            },
            "links[1]",
            "every module",
        ),
        (
            {
                "modules": _modules("a", "b"),
                "links": [{"source": "a", "sink": "b"}, {"source": "*", "sink": "b"}],
            },
            "links[1]",
            "overlaps",
        ),
    ],
)
def test_bad_descriptions_name_the_place(data: Any, where: str, problem: str) -> None:
    with pytest.raises(GatewayConfigError) as caught:
        parse_gateway(data)
    assert caught.value.where == where
    assert problem in caught.value.problem


def test_bad_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(GatewayConfigError, match="cannot read"):
        load_gateway_file(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"modules": [\n  {"name": "a",}\n]}')
    with pytest.raises(GatewayConfigError, match=r"not valid JSON: .* line 2"):
        load_gateway_file(broken)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"modules": [], "x": "\xe9"}')
    with pytest.raises(GatewayConfigError, match=r"not UTF-8 text"):
        load_gateway_file(latin)
    twice = tmp_path / "twice.json"
    twice.write_text('{"modules": [], "modules": []}')
    with pytest.raises(GatewayConfigError, match="'modules' appears twice"):
        load_gateway_file(twice)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"modules": []}) + " " * 100)
    monkeypatch.setattr(gateway_module, "MAX_FILE_SIZE", 50)
    with pytest.raises(GatewayConfigError, match="over the 50 byte limit"):
        load_gateway_file(big)
    with pytest.raises(GatewayConfigError, match="not valid JSON"):
        parse_gateway_json("")


def test_a_gateway_runs_and_tears_down(tmp_path: Path) -> None:
    MADE.clear()
    path = tmp_path / "gateway.json"
    path.write_text(
        json.dumps(
            {
                "modules": [
                    {"name": "tick", "loader": TICKER, "args": {"count": 5, "period_s": 0}},
                    {"name": "sink", "loader": f"{__name__}:make_recorder"},
                ],
                "links": [{"source": "tick", "sink": "sink"}],
            }
        )
    )
    gateway = Gateway.from_file(path).start()
    sink = MADE[0]
    # Ticker publishes from start(), which runs only once the link exists: all 5 arrive.
    assert wait_until(lambda: len(sink.messages) == 5)
    assert [m.properties["seq"] for m in sink.messages] == ["0", "1", "2", "3", "4"]
    assert sink.started == 1
    snapshot = gateway.snapshot()
    assert [m.name for m in snapshot.modules] == ["tick", "sink"]
    assert snapshot.module("tick").published == 5
    final = gateway.close()
    assert [(s.name, s.state, s.delivered) for s in final] == [
        ("tick", "stopped", 0),
        ("sink", "stopped", 5),
    ]
    assert sink.destroyed == 1
    assert gateway.close() == ()
    assert gateway.broker.destroyed


def test_wildcard_in_a_running_gateway_reaches_modules_added_later() -> None:
    gateway = Gateway.from_dict(
        {
            "modules": [
                {"name": "a", "loader": TICKER, "args": {"count": 3, "period_s": 0}},
                {"name": "hub", "loader": COUNTER},
            ],
            "links": [{"source": "*", "sink": "hub"}],
        }
    )
    with gateway:
        hub = gateway.broker.module("hub")
        assert isinstance(hub, Counter)
        assert wait_until(lambda: hub.count == 3)
        gateway.add_module(ModuleSpec("b", "python", TICKER, {"count": 2, "period_s": 0}))
        assert wait_until(lambda: hub.count == 5)
        assert isinstance(gateway.broker.module("b"), Ticker)
        gateway.remove_module("b")
        assert gateway.broker.module_names() == ["a", "hub"]


def test_a_factory_that_raises_tears_down_what_was_built() -> None:
    MADE.clear()
    gateway = Gateway.from_dict(
        {
            "modules": [
                {"name": "first", "loader": f"{__name__}:make_recorder"},
                {"name": "second", "loader": f"{__name__}:explode"},
            ]
        }
    )
    with pytest.raises(BrokerError, match="module 'second': creating it failed"):
        gateway.start()
    assert MADE[0].destroyed == 1
    assert gateway.broker.destroyed


def test_a_start_that_raises_tears_down() -> None:
    gateway = Gateway.from_dict({"modules": [{"name": "s", "loader": f"{__name__}:StartFails"}]})
    with pytest.raises(ModuleStartError, match="start failed"):
        gateway.start()
    assert gateway.broker.destroyed


@pytest.mark.parametrize(
    ("loader", "problem"),
    [
        ("not a path", "not an import path"),
        ("os.path", "not an import path"),
        ("no_such_module_xyz:Thing", "cannot import"),
        ("mailbus.broker.samples:Nothing", "has no attribute"),
        ("mailbus.broker.samples:__doc__", "not callable"),
        ({"name": "entry_point", "entrypoint": "no-such-module-anywhere"}, "no entry point"),
        ({"name": "entry_point", "entrypoint": "bad name!"}, "not a valid entry point"),
    ],
)
def test_loader_errors(loader: Any, problem: str) -> None:
    gateway = Gateway.from_dict({"modules": [{"name": "m", "loader": loader}]})
    with pytest.raises(GatewayConfigError, match=problem) as caught:
        gateway.start()
    assert caught.value.where == "modules[0].loader"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[" * 100_000, ""),
        ('{"modules": ' * 100_000, ""),
        ('{"modules": [{"name": "m", "loader": "a:b", "args": ' + "[" * 100_000, ""),
    ],
    ids=["deep-list", "deep-object", "deep-args"],
)
def test_json_nested_too_deeply_is_a_config_error(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(GatewayConfigError, match="JSON nested too deeply") as caught:
        parse_gateway_json(text)
    assert caught.value.where == where
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(GatewayConfigError, match="nested too deeply") as caught:
        load_gateway_file(path)
    assert caught.value.where == str(path)


BROKEN_MODULES = {
    "gw_raises_at_import": ('raise RuntimeError("no config here")\n', "RuntimeError: no config"),
    "gw_bad_syntax": ("def broken(:\n", "SyntaxError: "),
    "gw_exits_at_import": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "gw_bad_getattr": (
        "def __getattr__(name):\n    raise KeyError(name)\n",
        "getting 'Thing' of 'gw_bad_getattr' failed: KeyError",
    ),
}


@pytest.mark.parametrize("module_name", sorted(BROKEN_MODULES))
def test_a_loader_module_that_fails_to_import_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module_name: str
) -> None:
    source, problem = BROKEN_MODULES[module_name]
    (tmp_path / f"{module_name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    gateway = Gateway.from_dict({"modules": [{"name": "m", "loader": f"{module_name}:Thing"}]})
    with pytest.raises(GatewayConfigError) as caught:
        gateway.start()
    assert caught.value.where == "modules[0].loader"
    assert problem in caught.value.problem
    assert gateway.broker.destroyed  # what was built is torn down


def test_entry_point_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed-distribution layout: importlib.metadata finds it on sys.path.
    dist = tmp_path / "fake_broker_modules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-broker-modules\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[mailbus.broker_modules]\nfake-counter = mailbus.broker.samples:Counter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    gateway = Gateway.from_dict(
        {
            "modules": [
                {"name": "t", "loader": TICKER, "args": {"count": 2, "period_s": 0}},
                {"name": "c", "loader": {"name": "entry_point", "entrypoint": "fake-counter"}},
            ],
            "links": [{"source": "t", "sink": "c"}],
        }
    )
    with gateway:
        counter = gateway.broker.module("c")
        assert isinstance(counter, Counter)
        assert wait_until(lambda: counter.count == 2)


def test_a_gateway_starts_once() -> None:
    gateway = Gateway.from_dict({"modules": []})
    with gateway, pytest.raises(BrokerError, match="already started"):
        gateway.start()


def test_close_lets_consumers_take_all_a_producer_published() -> None:
    gateway = Gateway.from_dict(
        {
            "modules": [
                {"name": "flood", "loader": TICKER, "args": {"period_s": 0}},
                {"name": "hub", "loader": COUNTER, "capacity": 100},
            ],
            "links": [{"source": "flood", "sink": "hub"}],
        }
    ).start()
    hub = gateway.broker.module("hub")
    assert isinstance(hub, Counter)
    assert wait_until(lambda: hub.count >= 500)
    flood, final_hub = gateway.close()
    assert flood.name == "flood" and final_hub.name == "hub"
    assert final_hub.delivered == flood.published == hub.count
    assert final_hub.dropped == 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "modules",
                    "links",
                    "name",
                    "loader",
                    "args",
                    "capacity",
                    "backpressure",
                    "source",
                    "sink",
                    "overflow",
                    "timeout",
                    "entrypoint",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@given(json_values)
@settings(max_examples=150, deadline=None)
def test_any_json_is_a_spec_or_a_config_error(data: Any) -> None:
    try:
        spec = parse_gateway(data)
    except GatewayConfigError as exc:
        assert exc.problem
        return
    names = [m.name for m in spec.modules]
    assert len(names) == len(set(names)) and "*" not in names
    assert all(link.sink in names and link.sink != link.source for link in spec.links)
