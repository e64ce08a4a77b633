"""The engine host: demo or attached by options file; publish and call from any thread."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from mailbus.errors import ConfigError, InvalidNameError, ServiceTimeoutError
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.state import WorkbenchModel
from waiting import eventually


def test_publish_and_call_from_many_threads(engine: EngineHost) -> None:
    model = WorkbenchModel(wait_sets=engine.wait_sets)
    engine.add_listener(model.feed.listener)
    results: list[str] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            engine.publish("load/t", str(i))
            results.append(engine.call("echo", f"abc{i}", 2.0).response.body)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    assert sorted(results) == sorted(f"{i}cba" for i in range(8))
    model.pump()
    assert model.topics.stats["load/t"].count == 8
    assert len(model.services) == 8


def test_call_without_server_times_out_and_bad_names_are_refused(engine: EngineHost) -> None:
    with pytest.raises(ServiceTimeoutError):
        engine.call("silent", "x", 0.05)
    with pytest.raises(InvalidNameError):
        engine.publish("bad\ntopic", "x")


def test_from_config_reads_the_environment_like_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "env.toml"
    path.write_text('transport = "inprocess"\nfrom = "env@example.org"\n')
    monkeypatch.setenv("MAILBUS_CONFIG_FILE", str(path))
    host = EngineHost.from_config(None)
    assert host.demo is None and "env@example.org" in host.description
    monkeypatch.setenv("MAILBUS_CONFIG_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="no such file"):
        EngineHost.from_config(None)


def test_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAILBUS_CONFIG_FILE", raising=False)
    assert EngineHost.from_config(None).demo is not None
    path = tmp_path / "o.toml"
    path.write_text('transport = "inprocess"\n[workbench]\nhistory-cap = 7\n')
    host = EngineHost.from_config(path)
    assert host.demo is None
    assert host.options.sections["workbench"]["history-cap"] == 7
    assert "inprocess" in host.description
    path.write_text('transport = "pigeon"\n')
    with pytest.raises(ConfigError):
        EngineHost.from_config(path)


def test_demo_engine_runs_and_stops() -> None:
    host = EngineHost(seed=1)
    model = WorkbenchModel(wait_sets=host.wait_sets)
    host.add_listener(model.feed.listener)
    traced = threading.Event()  # set after the feed has queued each event
    host.add_listener(lambda _event: traced.set())
    host.start()
    try:

        def demo_seen() -> bool:
            model.pump()
            return len(model.topics.stats) >= 3 and len(model.services) >= 1

        eventually(demo_seen, 10, "three topics and a service", wake=traced)
        assert {"robot/pose", "sensors/temperature"} <= set(model.topics.stats)
        assert len(model.services) >= 1
        names = [r.name for r in model.wait_sets.ordered()]
        assert names == [
            "broker bridge from robot/log",
            "broker bridge from robot/pose",
            "demo/server",
        ]
    finally:
        host.stop()
    assert not host.context.is_initialized
    assert host.brokers["broker 1"].snapshot().destroyed
