"""`mailbus` and `mailbus open`: the options read, the engine made, the app run."""

from __future__ import annotations

import os
import sys

from mailbus.errors import ConfigError

from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.layouts import LayoutStore
from mailbus_workbench.model.settings import settings_from
from mailbus_workbench.view_table import VIEWS


def run_app(
    config: str | None = None,
    session: str | None = None,
    viewer: bool = False,
    layout: str | None = None,
) -> int:
    """`mailbus`: the workbench on the embedded demo, or attached to `config`'s system;
    with `session` (`mailbus open SESSION`), no demo and that session open for playback;
    `viewer`: one of the browser tabs of `mailbus serve` (a PostOffice box of its own);
    `layout`: a saved layout's name, shown instead of the one this config last had."""
    try:
        engine = EngineHost.from_config(config, viewer=viewer)
        if session is not None and engine.demo is not None:
            engine = EngineHost(engine.options, demo=False)
        settings = settings_from(engine.options.sections.get("workbench"))
        # Remembered per config (as EngineHost reads it), not for a recording's viewing.
        layouts = None
        if session is None:
            attached = config or os.environ.get("MAILBUS_CONFIG_FILE") or None
            layouts = LayoutStore.for_config(attached, [view_id for view_id, _, _ in VIEWS])
            if layout is not None:
                layouts.named_file(layout)  # a name that cannot be a file is refused here
    except (ConfigError, OSError) as exc:  # a LayoutError is a ConfigError
        print(f"mailbus: {exc}", file=sys.stderr)
        return 2
    app = WorkbenchApp(
        engine=engine,
        settings=settings,
        session=session,
        layouts=layouts,
        layout=layout,
        owns_process=True,  # the `mailbus` command's own process: process-wide tricks allowed
    )
    app.run()
    return app.return_code or 0
