"""Settings, keymap and template files: good ones load, bad ones say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.errors import ConfigError
from mailbus_workbench.model.settings import (
    Template,
    config_dir,
    load_keymap,
    load_templates,
    save_templates,
    settings_from,
)


def test_settings_from_workbench_table(tmp_path: Path) -> None:
    s = settings_from(
        {
            "history-cap": 50,
            "refresh-hz": 4,
            "service-timeout": 0.5,
            "theme": "nord",
            "keymap": str(tmp_path / "k.toml"),
        }
    )
    assert (s.history_cap, s.refresh_hz, s.service_timeout_s, s.theme) == (50, 4.0, 0.5, "nord")
    assert s.keymap_file == tmp_path / "k.toml"
    assert settings_from(None).history_cap == 500


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ({"history-cap": 0}, "workbench.history-cap"),
        ({"history-cap": True}, "workbench.history-cap"),
        ({"refresh-hz": "fast"}, "workbench.refresh-hz"),
        ({"service-timeout": -1}, "workbench.service-timeout"),
        ({"theme": 3}, "workbench.theme"),
        ({"keymap": ""}, "workbench.keymap"),
        ({"colour": "red"}, "workbench"),
    ],
)
def test_bad_settings_name_the_key(section: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from(section)
    assert where in str(info.value)


def test_config_dir_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MAILBUS_WORKBENCH_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config_dir() == tmp_path / "mailbus"


def test_keymap_file(tmp_path: Path) -> None:
    path = tmp_path / "keymap.toml"
    assert load_keymap(path, {"topics.pause"}) == {}  # no file, no overrides
    path.write_text('[keys]\n"topics.pause" = "z, f8"\n')
    assert load_keymap(path, {"topics.pause"}) == {"topics.pause": "z,f8"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[keys]\n"nope" = "z"\n', "no such binding"),
        ('[keys]\n"topics.pause" = 3\n', "not a key list"),
        ('[keys]\n"topics.pause" = "ctrl+\\n"\n', "not a key list"),
        ("keys = 1\n", "[keys] must be a table"),
        ("[keys\n", "cannot read the keymap"),
    ],
)
def test_bad_keymap_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_keymap(path, {"topics.pause"})
    assert message in str(info.value)


def test_templates_round_trip_any_text(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "templates.toml"
    templates = [
        Template("json", "sensors/t", '{"c": 21.5, "q": "say \\"hi\\""}'),
        Template("odd", "a/b", 'line one\nline two\ttab \x7f del \u00e9t\u00e9 \U0001f600 """'),
    ]
    save_templates(path, templates)
    assert load_templates(path) == templates
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[template]]\ntopic = 'a'\n", "needs a name"),
        ("[[template]]\nname = 'x'\n", "needs a topic"),
        ("[[template]]\nname = 'x'\ntopic = \"a\\r\\nBcc: y\"\n", "control character"),
        ("[[template]]\nname = 'x'\ntopic = 'a'\nbody = 3\n", "body must be text"),
        ("template = 3\n", "expected [[template]]"),
        ("[[template]\n", "cannot read the templates"),
    ],
)
def test_bad_template_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "templates.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_templates(path)
    assert message in str(info.value)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(name=st.text(min_size=1).filter(str.strip), body=st.text())
def test_any_template_text_survives_the_file(name: str, body: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.toml"
        save_templates(path, [Template(name.strip(), "a/b", body)])
        assert load_templates(path) == [Template(name.strip(), "a/b", body)]
