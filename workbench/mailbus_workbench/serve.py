"""`mailbus serve`: the workbench in a browser through textual-serve.

Each browser tab gets its own workbench process (`python -m mailbus_workbench`) attached
to the `--config` system, or without one to the demo that the server runs once for all
its pages (`mailbus_workbench.served_demo`): every page watches the same system. Each
runs as a `--viewer`: on PostOffice, where a box serves one connection, with a box of
its own (`mailbus_workbench.viewer_box`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
from pathlib import Path


def serve_command(config: str | None) -> str:
    """The shell command textual-serve runs for each browser session."""
    # --viewer also when the config comes from $MAILBUS_CONFIG_FILE; no-op on the demo.
    parts = [sys.executable, "-m", "mailbus_workbench", "--viewer"]
    if config:
        parts += ["--config", str(Path(config).resolve())]
    return shlex.join(parts)


# Added to textual-serve's page: the terminal takes the keyboard focus as soon as it
# exists, so keys typed before any click reach the workbench (they went nowhere: the
# page's focus stayed on the document until a click on the terminal).
FOCUS_SCRIPT = """<script>
  (function focusTerminal(tries) {
    const input = document.querySelector("#terminal .xterm-helper-textarea");
    const idle = !document.activeElement || document.activeElement === document.body;
    if (input) { if (idle) input.focus(); return; }
    if (tries > 0) setTimeout(() => focusTerminal(tries - 1), 50);
  })(600);
</script>
"""
PAGE = "app_index.html"


def page_templates(directory: Path) -> Path:
    """textual-serve's page template with FOCUS_SCRIPT added, written in `directory`."""
    import textual_serve

    page = (Path(textual_serve.__file__).parent / "templates" / PAGE).read_text("utf-8")
    if "</body>" not in page:
        raise RuntimeError(f"textual-serve's {PAGE} has no </body>: update FOCUS_SCRIPT")
    (directory / PAGE).write_text(page.replace("</body>", FOCUS_SCRIPT + "</body>", 1), "utf-8")
    return directory


def _serve(args: argparse.Namespace) -> int:
    from textual_serve.server import Server

    if args.config and not Path(args.config).is_file():
        print(f"mailbus serve: no such options file: {args.config}", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"mailbus serve: port must be from 1 to 65535, not {args.port}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        config = args.config or os.environ.get("MAILBUS_CONFIG_FILE") or None
        if config is None:
            from mailbus_workbench.served_demo import ServedDemo

            config = str(stack.enter_context(ServedDemo()).pages_config)
            print("the demo system runs once; every page watches it", flush=True)
        templates = page_templates(Path(stack.enter_context(tempfile.TemporaryDirectory())))
        server = Server(
            serve_command(config),
            host=args.host,
            port=args.port,
            title="Mailbus workbench",
            public_url=args.public_url,
            templates_path=templates,
        )
        print(f"serving the workbench on http://{args.host}:{args.port}", flush=True)
        server.serve()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("serve", help="serve the workbench in a web browser")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument("--public-url", default=None, help="URL the browser uses, if proxied")
    parser.set_defaults(handler=_serve)
