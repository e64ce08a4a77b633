"""The crash test's driver, run as its own process by test_outbox_crash.py.

It loads Python and mailbus once, then per run forks a worker process that opens the
outbox (recovering what the previous worker left), enqueues mails and delivers them
through a real SMTP server (smtp-sink). The driver SIGKILLs the worker at a random
moment: it reads the worker's progress bytes (one per trace event) up to a random count,
then kills at once, while the worker keeps going between the read and the kill. Some
runs also kill the restarted process during its recovery. Then a fresh process
restarts on the outbox, recovers and delivers everything, and the driver checks:

- every mail whose send() returned (logged "C" after it) reached the SMTP server at
  least once, so a receiver that drops duplicates by Message-ID sees it exactly once;
- nothing reached the server that was never handed to send() (logged "I" before it);
- extra copies are at most one per kill (only the mail being sent when killed can be
  sent twice: at-least-once);
- nothing is left under data/ or in queue/, inflight/, cleanup/, dead/, corrupt/.

The driver itself never starts threads, so forking it is safe. It prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from mailbus.outbox import OutboxSender, RetryPolicy
from mailbus.trace import TraceEvent, Tracer
from outbox_support import SmtplibSender, SmtpSink, eventually, make_email

# Progress byte per trace event (the driver records which came last before a kill).
CODES = {
    "outbox.recovered": b"r",
    "outbox.enqueued": b"e",
    "outbox.send_started": b"s",
    "outbox.sent": b"t",
    "outbox.cleaned": b"c",
    "outbox.rescheduled": b"x",
}
POLICY = RetryPolicy(first_delay_s=0.01, max_delay_s=0.05, max_attempts=1000)
STATE_DIRS = ("queue", "inflight", "cleanup", "dead", "corrupt")


def log_line(fd: int, text: str) -> None:
    os.write(fd, text.encode() + b"\n")  # one write(2): survives SIGKILL of the writer


def worker(directory: str, port: int, log_path: str, progress: int, run: int, mails: int) -> None:
    """Runs in the forked worker; never returns."""
    code = 1
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        tracer = Tracer()

        def report(event: TraceEvent) -> None:
            byte = CODES.get(event.kind)
            if byte is not None:
                os.write(progress, byte)

        tracer.add_listener(report)
        sender = OutboxSender(
            SmtplibSender(port), directory, policy=POLICY, tracer=tracer, lock_timeout=10.0
        )
        for i in range(mails):
            message_id = f"<run{run}.{os.getpid()}.{i}@crash.test>"
            log_line(log_fd, f"I {message_id}")
            sender.send(make_email(f"{run}/{i}", message_id=message_id))
            log_line(log_fd, f"C {message_id}")
        if not sender.wait_idle(20.0):
            raise RuntimeError("worker did not deliver in time")
        sender.close()
        code = 0
    except BaseException as exc:
        print(f"worker failed: {exc!r}", file=sys.stderr)
    finally:
        os._exit(code)


def run_killed(
    args: argparse.Namespace, rng: random.Random, run: int, mails: int, max_k: int
) -> str:
    """Fork a worker and SIGKILL it after a random number of progress events. Returns
    the last progress code seen before the kill ('' if none, '=' if it finished)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        worker(args.dir, args.port, args.log, write_end, run, mails)
    os.close(write_end)
    wanted = rng.randint(0, max_k)
    last = b""
    seen = 0
    finished = False
    while seen < wanted:
        chunk = os.read(read_end, wanted - seen)
        if not chunk:
            finished = True
            break
        seen += len(chunk)
        last = chunk[-1:]
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(read_end)
    if finished or not os.WIFSIGNALED(status):
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
            raise RuntimeError(f"worker of run {run} failed (exit {os.WEXITSTATUS(status)})")
        return "="
    return last.decode() or "-"


