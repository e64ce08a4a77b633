"""Widgets, one module per screen region."""
