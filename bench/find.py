"""Find and export benchmark: how fast Find searches the kept messages, beside a floor
measured in the same run (a bare loop that parses each JSON body and compares one
field: what any field search has to do), and how fast a topic exports.

    python -m bench.find [--quick]

100 topics of 1,000 kept JSON messages (100k; --quick: 20k). Find runs off the UI thread
(a worker), so its time is what a user waits for the list, not a frozen screen.

The last stdout line is JSON: find_json_msgs_per_s (`celsius>25`), floor_msgs_per_s,
find_ratio (floor time / Find time: 1.0 means no overhead), find_text_msgs_per_s (a body
text query), find_regex_msgs_per_s, find_100k_ms (the field query over every message),
export_csv_rows_per_s, export_jsonl_rows_per_s, export_parquet_rows_per_s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from mailbus_workbench.model import export
from mailbus_workbench.model.find import kept, parse_query, search
from mailbus_workbench.model.state import WorkbenchModel
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import message_event

ROUNDS = 3


def build(topics: int, per_topic: int) -> WorkbenchModel:
    model = WorkbenchModel(clock=FrozenClock(T0), history_cap=per_topic)
    n = 0
    for t in range(topics):
        events = []
        for k in range(per_topic):
            n += 1
            body = json.dumps({"sensor": f"s{t}", "celsius": (k * 7) % 40, "t": k / 10})
            events.append(message_event(f"plant/{t}/temperature", body, T0 + n * 1e-3, n))
        model.feed_events(events)
        model.pump()
    return model


def best(run: object) -> float:
    """The fastest of ROUNDS runs of `run()`, in seconds (the least disturbed)."""
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    per_topic = 200 if args.quick else 1_000
    model = build(100, per_topic)
    records = kept(model.topics)
    count = len(records)
    print(f"{count} kept messages in 100 topics", file=sys.stderr)

    query = parse_query("celsius>25")
    everything = len(records)  # no cap on the matches: the same work as the floor
    expected = len(search(records, query, everything).records)

    def floor() -> None:
        matched = 0
        for record in records:
            value = json.loads(record.event.body or "").get("celsius")
            if isinstance(value, int | float) and value > 25:
                matched += 1
        assert matched == expected

    floor_s = best(floor)
    find_s = best(lambda: search(records, query, everything))
    text_s = best(lambda: search(records, parse_query("'\"celsius\": 3'")))
    regex_s = best(lambda: search(records, parse_query("'/\"celsius\": 3\\d/'")))
    print(
        f"find celsius>25: {find_s * 1000:.0f} ms, floor {floor_s * 1000:.0f} ms", file=sys.stderr
    )

    rows = export.message_rows(records)
    rates = {}
    with tempfile.TemporaryDirectory() as folder:
        for suffix in export.TABLE_SUFFIXES:
            path = Path(folder) / f"all{suffix}"

            def write(path: Path = path) -> None:
                export.write_table(rows, export.MESSAGE_SCHEMA, path, overwrite=True)

            rates[suffix] = count / best(write)
            print(f"export {suffix}: {rates[suffix]:.0f} rows/s", file=sys.stderr)

    figures = {
        "messages": count,
        "find_json_msgs_per_s": round(count / find_s),
        "floor_msgs_per_s": round(count / floor_s),
        "find_ratio": round(floor_s / find_s, 3),
        "find_text_msgs_per_s": round(count / text_s),
        "find_regex_msgs_per_s": round(count / regex_s),
        "find_100k_ms": round(find_s * 1000 * 100_000 / count, 1),
        "export_csv_rows_per_s": round(rates[".csv"]),
        "export_jsonl_rows_per_s": round(rates[".jsonl"]),
        "export_parquet_rows_per_s": round(rates[".parquet"]),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
