import threading
from collections.abc import Iterator

import mailbus
import pytest
from mailbus import Kind
from mailbus.errors import ServiceTimeoutError
from mailbus.trace import TraceEvent


@pytest.fixture
def adder(ctx: mailbus.Context) -> Iterator[mailbus.ServiceServer]:
    server = ctx.server("math/add")
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            request = mailbus.wait_for_request(server, 0.05)
            if request is not None:
                server.send_response(request, str(sum(map(int, request.body.split()))))

    thread = threading.Thread(target=serve)
    thread.start()
    yield server
    stop.set()
    thread.join(5)


def test_call_returns_the_matching_response(
    ctx: mailbus.Context, adder: mailbus.ServiceServer
) -> None:
    client = ctx.client("math/add")
    response = client.call("1 2 3", timeout=2.0)
    assert response.body == "6"
    assert response.sequence_number == 1
    assert response.client_gid == client.gid
    assert response.info.source_gid == adder.gid
    assert response.in_reply_to.startswith("<")
    assert response.email.references[-1] == response.in_reply_to


def test_send_request_take_response(ctx: mailbus.Context, adder: mailbus.ServiceServer) -> None:
    client = ctx.client("math/add")
    sequences = [client.send_request(f"{i} 1") for i in range(5)]
    assert sequences == [1, 2, 3, 4, 5]
    responses = []
    while len(responses) < 5:
        response = mailbus.wait_for_response(client, 2.0)
        assert response is not None
        responses.append(response)
    assert sorted((r.sequence_number, r.body) for r in responses) == [
        (i + 1, str(i + 1)) for i in range(5)
    ]
    assert client.pending == 0


def test_response_goes_to_the_requesting_client_only(
    ctx: mailbus.Context, adder: mailbus.ServiceServer
) -> None:
    first, second = ctx.client("math/add"), ctx.client("math/add")
    assert first.call("2 2", 2.0).body == "4"
    assert second.take_response() is None
    assert second.pending == 0


def test_request_reaches_every_server_and_duplicates_are_discarded(
    ctx: mailbus.Context, events: list[TraceEvent]
) -> None:
    servers = [ctx.server("echo"), ctx.server("echo")]
    client = ctx.client("echo")
    client.send_request("hi")
    requests = [s.take_request() for s in servers]
    assert all(r is not None and r.body == "hi" for r in requests)
    for server, request in zip(servers, requests, strict=True):
        assert request is not None
        server.send_response(request, f"from {server.gid}")
    first = client.take_response()
    assert first is not None and first.body == f"from {servers[0].gid}"
    assert client.take_response() is None
    assert client.discarded == 1 and ctx.counters["discarded"] == 1
    assert [e.sequence_number for e in events if e.kind == Kind.DISCARDED] == [1]


def test_late_answer_to_an_older_pending_request_is_still_delivered(
    ctx: mailbus.Context,
) -> None:
    server, client = ctx.server("s"), ctx.client("s")
    client.send_request("one")
    client.send_request("two")
    one, two = server.take_request(), server.take_request()
    assert one is not None and two is not None
    server.send_response(two, "2")
    server.send_response(one, "1")  # older sequence number, answered last
    bodies = [r.body for r in iter(client.take_response, None)]
    assert bodies == ["2", "1"]


def test_call_times_out_and_a_late_response_is_discarded(ctx: mailbus.Context) -> None:
    server, client = ctx.server("slow"), ctx.client("slow")
    with pytest.raises(ServiceTimeoutError, match="slow"):
        client.call("x", timeout=0.05)
    request = server.take_request()
    assert request is not None
    server.send_response(request, "too late")
    assert client.take_response() is None
    assert client.discarded == 1


def test_concurrent_calls_from_many_threads(
    ctx: mailbus.Context, adder: mailbus.ServiceServer
) -> None:
    client = ctx.client("math/add")
    results: dict[int, str] = {}

    def call(n: int) -> None:
        for i in range(20):
            results[n * 100 + i] = client.call(f"{n} {i}", 5.0).body

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {n * 100 + i: str(n + i) for n in range(8) for i in range(20)}
    assert client.discarded == 0


def test_trace_pairs_request_and_response(
    ctx: mailbus.Context, adder: mailbus.ServiceServer, events: list[TraceEvent]
) -> None:
    ctx.client("math/add").call("1 1", 2.0)
    sent = next(e for e in events if e.kind == Kind.REQUEST_SENT)
    answered = next(e for e in events if e.kind == Kind.RESPONSE_SENT)
    matched = next(e for e in events if e.kind == Kind.RESPONSE_MATCHED)
    assert answered.in_reply_to == sent.message_id == matched.in_reply_to
    assert matched.body == "2"


def test_unanswered_requests_are_bounded(
    ctx: mailbus.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailbus import service

    monkeypatch.setattr(service, "MAX_PENDING", 3)
    client = ctx.client("nobody/home")
    server = ctx.server("nobody/home")
    sequences = [client.send_request(str(i)) for i in range(5)]
    assert client.pending == 3  # the two oldest were forgotten
    for _ in range(5):
        request = mailbus.wait_for_request(server, 5.0)
        assert request is not None
        server.send_response(request, request.body)
    answered = []  # in process, a response is delivered before send_response returns
    while (response := client.take_response()) is not None:
        answered.append(response.sequence_number)
    assert answered == sequences[2:] and client.discarded == 2
