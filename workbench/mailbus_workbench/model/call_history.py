"""The Call view's history: its records, kept in a TOML file beside the templates so that
a restart brings them back."""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mailbus.errors import ConfigError, InvalidNameError
from mailbus.names import check_name

from mailbus_workbench.model.settings import MAX_TEMPLATE_BODY, toml_str

HISTORY = 200
# A long response is kept cut: the history file stays small and quick to write.
MAX_KEPT_RESPONSE = 10_000


@dataclass(frozen=True, slots=True)
class CallRecord:
    number: int
    service: str
    body: str
    timeout_s: float
    ok: bool
    response: str
    latency_s: float | None


def call_history_file(templates_file: Path) -> Path:
    return templates_file.with_name("call-history.toml")


def load_call_history(path: Path) -> list[CallRecord]:
    """`[[call]]` entries; a missing file is no history, a bad one a ConfigError."""
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the call history: {exc}") from None
    entries = data.get("call", [])
    if not isinstance(entries, list):
        raise ConfigError(str(path), "expected [[call]] entries")
    out: list[CallRecord] = []
    for i, entry in enumerate(entries[-HISTORY:]):
        where = f"{path}: call {i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(where, "expected a table")
        service, body = entry.get("service"), entry.get("body")
        timeout, ok = entry.get("timeout_s"), entry.get("ok")
        response, latency = entry.get("response", ""), entry.get("latency_s")
        if not isinstance(service, str):
            raise ConfigError(where, "needs a service")
        try:
            check_name(service, "service")
        except InvalidNameError as exc:
            raise ConfigError(where, str(exc)) from None
        if not isinstance(body, str) or len(body) > MAX_TEMPLATE_BODY:
            raise ConfigError(where, f"body must be text of at most {MAX_TEMPLATE_BODY} chars")
        if not _positive(timeout) or not isinstance(ok, bool):
            raise ConfigError(where, "needs timeout_s (seconds) and ok (true or false)")
        if not isinstance(response, str) or (latency is not None and not _positive(latency)):
            raise ConfigError(where, "response must be text and latency_s seconds")
        out.append(
            CallRecord(
                len(out) + 1,
                service,
                body,
                float(timeout),  # type: ignore[arg-type]
                ok,
                response,
                None if latency is None else float(latency),
            )
        )
    return out


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def save_call_history(path: Path, records: list[CallRecord]) -> None:
    """Write the last HISTORY records atomically (temp file + rename)."""
    lines: list[str] = []
    for r in records[-HISTORY:]:
        lines += [
            "[[call]]",
            f"service = {toml_str(r.service)}",
            f"body = {toml_str(r.body)}",
            f"timeout_s = {r.timeout_s!r}",
            f"ok = {'true' if r.ok else 'false'}",
            f"response = {toml_str(r.response[:MAX_KEPT_RESPONSE])}",
        ]
        if r.latency_s is not None:
            lines.append(f"latency_s = {r.latency_s!r}")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines), "utf-8")
    os.replace(tmp, path)
