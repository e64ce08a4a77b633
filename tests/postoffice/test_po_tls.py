"""PostOffice inside TLS, with trustme certificates: the protocol unchanged inside it,
verification on by default, mutual TLS, a clear error for each way a connection can be
wrong, and plain connections from other hosts refused unless allowed."""

from __future__ import annotations

import contextlib
import datetime
import socket
from collections.abc import Callable
from pathlib import Path

import mailbus
import pytest
import trustme
from mailbus.errors import ConfigError
from mailbus.options import options_from_mapping
from mailbus.postoffice.client import ConnectionLost, PostOfficeClient, PostOfficeError, Unsupported
from mailbus.postoffice.transport import PostOfficeOptions, create_transport
from mailbus.tls import client_context, is_loopback
from mailbus.trace import Tracer

from .conftest import Daemon, assert_close_wakes_a_receive

PASSWORD = "Zq9-letter-K3y-long"


class Pki:
    """A CA, the daemon's certificate for 127.0.0.1 and a client's, as PEM files."""

    def __init__(self, directory: Path, *, expired: bool = False) -> None:
        self.ca = trustme.CA()
        not_after = None
        if expired:
            not_after = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
        server = self.ca.issue_cert("127.0.0.1", "localhost", not_after=not_after)
        client = self.ca.issue_cert("robot.mailbus.test")
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_file = directory / "ca.pem"
        self.cert = directory / "server.pem"
        self.client_cert = directory / "client.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        server.private_key_and_cert_chain_pem.write_to_path(str(self.cert))
        client.private_key_and_cert_chain_pem.write_to_path(str(self.client_cert))


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


def round_trip(client: PostOfficeClient) -> bytes:
    with client:
        client.create_box("lab.tls", PASSWORD)
        client.check_out("lab.tls", PASSWORD)
        client.send("lab.tls", b"Subject: x\r\n\r\nsealed")
        letters = [letter.payload for letter in client.get_mail(5.0)]
    return letters[0]


@pytest.mark.slow
def test_the_protocol_runs_unchanged_inside_tls(
    make_daemon: Callable[..., Daemon], pki: Pki
) -> None:
    daemon = make_daemon(tls_cert=pki.cert)
    client = PostOfficeClient(
        "127.0.0.1", daemon.port, timeout=10.0, tls=client_context(ca_file=pki.ca_file)
    )
    assert round_trip(client) == b"Subject: x\r\n\r\nsealed"


def test_a_context_publishes_and_receives_over_tls(
    make_daemon: Callable[..., Daemon], pki: Pki
) -> None:
    daemon = make_daemon(tls_cert=pki.cert)

    def options(box: str) -> mailbus.Options:
        table = {"port": daemon.port, "box": box, "password": PASSWORD}
        table |= {"tls": True, "ca-file": str(pki.ca_file)}
        return options_from_mapping({"transport": "postoffice", "postoffice": table})

    with mailbus.Context(options("lab.pub")) as pub, mailbus.Context(options("lab.sub")) as sub:
        subscription = sub.subscription("lab/tls")
        pub.publisher("lab/tls").publish('{"sealed": true}')
        message = mailbus.wait_for_message(subscription, 10.0)
        assert message is not None and message.body == '{"sealed": true}'


def test_a_certificate_from_another_ca_is_refused(
    make_daemon: Callable[..., Daemon], pki: Pki, tmp_path: Path
) -> None:
    daemon = make_daemon(tls_cert=pki.cert)
    other = Pki(tmp_path / "other")
    with pytest.raises(ConnectionLost) as refused:
        PostOfficeClient("127.0.0.1", daemon.port, tls=client_context(ca_file=other.ca_file))
    assert str(refused.value).startswith(
        f"TLS with PostOffice at 127.0.0.1:{daemon.port} failed: the server's certificate is "
        "not trusted ("
    )
    assert "is ca-file the CA that signed it?" in str(refused.value)