def drain(args: argparse.Namespace) -> dict[str, int]:
    """Restart on the outbox in a fresh process: recover, deliver all, exit."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            sender = OutboxSender(
                SmtplibSender(args.port), args.dir, policy=POLICY, lock_timeout=10.0
            )
            ok = sender.wait_idle(20.0)
            sender.close()
            r = sender.recovery
            os.write(
                write_end,
                json.dumps(
                    {
                        "ok": ok,
                        "cleanups_finished": r.cleanups_finished,
                        "inflight_requeued": r.inflight_requeued,
                        "uncommitted_removed": r.uncommitted_removed,
                        "set_aside": len(r.set_aside),
                        "queued": r.queued,
                    }
                ).encode(),
            )
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        raise RuntimeError(f"drain process failed: status {status}")
    result: dict[str, int] = json.loads(b"".join(chunks))
    return result


def logged(path: str) -> tuple[set[str], set[str]]:
    intents: set[str] = set()
    committed: set[str] = set()
    with open(path, encoding="ascii") as f:
        for line in f:
            kind, _, message_id = line.strip().partition(" ")
            (intents if kind == "I" else committed).add(message_id)
    return intents, committed


def leftovers(directory: str) -> list[str]:
    root = Path(directory)
    found = [f"data/{n}" for n in os.listdir(root / "data")]
    for state in STATE_DIRS:
        found += [f"{state}/{n}" for n in os.listdir(root / state)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--sink-dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    Path(args.log).touch()  # a worker may be killed before it writes a line
    sink = SmtpSink.__new__(SmtpSink)  # read-only view of the running sink's dump
    sink.dump = Path(args.sink_dir)
    sink._seen = {}
    last_before_kill: Counter[str] = Counter()
    recovery: Counter[str] = Counter()
    failures: list[str] = []
    kills = 0
    extra_copies = 0
    started = time.monotonic()
    for run in range(args.runs):
        kills_this_run = 0
        mails = rng.randint(1, 6)
        last = run_killed(args, rng, run, mails, max_k=4 * mails + 1)
        last_before_kill[last] += 1
        if last != "=":
            kills_this_run += 1
        if rng.random() < 0.3:
            # Kill the restarted process too, early in its life (during recovery or
            # the first sends).
            last = run_killed(args, rng, run, 0, max_k=3)
            last_before_kill[f"restart:{last}"] += 1
            if last != "=":
                kills_this_run += 1
        kills += kills_this_run
        report = drain(args)
        for key in ("cleanups_finished", "inflight_requeued", "uncommitted_removed", "set_aside"):
            recovery[key] += int(report[key] > 0)
        intents, committed = logged(args.log)
        try:
            eventually(lambda c=committed: c <= set(sink.message_ids()), 10.0, "delivery")
            ok = True
        except AssertionError:
            ok = False
        delivered = sink.message_ids()
        problems = []
        if not report["ok"]:
            problems.append("drain did not finish")
        if not ok:
            problems.append(f"committed but never delivered: {sorted(committed - set(delivered))}")
        if set(delivered) - intents:
            problems.append(f"delivered but never sent: {sorted(set(delivered) - intents)}")
        copies = sum(delivered.values()) - len(delivered)
        if copies - extra_copies > kills_this_run:
            problems.append(f"{copies - extra_copies} extra copies for {kills_this_run} kills")
        extra_copies = copies
        left = leftovers(args.dir)
        if left:
            problems.append(f"left behind: {left}")
        if problems:
            failures.append(f"run {run}: {'; '.join(problems)}")
    intents, committed = logged(args.log)
    delivered = sink.message_ids()
    print(
        json.dumps(
            {
                "runs": args.runs,
                "kills": kills,
                "committed": len(committed),
                "intents": len(intents),
                "delivered_unique": len(delivered),
                "extra_copies": extra_copies,
                "last_event_before_kill": dict(last_before_kill),
                "runs_with_recovery": dict(recovery),
                "failures": failures,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
