"""Helpers of the MCAP tests: a foreign MCAP file as other tools write it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
from mailbus.sessions import mcap_format
from mailbus.sessions.reader import open_session
from mcap.writer import Writer

T0 = 1_750_000_000_000_000_000
MS = 1_000_000
MAILBUS = [sys.executable, "-m", "mailbus"]


def run_mailbus(
    *args: str, cache: Path, timeout: float = 120, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `mailbus` command in a child process, with its MCAP cache in `cache`."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    prefix: list[str] = []
    if user is not None:  # as that user (the tests run as root, who reads any file)
        prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    return subprocess.run(
        [*prefix, *MAILBUS, *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def write_foreign(path: Path, *, chunked: bool = True) -> dict[str, int]:
    """An MCAP file as Foxglove's JSON profile and others write it: JSON channels with a
    jsonschema schema, with none, and with a ROS 2 schema and a topic that is no Mailbus
    name, one protobuf and one ROS 2 CDR channel. Returns the messages per topic."""
    with open(path, "wb") as handle:
        writer = Writer(handle, chunk_size=4096, use_chunking=chunked)
        writer.start(profile="", library="test-writer")
        pose_schema = writer.register_schema(
            "Pose",
            "jsonschema",
            json.dumps({"type": "object", "properties": {"x": {"type": "number"}}}).encode(),
        )
        pose = writer.register_channel("/robot/pose", "json", pose_schema)
        temp = writer.register_channel("/sensors/temp", "json", 0)  # no schema
        # JSON data described by a ROS 2 message definition: the data is read all the same.
        ros_json = writer.register_schema("std_msgs/msg/String", "ros2msg", b"string data")
        odd = writer.register_channel("/odd\ttopic ", "json", ros_json)
        proto_schema = writer.register_schema("foxglove.Log", "protobuf", b"\x0a\x00")
        proto = writer.register_channel("/camera/log", "protobuf", proto_schema)
        cdr_schema = writer.register_schema("std_msgs/msg/String", "ros2msg", b"string data")
        cdr = writer.register_channel("/chatter", "cdr", cdr_schema)
        counts = {"/robot/pose": 0, "/sensors/temp": 0, "/odd\ttopic ": 0}
        for i in range(60):
            t = T0 + i * 10 * MS
            writer.add_message(pose, t, json.dumps({"x": i / 10}).encode(), t - MS, i + 1)
            counts["/robot/pose"] += 1
            if i % 2 == 0:
                writer.add_message(temp, t + 1, json.dumps({"x": 20 + i}).encode(), t, 0)
                counts["/sensors/temp"] += 1
            if i % 10 == 0:
                writer.add_message(odd, t + 2, b'{"note": "odd"}', 0, 0)
                counts["/odd\ttopic "] += 1
            writer.add_message(proto, t + 3, b"\x0a\x03abc", t, 0)
            writer.add_message(cdr, t + 4, b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00", t, 0)
        writer.finish()
    return counts


def email_rows(session_path: Path) -> pl.DataFrame:
    """The rows of a session that go on a name's channel, in row order."""
    frame = open_session(session_path).read()
    is_email = pl.col("kind").is_in(list(mcap_format.SENT_KINDS)) | (
        (pl.col("kind") == "email.received")
        & pl.col("detail").is_in(["message", "request", "response"])
    )
    return frame.filter(is_email & pl.col("name").is_not_null()).sort("event_index")
