"""What `mailbus foxglove` serves: the system of an options file, the built-in demo, or a
recorded session played out (with the player's controls as services), behind one
FoxgloveServer. The command, the notebook and the workbench's palette all start this."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mailbus.context import Context
from mailbus.errors import ConfigError, InvalidNameError
from mailbus.foxglove.server import SEND_QUEUE, FoxgloveError, FoxgloveServer, LocalService
from mailbus.names import check_name
from mailbus.options import Options, load_options, options_from_mapping

if TYPE_CHECKING:
    from mailbus.demo import DemoSystem
    from mailbus.sessions.player import Player

DEMO_NAME = "demo"
PLAYER_PREFIX = "_mailbus/player/"
NO_AUTH_WARNING = (
    "the Foxglove WebSocket protocol has no authentication: anyone who can reach {host}:{port}"
    " reads every topic{extra}. Prefer the loopback default and an SSH tunnel"
    " (docs/foxglove.md)."
)


def declared_schemas(options: Options) -> dict[str, str]:
    """The options file's `[foxglove.schemas]`: topic = a JSON Schema, inline (a table)
    or the path of a JSON file; ConfigError naming the first one that is not."""
    table = options.sections.get("foxglove", {})
    unknown = set(table) - {"schemas"}
    if unknown:
        raise ConfigError(f"foxglove.{sorted(unknown)[0]}", "unknown key (known: schemas)")
    schemas = table.get("schemas", {})
    if not isinstance(schemas, dict):
        raise ConfigError("foxglove.schemas", "expected a table of topic = schema")
    out: dict[str, str] = {}
    for topic, schema in schemas.items():
        key = f"foxglove.schemas.{topic}"
        try:
            check_name(topic)
        except InvalidNameError as exc:
            raise ConfigError(key, str(exc)) from None
        if isinstance(schema, str):
            try:
                schema = json.loads(Path(schema).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    key, f"cannot read a JSON Schema from {schema!r}: {exc}"
                ) from None
        if not isinstance(schema, dict):
            raise ConfigError(key, "a JSON Schema is an object (a table, or a JSON file of one)")
        out[topic] = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    return out


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int, allow_calls: bool, allow_publish: bool) -> str | None:
    """The warning to print when `host` is not a loopback address; None when it is."""
    if is_loopback(host):
        return None
    powers = [w for w, on in (("calls services", allow_calls), ("publishes", allow_publish)) if on]
    extra = f" and {' and '.join(powers)}" if powers else ""
    return NO_AUTH_WARNING.format(host=host, port=port, extra=extra)


class ServedSystem:
    """A context of its own (options file, demo or session) served at ws://host:port."""

    def __init__(
        self,
        *,
        config: str | Path | None = None,
        demo: bool = False,
        speed: float = 1.0,
        session: str | Path | None = None,
        rate: float = 1.0,
        loop: bool = False,
        paused: bool = False,
        host: str = "127.0.0.1",
        port: int = 8765,
        allow_calls: bool = False,
        allow_publish: bool = False,
        send_queue: int = SEND_QUEUE,
        notes: Callable[[str], None] | None = None,
    ) -> None:
        if sum((demo, session is not None, config is not None)) > 1:
            raise FoxgloveError("give one of --config, --demo and --session")
        self.session = None if session is None else Path(session)
        if self.session is not None and not self.session.is_dir():
            raise FoxgloveError(f"no session directory {str(self.session)!r}")
        if demo or self.session is not None:
            # In-process: the demo's participants, or the replay, live in this context.
            name = DEMO_NAME if demo else "replay"
            options = options_from_mapping({"announce-period-s": 1.0, "name": name})
        else:
            options = load_options(None if config is None else str(config))
        self.context = Context(options)
        self.demo: DemoSystem | None = None
        self.player: Player | None = None
        self._demo_wanted = demo
        self._demo_speed = speed
        self._player_args: dict[str, Any] = {"rate": rate, "loop": loop}
        self._paused = paused
        self.server = FoxgloveServer(
            self.context,
            host=host,
            port=port,
            allow_calls=allow_calls,
            allow_publish=allow_publish,
            send_queue=send_queue,
            local_services=self._player_services() if self.session is not None else None,
            schemas=declared_schemas(options),
            name=f"mailbus {'demo' if demo else 'replay' if session else options.transport}",
            notes=notes,
        )

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> ServedSystem:
        self.context.init()
        try:
            if self.session is not None:
                from mailbus.sessions.player import Player

                # Made (and, paused, started) before the server listens: a client's first
                # call to the player's services finds it.
                self.player = Player(str(self.session), self.context, **self._player_args)
                if self._paused:
                    self.player.start(paused=True)
            self.server.start()
            if self._demo_wanted:
                from mailbus.demo import DemoSystem

                self.demo = DemoSystem(self.context, speed=self._demo_speed)
                self.demo.start()
            if self.player is not None and not self._paused:
                self.player.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.player is not None:
            self.player.stop()
        if self.demo is not None:
            self.demo.stop()
        self.server.stop()
        self.context.shutdown()

    def __enter__(self) -> ServedSystem:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _repr_html_(self) -> str:
        return (
            f"<p>Foxglove server at <code>{self.url}</code>: in Foxglove or Lichtblick, "
            "<i>Open connection</i> → <i>Foxglove WebSocket</i>.</p>"
        )

    # -- the player's controls, as services the app's Service Call panel calls -------------
    def _player_services(self) -> dict[str, LocalService]:
        def player() -> Player:
            if self.player is None:
                raise ValueError("the player has not started")
            return self.player

        def state(_: str = "") -> str:
            p = player()
            return json.dumps(
                {
                    "state": str(p.state),
                    "position_s": round(p.position_s, 6),
                    "sent": p.sent,
                    "total": p.total,
                    "rate": p.rate,
                }
            )

        def pause(_: str) -> str:
            player().pause()
            return state()

        def resume(_: str) -> str:
            player().resume()
            return state()

        def seek(body: str) -> str:
            try:
                request = json.loads(body) if body.strip() else {}
            except ValueError:
                raise ValueError('seek takes {"offset_s": seconds}') from None
            offset = request.get("offset_s") if isinstance(request, dict) else request
            if isinstance(offset, bool) or not isinstance(offset, int | float):
                raise ValueError('seek takes {"offset_s": seconds}')
            player().seek(float(offset))
            return state()

        return {
            PLAYER_PREFIX + "state": state,
            PLAYER_PREFIX + "pause": pause,
            PLAYER_PREFIX + "resume": resume,
            PLAYER_PREFIX + "seek": seek,
        }


def serve_context(context: Context, port: int = 8765) -> FoxgloveServer:
    """Serve a context someone else owns (the workbench's) on loopback: on `port`, or on
    any free port when that one is taken. Started; the caller stops it."""
    try:
        return FoxgloveServer(context, port=port).start()
    except FoxgloveError:
        return FoxgloveServer(context, port=0).start()
