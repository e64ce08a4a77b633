"""`mailbus participant list|info`: the processes that announce themselves."""

from __future__ import annotations

import argparse
from typing import Any

from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, note
from mailbus.shell.presence_view import gather, label
from mailbus.shell.session import (
    UsageError,
    checked_name,
    positive,
    run,
    subcommand,
    usage_checked,
)

EXAMPLES = {
    "list": "mailbus participant list --seconds 5",
    "info": "mailbus participant info robot-arm",
}


def register(parts: argparse._SubParsersAction[argparse.ArgumentParser], common: Any) -> None:
    for name, text, handler in (
        ("list", "participants that announce themselves (announce-period-s)", _list),
        ("info", "one participant: entities, wait sets, host, transport", _info),
    ):
        parser = subcommand(parts, common, name, text, EXAMPLES[name])
        if name == "info":
            parser.add_argument("participant", help="its GID (or the start of it) or its name")
        parser.add_argument(
            "--seconds", type=positive(float, "seconds"), default=3.0, help="how long to listen (3)"
        )
        parser.set_defaults(handler=usage_checked(handler))


def _list(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        presence = gather(args, summary)
        summary["participants"] = len(presence.participants)
        for a in sorted(presence.participants.values(), key=lambda a: a.name):
            out.emit(
                f"{a.gid[:12]}  {label(a)}  {a.transport}  {len(a.entities)} entities",
                {
                    "gid": a.gid,
                    "name": a.name,
                    "host": a.host,
                    "pid": a.pid,
                    "transport": a.transport,
                    "entities": len(a.entities),
                },
            )
        if not presence.participants:
            note("no participant announced itself (they need announce-period-s > 0)")
            return ExitCode.OK if summary.get("interrupted") else ExitCode.FAILED
        return ExitCode.OK

    return run(args, work)


def _info(args: argparse.Namespace) -> int:
    checked_name(args.participant, "participant")
    if len(args.participant) < 2:
        raise UsageError("give a participant's name or at least 2 characters of its GID")

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        a = gather(args, summary).find(args.participant)
        if a is None:
            note(f"no participant {args.participant!r} announced itself in {args.seconds:g} s")
            return ExitCode.FAILED
        entities = "".join(f"\n  {e.kind} {e.name} (queued {e.queued})" for e in a.entities)
        waits = "".join(f"\n  wait set {w.name} (waits {w.waits})" for w in a.wait_sets)
        out.emit(
            f"Participant: {label(a)}\nGID: {a.gid}\nTransport: {a.transport}"
            f"\nEntities: {len(a.entities)}{entities}{waits}",
            {
                "gid": a.gid,
                "name": a.name,
                "host": a.host,
                "pid": a.pid,
                "transport": a.transport,
                "entities": [
                    {"kind": e.kind, "name": e.name, "queued": e.queued} for e in a.entities
                ],
                "wait_sets": [w.name for w in a.wait_sets],
            },
        )
        return ExitCode.OK

    return run(args, work)
