"""The workbench's speed tricks, in one place behind one switch.

Each trick answers a key sooner under a message flood (figures in docs/benchmarks.md,
measured on and off in the same run by `python -m bench.workbench`):

- a view key shows the view as last filled and fills it after that frame
  (`fill_after_frame`, the app's `action_show`);
- a key's change is painted as soon as the screen is idle, not at the 60 Hz frame
  timer's next slot (key_frames.py);
- from a key to its answer the UI thread keeps the interpreter's lock longer
  (key_turn.py: `sys.setswitchinterval`);
- what lives as long as the app is frozen out of the collector's full passes
  (heap.py: `gc.freeze`);
- nothing slides (`still`: Textual's `animation_level = "none"`): the tab bar's
  underline slid for 0.3 s after each view key, about 20 frames of the tab bar, key bar
  and header painted while the next key waited.

The switch: `speed-tricks = true|false` in the options file's `[workbench]` table
(default true). The last two change the whole process's state, so they run only in the
`mailbus` command's own process (`owns_process`, set by `run_app`): a workbench embedded
in a user's process or a notebook never slows its other threads or changes its
collector.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SpeedTricks:
    enabled: bool = True
    # The `mailbus` command's own process: process-wide tricks are allowed.
    owns_process: bool = False

    @property
    def fill_after_frame(self) -> bool:
        return self.enabled

    @property
    def key_frames(self) -> bool:
        return self.enabled

    @property
    def still(self) -> bool:
        return self.enabled

    @property
    def key_turn(self) -> bool:
        return self.enabled and self.owns_process

    @property
    def freeze_heap(self) -> bool:
        return self.enabled and self.owns_process
