"""Shell tools for live traffic: `mailbus topic`, `mailbus service`, `mailbus participant`
(docs/shell.md). Headless, for scripts and SSH sessions: human output by default, one
JSON object per line with --json, exit codes a script can trust (ExitCode)."""