def test_an_expired_certificate_is_refused(
    make_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    expired = Pki(tmp_path / "expired", expired=True)
    daemon = make_daemon(tls_cert=expired.cert)
    with pytest.raises(ConnectionLost, match="the server's certificate has expired"):
        PostOfficeClient("127.0.0.1", daemon.port, tls=client_context(ca_file=expired.ca_file))


def test_a_plain_client_against_a_tls_port_is_told_so(
    make_daemon: Callable[..., Daemon], pki: Pki
) -> None:
    daemon = make_daemon(tls_cert=pki.cert)
    client = PostOfficeClient("127.0.0.1", daemon.port, timeout=5.0)
    with pytest.raises(PostOfficeError, match=r"is it a TLS port\? \(set tls = true\)"):
        client.create_box("lab.plain", PASSWORD)
    client.close()


def test_a_tls_client_against_a_plain_port_is_told_so(daemon: Daemon, pki: Pki) -> None:
    with pytest.raises(ConnectionLost, match="the server does not speak TLS on this port"):
        PostOfficeClient(
            "127.0.0.1", daemon.port, timeout=5.0, tls=client_context(ca_file=pki.ca_file)
        ).create_box("lab.x", PASSWORD)


@pytest.mark.slow
def test_mutual_tls_wants_a_client_certificate(
    make_daemon: Callable[..., Daemon], pki: Pki
) -> None:
    daemon = make_daemon(tls_cert=pki.cert, tls_client_ca=pki.ca_file)
    without = client_context(ca_file=pki.ca_file)
    with pytest.raises(ConnectionLost, match="does it require a client certificate"):
        client = PostOfficeClient("127.0.0.1", daemon.port, timeout=5.0, tls=without)
        client.create_box("lab.anon", PASSWORD)
    with_cert = client_context(ca_file=pki.ca_file, cert_file=pki.client_cert)
    client = PostOfficeClient("127.0.0.1", daemon.port, timeout=10.0, tls=with_cert)
    assert round_trip(client) == b"Subject: x\r\n\r\nsealed"


def test_unusable_tls_files_are_config_errors(pki: Pki, tmp_path: Path) -> None:
    table = {"box": "lab.a", "password": PASSWORD, "tls": True}
    table["ca-file"] = str(tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match=r"'postoffice\.ca-file': no such file"):
        PostOfficeOptions.from_options(options_from_mapping({"postoffice": table}))
    with pytest.raises(ConfigError, match="belong together"):
        client_context(ca_file=pki.ca_file, cert_file=pki.ca_file)


def _outward_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        address = str(probe.getsockname()[0])
        return None if is_loopback(address) else address
    return None


def test_plain_connections_from_other_hosts_are_refused_unless_allowed(
    make_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    address = _outward_address()
    if address is None:
        pytest.skip("no non-loopback interface to connect from")
    daemon = make_daemon(host="0.0.0.0")
    client = PostOfficeClient(address, daemon.port, timeout=5.0)
    with pytest.raises(Unsupported, match="refuses a plain connection from another host"):
        client.create_box("lab.remote", PASSWORD)
    client.close()
    with PostOfficeClient("127.0.0.1", daemon.port, timeout=5.0) as local:
        local.create_box("lab.local", PASSWORD)  # loopback stays plain
    allowing = make_daemon(
        host="0.0.0.0", allow_plain_remote=True, store_path=tmp_path / "other" / "po.db"
    )
    with PostOfficeClient(address, allowing.port, timeout=5.0) as client:
        client.create_box("lab.remote", PASSWORD)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("192.0.2.2", False),
        ("::ffff:192.0.2.2", False),
        ("fd00::2", False),
        ("localhost", False),  # a peer address is never a name: not trusted as loopback
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_closing_a_tls_transport_unblocks_a_receive_in_another_thread(
    make_daemon: Callable[..., Daemon], pki: Pki
) -> None:
    # Over TLS the receiving thread sits inside SSL_read: closing must wake it with a
    # clear outcome, not leave it blocked or crash its TLS state.
    daemon = make_daemon(tls_cert=pki.cert)
    table = {"port": daemon.port, "box": "close.tls", "password": PASSWORD}
    table |= {"tls": True, "ca-file": str(pki.ca_file)}
    opts = options_from_mapping({"transport": "postoffice", "postoffice": table})
    transport = create_transport(opts, Tracer())
    assert_close_wakes_a_receive(daemon, transport, "close.tls")
