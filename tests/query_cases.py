"""Worked cases of the engine's query language and field paths, shared by the tests of
Find and the topic filter (tests/workbench/test_message_filter.py) and of
`mailbus topic echo --where/--field` (tests/shell/test_shell_commands.py): the same text
must pick the same messages wherever it is typed."""

from __future__ import annotations

# Bodies published on one topic, in this order.
BODIES = (
    '{"celsius": 21.5, "unit": "C", "readings": [1, 2, 3]}',
    '{"celsius": 30, "unit": "C", "readings": [4, 5]}',
    '{"celsius": "hot", "unit": "F"}',
    '{"pose": {"x": 0.5}}',
)

# (where, the indexes of BODIES that match)
WHERE_CASES = (
    ("celsius>25", (1,)),
    ("celsius<=21.5", (0,)),
    ("celsius=hot", (2,)),
    ("unit=c celsius>20", (0, 1)),
    ("readings.1>=2", (0, 1)),
    ("readings[0]=4", (1,)),
    ("pose.x>0", (3,)),
    ("celsius~3", (1,)),
)

# (field path, the values echoed for BODIES, None where the body has no such field)
FIELD_CASES = (
    ("celsius", (21.5, 30, "hot", None)),
    ("readings[1]", (2, 5, None, None)),
    ("pose.x", (None, None, None, 0.5)),
)
