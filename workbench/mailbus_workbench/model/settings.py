"""The workbench's own settings, templates and keymap files (TOML).

Settings come from the `[workbench]` table of the options file; the keymap and the
publish templates live in files of their own so that the workbench can write them."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailbus.errors import ConfigError, InvalidNameError
from mailbus.names import check_name

from mailbus_workbench.model.topics import DEFAULT_HISTORY_CAP, MAX_HISTORY_CAP

MAX_TEMPLATE_BODY = 1_000_000
_KEY = re.compile(r"^[a-z0-9_+\-]+(,[a-z0-9_+\-]+)*$")


def config_dir() -> Path:
    """MAILBUS_WORKBENCH_DIR, else $XDG_CONFIG_HOME/mailbus, else ~/.config/mailbus."""
    explicit = os.environ.get("MAILBUS_WORKBENCH_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mailbus"


@dataclass(frozen=True, slots=True)
class Settings:
    history_cap: int = DEFAULT_HISTORY_CAP
    refresh_hz: float = 10.0
    service_timeout_s: float = 2.0
    theme: str = "textual-dark"
    keymap_file: Path = field(default_factory=lambda: config_dir() / "keymap.toml")
    templates_file: Path = field(default_factory=lambda: config_dir() / "templates.toml")
    postoffice_store: Path | None = None  # None: the daemon's default store file
    speed_tricks: bool = True  # mailbus_workbench.speed
    tests_folder: Path = Path("tests")  # the Tests view's, relative to the working directory


def settings_from(section: Mapping[str, Any] | None) -> Settings:
    """Settings from an options file's `[workbench]` table; ConfigError on bad values."""
    section = dict(section or {})
    base = Settings()
    known = {
        "history-cap",
        "refresh-hz",
        "service-timeout",
        "theme",
        "keymap",
        "templates",
        "postoffice-store",
        "speed-tricks",
        "tests-folder",
    }
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError("workbench", f"unknown keys {', '.join(unknown)}")

    def number(key: str, default: float, low: float, high: float) -> float:
        value = section.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            raise ConfigError(f"workbench.{key}", f"expected a number from {low} to {high}")
        return float(value)

    def path(key: str, default: Path) -> Path:
        value = section.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value or "\x00" in value:
            raise ConfigError(f"workbench.{key}", "expected a file path")
        return Path(value).expanduser()

    speed = section.get("speed-tricks", base.speed_tricks)
    if not isinstance(speed, bool):
        raise ConfigError("workbench.speed-tricks", "expected true or false")
    theme = section.get("theme", base.theme)
    if not isinstance(theme, str):
        raise ConfigError("workbench.theme", "expected a theme name")
    return Settings(
        history_cap=int(number("history-cap", base.history_cap, 1, MAX_HISTORY_CAP)),
        refresh_hz=number("refresh-hz", base.refresh_hz, 1, 60),
        service_timeout_s=number("service-timeout", base.service_timeout_s, 0.01, 3600),
        theme=theme,
        keymap_file=path("keymap", base.keymap_file),
        templates_file=path("templates", base.templates_file),
        postoffice_store=path("postoffice-store", None),  # type: ignore[arg-type]
        speed_tricks=speed,
        tests_folder=path("tests-folder", base.tests_folder),
    )


def load_keymap(path: Path, known_ids: set[str]) -> dict[str, str]:
    """`[keys]` table of binding id -> keys ("f5" or "f5,ctrl+r"). A missing file is an
    empty keymap; anything else wrong is a ConfigError naming the entry."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the keymap: {exc}") from None
    keys = data.get("keys", {})
    if not isinstance(keys, dict):
        raise ConfigError(str(path), '[keys] must be a table of binding id = "key"')
    keymap: dict[str, str] = {}
    for binding_id, value in keys.items():
        if binding_id not in known_ids:
            raise ConfigError(
                f"{path}: keys.{binding_id}",
                f"no such binding; known: {', '.join(sorted(known_ids))}",
            )
        if not isinstance(value, str) or not _KEY.fullmatch(value.replace(" ", "")):
            raise ConfigError(f"{path}: keys.{binding_id}", f"not a key list: {value!r}")
        keymap[binding_id] = value.replace(" ", "")
    return keymap


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    topic: str
    body: str


def load_templates(path: Path) -> list[Template]:
    """`[[template]]` entries with name, topic and body. A missing file is no templates."""
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the templates: {exc}") from None
    entries = data.get("template", [])
    if not isinstance(entries, list):
        raise ConfigError(str(path), "expected [[template]] entries")
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}: template {i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(where, "expected a table")
        name, topic, body = entry.get("name"), entry.get("topic"), entry.get("body", "")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(where, "needs a name")
        if not isinstance(topic, str):
            raise ConfigError(where, "needs a topic")
        if not isinstance(body, str) or len(body) > MAX_TEMPLATE_BODY:
            raise ConfigError(where, f"body must be text of at most {MAX_TEMPLATE_BODY} chars")
        try:
            check_name(topic, "topic")
        except InvalidNameError as exc:
            raise ConfigError(where, str(exc)) from None
        out.append(Template(name.strip(), topic, body))
    return out


def save_templates(path: Path, templates: list[Template]) -> None:
    """Write the templates atomically (temp file + rename)."""
    lines = []
    for t in templates:
        lines += [
            "[[template]]",
            f"name = {toml_str(t.name)}",
            f"topic = {toml_str(t.topic)}",
            f"body = {toml_str(t.body)}",
            "",
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines), "utf-8")
    os.replace(tmp, path)


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_str(value: str) -> str:
    """A TOML basic string: escapes for quotes, backslashes and control characters."""
    out = []
    for ch in value:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
