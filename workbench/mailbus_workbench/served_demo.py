"""The one demo system behind `mailbus serve` when no options file is given.

textual-serve starts a workbench process per browser page, and a workbench with no
options runs a demo of its own inside it: two pages were two unrelated systems, and a
message published in one never showed in the other. Instead the server runs one
PostOffice daemon on loopback (a store in a private temporary directory) and the demo
system beside it, in its own process; each page's workbench attaches to that daemon as
a viewer, so every page watches, publishes to and calls the same system.

The daemon's password is made here, at random, and reaches the pages only through the
environment they inherit (`MAILBUS_POSTOFFICE_PASSWORD`), never through a file."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from mailbus.context import Context
from mailbus.demo import DemoSystem
from mailbus.options import load_options
from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.server import ServerThread
from mailbus.postoffice.transport import PASSWORD_ENV

from mailbus_workbench.demo_broker import start_demo_broker, stop_demo_broker
from mailbus_workbench.engine import DEMO_ANNOUNCE_PERIOD_S

# The demo's and the pages' boxes share this parent, so the daemon delivers the topics
# each of them publishes to all the others.
GROUP = "demo"
SYSTEM_BOX = f"{GROUP}.system"
PAGES_BOX = f"{GROUP}.workbench"


def _options_text(port: int, box: str, announce_as: str | None = None) -> str:
    """Options on the daemon; `announce_as`: the name its announcements give (the
    demo's, so Participants and Broker show it), None for a page that only watches."""
    announce = (
        f'name = "{announce_as}"\nannounce-period-s = {DEMO_ANNOUNCE_PERIOD_S}\n'
        if announce_as
        else ""
    )
    return (
        f'transport = "postoffice"\n{announce}'
        f'[postoffice]\nport = {port}\nbox = "{box}"\ncreate = true\n'
    )


class ServedDemo:
    """The daemon and the demo system; `pages_config` is the options file each page's
    workbench is started with. A context manager: leaving it stops both and removes the
    temporary directory."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="mailbus-serve-")
        root = Path(self._dir.name)  # made private (0700) by tempfile
        # A new daemon: its password is this run's, whatever the environment had.
        os.environ[PASSWORD_ENV] = secrets.token_urlsafe(24)
        self._daemon = ServerThread(ServerConfig(store_path=root / "postoffice.db", port=0))
        try:
            self._start(root)
        except BaseException:
            self._daemon.stop()
            self._dir.cleanup()
            raise

    def _start(self, root: Path) -> None:
        self._daemon.start()
        port = self._daemon.port
        system_config = root / "demo-system.toml"
        system_config.write_text(_options_text(port, SYSTEM_BOX, announce_as="demo"))
        self.pages_config = root / "demo-pages.toml"
        self.pages_config.write_text(_options_text(port, PAGES_BOX))
        self._context = Context(load_options(str(system_config)))
        self._context.init()
        self._demo = DemoSystem(self._context)
        self._demo.start()
        self._broker = start_demo_broker(self._context)

    def close(self) -> None:
        self._demo.stop()
        stop_demo_broker(self._broker)
        self._context.shutdown()
        self._daemon.stop()
        self._dir.cleanup()

    def __enter__(self) -> ServedDemo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
