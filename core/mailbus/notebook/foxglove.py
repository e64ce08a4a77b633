"""`foxglove()`: serve a system to Foxglove or Lichtblick from a notebook (the same server
as `mailbus foxglove`, docs/foxglove.md; needs the `foxglove` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from mailbus.context import Context
    from mailbus.foxglove.served import ServedSystem
    from mailbus.foxglove.server import FoxgloveServer


@overload
def foxglove(
    config: str | Path | None = None,
    *,
    demo: bool = False,
    session: str | Path | None = None,
    context: None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_calls: bool = False,
    allow_publish: bool = False,
) -> ServedSystem: ...


@overload
def foxglove(
    config: None = None,
    *,
    demo: bool = False,
    session: None = None,
    context: Context,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_calls: bool = False,
    allow_publish: bool = False,
) -> FoxgloveServer: ...


def foxglove(
    config: str | Path | None = None,
    *,
    demo: bool = False,
    session: str | Path | None = None,
    context: Context | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_calls: bool = False,
    allow_publish: bool = False,
) -> ServedSystem | FoxgloveServer:
    """Serve at ws://host:port, started: the system of `config` (its own context), the
    demo, a recorded `session`, or `context` (one you have; the server is returned and
    the context stays yours). Call `.stop()` when done; `.url` is the connection string."""
    from mailbus.foxglove.served import ServedSystem, exposure_warning
    from mailbus.foxglove.server import FoxgloveServer

    warning = exposure_warning(host, port, allow_calls, allow_publish)
    if warning is not None:
        import warnings

        warnings.warn(warning, stacklevel=2)
    if context is not None:
        server = FoxgloveServer(
            context, host=host, port=port, allow_calls=allow_calls, allow_publish=allow_publish
        )
        return server.start()
    return ServedSystem(
        config=config,
        demo=demo,
        session=session,
        host=host,
        port=port,
        allow_calls=allow_calls,
        allow_publish=allow_publish,
    ).start()
