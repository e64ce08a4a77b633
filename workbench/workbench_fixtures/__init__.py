"""Fixed, deterministic data for the workbench's tests, snapshot tests, screenshots and
benchmarks: trace events at a frozen clock's times, participants' announcements, and
stores written by the real code with fixed ids.

Tooling, not product: the wheel does not ship this package (`[tool.hatch.build.targets.wheel]`
lists only `mailbus` and `mailbus_workbench`) and `mailbus_workbench` never imports it
(an import contract). The development environment's editable install puts `workbench/`
on sys.path, which is how tests, `scripts/screenshots` and `bench` import it."""
