"""`mailbus export SESSION --format mcap --output FILE.mcap`.

Reading MCAP needs no command of its own: `mailbus open|replay|analyze FILE.mcap` open it
through mailbus.sessions.reader.open_session (mailbus.sessions.mcap_import)."""

from __future__ import annotations

import argparse

FORMATS = ("mcap",)


def _export(args: argparse.Namespace) -> int:
    from mailbus.sessions.cli import EXIT_OK, Progress, _error, bar
    from mailbus.sessions.mcap_export import ExportError, export_mcap
    from mailbus.sessions.reader import SessionError, open_session

    progress = Progress()

    def show(phase: str, done: int, total: int) -> None:
        progress.show(f"export {bar(done, total)} {phase} {done}/{total} rows")

    try:
        session = open_session(args.session, skip_bad_parts=args.skip_bad_parts)
        result = export_mcap(session, args.output, overwrite=args.force, progress=show)
    except (SessionError, ExportError) as exc:
        progress.done()
        return _error("export", exc)
    progress.done(
        f"exported {result.rows} events ({result.emails} emails on {result.channels} channels) "
        f"to {result.path} ({result.bytes / 1e6:.1f} MB) in {result.seconds:.1f}s"
    )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(
        "export", help="write a session in another format (MCAP, for Foxglove and Lichtblick)"
    )
    export.add_argument("session", metavar="SESSION", help="session directory (or MCAP file)")
    export.add_argument("--format", choices=FORMATS, required=True)
    export.add_argument("--output", "-o", required=True, metavar="FILE.mcap")
    export.add_argument("--force", action="store_true", help="replace FILE if it exists")
    export.add_argument("--skip-bad-parts", action="store_true")
    export.set_defaults(handler=_export)
