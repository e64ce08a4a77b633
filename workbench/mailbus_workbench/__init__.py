"""The Mailbus workbench: a Textual TUI on top of the engine."""
