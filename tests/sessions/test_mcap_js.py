"""An independent reader agrees: @mcap/core, the TypeScript reader Foxglove's apps open
MCAP with, reads an exported session through its summary and chunk index (chunk CRCs
checked): one channel per name, one message per email, each body the JSON the session
holds, log and publish times as mapped. Its packages are installed from the committed
package-lock.json (`npm ci`) when node_modules is missing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from mailbus.sessions.mcap_export import export_mcap
from mailbus.sessions.reader import open_session
from mcap_helpers import email_rows
from sessions_helpers import SAMPLES

JS = Path(__file__).resolve().parent / "mcap_js"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed (Debian: nodejs, npm)")
    if not (JS / "node_modules" / "@mcap" / "core").is_dir():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"npm ci in {JS} failed (offline?): {done.stderr.strip()[-300:]}")
    return node


def test_foxgloves_reader_reads_an_export(node: str, tmp_path: Path) -> None:
    out = tmp_path / "demo.mcap"
    export_mcap(open_session(SAMPLES / "demo"), out)
    done = subprocess.run(
        [node, str(JS / "read_mcap.mjs"), str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    topics = json.loads(done.stdout)["topics"]
    events = topics.pop("mailbus.events")
    assert len(events["messages"]) == open_session(SAMPLES / "demo").read().height
    emails = email_rows(SAMPLES / "demo")
    assert set(topics) == {"/" + n for n in emails["name"].unique()}
    for topic, channel in topics.items():
        assert (channel["encoding"], channel["schemaEncoding"]) == ("json", "jsonschema")
        assert channel["schema"]["type"] == "object"
        rows = emails.filter(emails["name"] == topic[1:]).sort("reception_ns", "event_index")
        assert len(channel["messages"]) == rows.height
        got = sorted((int(log), int(pub)) for log, pub, _ in channel["messages"])
        logs = [
            (r["reception_ns"] or r["recorded_ns"], r["source_ns"])
            for r in rows.iter_rows(named=True)
        ]
        want = sorted((log, source or log) for log, source in logs)
        assert got == want
    pose = [data for _, _, data in topics["/robot/pose"]["messages"]]
    assert all(set(d) == {"x", "y", "theta"} for d in pose)
    assert {tuple(d) for _, _, d in topics["/robot/log"]["messages"]} == {("text",)}
