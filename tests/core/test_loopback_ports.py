"""The ports a stack asks for one by one are all different: Dovecot refuses a
configuration that names one port twice ("duplicate listener"), as CI once saw."""

from __future__ import annotations

from mailbus.stacks.loopback import PORT_RANGE, free_port


def test_ports_handed_out_by_one_process_never_repeat() -> None:
    # 500 random draws from 12,000 ports repeat one almost surely (the birthday bound).
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
    assert all(port in PORT_RANGE for port in ports)
