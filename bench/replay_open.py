"""The workbench's side of `bench.replay`: `mailbus open SESSION` as a person meets it.

`measure_open(path)` starts the workbench on a session (as `mailbus open` does, in
Textual's headless pilot) and times how long the timeline takes to be drawn, then seeks
by keys on the focused timeline (→ and shift+→, End and Home, as a person steps through
a session) and times each key until the player stands at the new place. It returns
`open_timeline_s` and `seek_p95_ms` (with `seek_max_ms` and the number of seeks).

A key is posted to the app as the terminal's driver posts it (as bench.workbench does),
not through `Pilot.press`, which after each key also waits until the whole process is
idle (its workers and the player's reader included) in 20 ms sleeps: a person's key
does not wait for that, and the time to the landing is what is measured.

Run alone: `python -m bench.replay_open SESSION_DIR` prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SEEK_KEYS = ("shift+right", "right", "shift+right", "end", "home") * 8
TIMEOUT_S = 120.0  # a seek that never lands ends the run with what the player says
POLL_S = 0.002  # how often the state is looked at


def _p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=20)[-1]


async def _measure(path: Path) -> dict[str, Any]:
    from mailbus_workbench.app import WorkbenchApp
    from mailbus_workbench.engine import EngineHost
    from mailbus_workbench.model.settings import Settings
    from mailbus_workbench.views.sessions import SessionsView
    from mailbus_workbench.widgets.timeline import TimelineBar
    from textual import events

    engine = EngineHost(demo=False)
    engine.start()
    config = Path(tempfile.mkdtemp(prefix="bench-open-"))
    settings = Settings(keymap_file=config / "keys.toml", templates_file=config / "t.toml")
    started = time.perf_counter()
    # As `mailbus open` runs it (launch.py): the command's own process.
    app = WorkbenchApp(engine=engine, session=str(path), settings=settings, owns_process=True)
    seeked: list[float] = []  # each key's seek, as the timeline posted it

    def hook(message: object) -> None:
        if isinstance(message, TimelineBar.Seeked):
            seeked.append(message.offset_s)

    try:
        async with app.run_test(size=(140, 40), message_hook=hook):
            bar = app.query_one(TimelineBar)
            view = app.query_one(SessionsView)

            async def until(condition: Any, what: str) -> None:
                deadline = time.perf_counter() + TIMEOUT_S
                while not condition():
                    if time.perf_counter() > deadline:
                        p = view.player
                        where = p and (p.state, p.position_s, p.duration_s, p.buffered)
                        raise RuntimeError(f"timed out waiting for {what} (player: {where})")
                    # Not pilot.pause: it waits on every widget and paints a frame,
                    # each time (at 1 ms, most of the process's GIL, the player
                    # starved); the app runs on this loop and paints at its pace.
                    await asyncio.sleep(POLL_S)

            await until(lambda: bar.timeline is not None, "the timeline")
            open_timeline_s = time.perf_counter() - started
            bar.focus()
            await until(lambda: app.focused is bar, "the timeline's focus")
            # The first key builds the (paused) player: counted like any other seek.
            seeks: list[float] = []
            for key in SEEK_KEYS:
                handled = len(seeked)
                before = time.perf_counter()
                app.post_message(events.Key(key, None))
                await until(lambda n=handled: len(seeked) > n, f"the seek of {key}")
                wanted = bar.cursor_s

                def landed(wanted: float = wanted) -> bool:
                    # Handed to the player, and its first email there read: before that,
                    # the player's last place (End's, for Home) looks landed too.
                    p = view.player
                    if bar.seeking or p is None or p.state != "paused":
                        return False
                    return p.wait_landed(0) and _at(p, wanted)

                await until(landed, f"the seek to {wanted:.3f} s")
                seeks.append((time.perf_counter() - before) * 1000)
            if view.player is not None:
                view.player.stop()
    finally:
        engine.stop()
    return {
        "open_timeline_s": round(open_timeline_s, 3),
        "seek_p95_ms": round(_p95(seeks), 1),
        "seek_max_ms": round(max(seeks), 1),
        "seeks": len(seeks),
    }


def _at(player: Any, wanted_s: float) -> bool:
    """The player stands at the first email at or after `wanted_s`: that email is read
    and next to send (or the seek went past the last one)."""
    if player.position_s >= player.duration_s:
        return True
    return bool(player.buffered and player.position_s >= wanted_s - 1e-9)


def measure_open(path: Path) -> dict[str, Any]:
    return asyncio.run(_measure(path))


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bench.replay_open SESSION_DIR")
    print(json.dumps(measure_open(Path(sys.argv[1]))))


if __name__ == "__main__":
    main()
