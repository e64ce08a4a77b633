"""In-process throughput and latency of topics and services, beside a raw
`queue.Queue` two-thread hand-off of the same payload measured in the same run.

    python -m bench.intraprocess [--quick]

Last stdout line: one JSON object (keys in shared/BENCH.md).
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mailbus
from mailbus.email_message import Email, from_bytes, to_bytes


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = (len(ordered) - 1) * q
    low = int(index)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (index - low)


def baseline_throughput(payload: str, count: int) -> float:
    channel: queue.Queue[tuple[int, str]] = queue.Queue()

    def consume() -> None:
        for _ in range(count):
            channel.get()

    consumer = threading.Thread(target=consume)
    started = time.perf_counter()
    consumer.start()
    for _ in range(count):
        channel.put((time.time_ns(), payload))
    consumer.join()
    return count / (time.perf_counter() - started)


def baseline_latency(payload: str, count: int) -> list[float]:
    channel: queue.Queue[tuple[int, str]] = queue.Queue()
    done: queue.Queue[float] = queue.Queue()

    def consume() -> None:
        for _ in range(count):
            sent, _ = channel.get()
            done.put((time.time_ns() - sent) / 1000)

    consumer = threading.Thread(target=consume)
    consumer.start()
    samples = []
    for _ in range(count):
        channel.put((time.time_ns(), payload))
        samples.append(done.get())
    consumer.join()
    return samples


def mailbus_throughput(payload: str, count: int) -> float:
    with mailbus.Context() as ctx:
        subscription = ctx.subscription("bench/throughput", depth=count + 1)
        publisher = ctx.publisher("bench/throughput")
        taken = 0

        def consume() -> None:
            nonlocal taken
            wait_set = ctx.wait_set("bench")
            wait_set.add_subscription(subscription)
            while taken < count:
                if subscription.take() is None:
                    wait_set.wait(5.0)
                else:
                    taken += 1

        consumer = threading.Thread(target=consume)
        started = time.perf_counter()
        consumer.start()
        for _ in range(count):
            publisher.publish(payload)
        consumer.join(60)
        elapsed = time.perf_counter() - started
        if taken != count:
            raise RuntimeError(f"lost messages: {taken} of {count}")
        return count / elapsed


def mailbus_latency(payload: str, count: int) -> list[float]:
    with mailbus.Context() as ctx:
        subscription = ctx.subscription("bench/latency")
        publisher = ctx.publisher("bench/latency")
        done: queue.Queue[float] = queue.Queue()

        def consume() -> None:
            for _ in range(count):
                message = mailbus.wait_for_message(subscription, 5.0)
                if message is None:
                    raise RuntimeError("latency run lost a message")
                done.put((time.time_ns() - message.info.source_timestamp_ns) / 1000)

        consumer = threading.Thread(target=consume)
        consumer.start()
        samples = []
        for _ in range(count):
            publisher.publish(payload)
            samples.append(done.get(timeout=5))
        consumer.join()
        return samples


@contextmanager
def echo_service(ctx: mailbus.Context, service: str = "bench/echo") -> Iterator[None]:
    """A server that answers every request with its body, on a thread that waits on a
    wait set it reuses, as a real server does."""
    server = ctx.server(service)
    stop = threading.Event()

    def serve() -> None:
        wait_set = ctx.wait_set("bench-server")
        wait_set.add_server(server)
        while not stop.is_set():
            request = server.take_request()
            if request is None:
                wait_set.wait(0.1)
            else:
                server.send_response(request, request.body)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def service_rtt(count: int) -> list[float]:
    with mailbus.Context() as ctx, echo_service(ctx):
        client = ctx.client("bench/echo")
        samples = []
        for _ in range(count):
            started = time.perf_counter_ns()
            client.call("ping", timeout=5.0)
            samples.append((time.perf_counter_ns() - started) / 1000)
        return samples


def email_rates(count: int) -> tuple[float, float]:
    headers = {f"Field-{i}": f"value {i}" for i in range(8)}
    headers["Source-Timestamp"] = str(time.time_ns())
    headers["Publisher-GID"] = "0" * 32
    email = Email(subject="bench/email", body="x" * 500, to=("a@example.com",), headers=headers)
    started = time.perf_counter()
    for _ in range(count):
        raw = to_bytes(email)
    build = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(count):
        from_bytes(raw)
    parse = count / (time.perf_counter() - started)
    return build, parse


def signed_email_rates(count: int, algorithm: str = "ed25519-sha256") -> tuple[float, float]:
    """Build + sign, and verify + parse, of the same email as email_rates: what
    `[signing]` adds to each side (mailbus.signing, dkimpy underneath)."""
    from mailbus.signing.config import key_name
    from mailbus.signing.keys import new_ed25519_key, parse_private_key
    from mailbus.signing.sign import Signer
    from mailbus.signing.verify import Verifier

    if algorithm == "ed25519-sha256":
        key, record = new_ed25519_key()
    else:
        key, record = _rsa_key()
        key = parse_private_key(algorithm, key.material, "bench")
    signer = Signer(key, "bench", "example.com")
    verifier = Verifier({key_name("bench", "example.com"): record})
    headers = {f"Field-{i}": f"value {i}" for i in range(8)}
    headers["Source-Timestamp"] = str(time.time_ns())
    headers["Publisher-GID"] = "0" * 32
    email = Email(subject="bench/email", body="x" * 500, to=("a@example.com",), headers=headers)
    started = time.perf_counter()
    for _ in range(count):
        raw = signer.sign(to_bytes(email))
    build = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(count):
        if not verifier.verify(raw).verified:
            raise AssertionError("the benchmark's own signature does not verify")
        from_bytes(raw)
    parse = count / (time.perf_counter() - started)
    return build, parse


def _rsa_key() -> tuple[Any, str]:
    """A 2048-bit RSA key pair (cryptography, a dev dependency: RSA is measured for
    information only)."""
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from mailbus.signing.keys import PrivateKey

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    record = "v=DKIM1; k=rsa; p=" + base64.b64encode(der).decode()
    return PrivateKey("rsa-sha256", pem), record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 20_000 if args.quick else 100_000
    samples = 1_000 if args.quick else 5_000
    figures: dict[str, float | int | str] = {}
    for label, size in (("100b", 100), ("10kb", 10_000)):
        payload = "x" * size
        base = statistics.median(baseline_throughput(payload, n) for _ in range(3))
        ours = statistics.median(mailbus_throughput(payload, n) for _ in range(3))
        log(f"{label}: throughput {ours:,.0f} msg/s vs queue.Queue {base:,.0f} msg/s")
        base_lat = baseline_latency(payload, samples)
        our_lat = mailbus_latency(payload, samples)
        log(
            f"{label}: publish-to-take p50 {percentile(our_lat, 0.5):.1f} us "
            f"p99 {percentile(our_lat, 0.99):.1f} us; queue.Queue p50 "
            f"{percentile(base_lat, 0.5):.1f} us"
        )
        figures[f"throughput_{label}_msgs_per_s"] = round(ours)
        figures[f"baseline_throughput_{label}_msgs_per_s"] = round(base)
        figures[f"pub_take_{label}_p50_us"] = round(percentile(our_lat, 0.5), 1)
        figures[f"pub_take_{label}_p99_us"] = round(percentile(our_lat, 0.99), 1)
        figures[f"baseline_latency_{label}_p50_us"] = round(percentile(base_lat, 0.5), 1)
    rtt = service_rtt(samples)
    log(f"service round trip p50 {percentile(rtt, 0.5):.1f} us p99 {percentile(rtt, 0.99):.1f}")
    build, parse = email_rates(2_000 if args.quick else 10_000)
    log(f"email build+serialize {build:,.0f}/s, parse {parse:,.0f}/s")
    signed_build, verified_parse = signed_email_rates(2_000 if args.quick else 10_000)
    log(
        f"ed25519-sha256: build+sign {signed_build:,.0f}/s, verify+parse "
        f"{verified_parse:,.0f}/s (target 2,000/s each)"
    )
    rsa_build, rsa_parse = signed_email_rates(200 if args.quick else 500, "rsa-sha256")
    log(f"rsa-sha256 (2048 bits): build+sign {rsa_build:,.0f}/s, verify+parse {rsa_parse:,.0f}/s")
    figures.update(
        throughput_msgs_per_s=figures["throughput_100b_msgs_per_s"],
        baseline_throughput_msgs_per_s=figures["baseline_throughput_100b_msgs_per_s"],
        throughput_ratio=round(
            float(figures["throughput_100b_msgs_per_s"])
            / float(figures["baseline_throughput_100b_msgs_per_s"]),
            3,
        ),
        pub_take_p50_us=figures["pub_take_100b_p50_us"],
        pub_take_p99_us=figures["pub_take_100b_p99_us"],
        service_rtt_p50_us=round(percentile(rtt, 0.5), 1),
        service_rtt_p99_us=round(percentile(rtt, 0.99), 1),
        email_build_per_s=round(build),
        email_parse_per_s=round(parse),
        email_build_signed_per_s=round(signed_build),
        email_parse_verified_per_s=round(verified_parse),
        email_build_signed_rsa_per_s=round(rsa_build),
        email_parse_verified_rsa_per_s=round(rsa_parse),
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
