"""The workbench's views, one per tab."""
