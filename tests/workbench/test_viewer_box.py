"""A PostOffice box of its own for each `mailbus serve` viewer: the name, the options and
the clean-up, over a real daemon (the two-browser test is in test_serve_browser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.options import Options, options_from_mapping
from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.protocol import IDENTIFIER
from mailbus.postoffice.server import ServerConfig, ServerThread
from mailbus.postoffice.store import HashParams
from mailbus.postoffice.transport import PostOfficeOptions
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.viewer_box import remove_viewer_boxes, viewer_box, viewer_options

ENV = {"MAILBUS_POSTOFFICE_PASSWORD": "pw"}


def postoffice(port: int = 8228, **table: object) -> Options:
    return options_from_mapping(
        {"transport": "postoffice", "postoffice": {"port": port, "box": "lab.workbench", **table}},
        ENV,
    )


def test_each_viewer_gets_a_valid_box_under_the_same_group() -> None:
    options = postoffice(create=False)
    first, second = viewer_options(options), viewer_options(options)
    names = [viewer_box(first), viewer_box(second)]
    assert names[0] != names[1]
    for option, name in zip((first, second), names, strict=True):
        assert name is not None and name.startswith("lab.workbenchv")
        assert IDENTIFIER.fullmatch(name)
        opts = PostOfficeOptions.from_options(option, ENV)
        # The same parent: the daemon delivers the group's letters to it.
        assert opts.group == "lab" and opts.create
    assert viewer_box(viewer_options(options, "1")) == "lab.workbenchv1"
    assert options.sections["postoffice"]["box"] == "lab.workbench"  # not changed


def test_other_transports_are_left_alone() -> None:
    options = Options(transport="inprocess")
    assert viewer_options(options) is options
    assert viewer_box(options) is None and remove_viewer_boxes(options) == []


def test_the_engine_of_a_viewer_uses_its_own_box(tmp_path: Path) -> None:
    path = tmp_path / "o.toml"
    path.write_text('transport = "postoffice"\n[postoffice]\nbox = "lab.workbench"\n')
    assert "box lab.workbench" in EngineHost.from_config(path).description
    viewer = EngineHost.from_config(path, viewer=True)
    assert viewer.viewer and "box lab.workbenchv" in viewer.description


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    # The transport (and so the clean-up) reads the password from the environment.
    monkeypatch.setenv("MAILBUS_POSTOFFICE_PASSWORD", "pw")
    server = ServerThread(
        ServerConfig(store_path=tmp_path / "po.db", port=0, hash_params=HashParams(log2_n=4))
    )
    server.start()
    yield server
    server.stop()


def test_a_closed_viewer_removes_its_boxes_and_no_other(daemon: ServerThread) -> None:
    options = viewer_options(postoffice(daemon.port), "ab12")
    with PostOfficeClient("127.0.0.1", daemon.port, timeout=10) as client:
        for name in ("lab.workbenchvab12", "lab.workbenchvab12.out", "lab.workbench"):
            client.create_box(name, "pw")
    assert remove_viewer_boxes(options) == ["lab.workbenchvab12", "lab.workbenchvab12.out"]
    with PostOfficeClient("127.0.0.1", daemon.port, timeout=10) as client:
        client.check_out("lab.workbench", "pw")  # the configured box is still there
    assert remove_viewer_boxes(options) == []  # gone already: nothing to do, no error


def test_clean_up_with_the_daemon_down_is_no_error(daemon: ServerThread) -> None:
    port = daemon.port
    daemon.stop()
    assert remove_viewer_boxes(viewer_options(postoffice(port), "ab12")) == []
