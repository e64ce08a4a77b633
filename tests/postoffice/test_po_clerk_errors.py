"""A clerk whose answer the protocol refuses closes that connection and nothing else."""

from __future__ import annotations

from mailbus.postoffice.protocol import Phase, RequestCode, ResponseCode

from .conftest import Daemon


def test_a_refused_answer_closes_only_its_connection(daemon: Daemon) -> None:
    victim = daemon.raw()
    daemon.wait_for(lambda: len(daemon.office.clerks) == 1)
    clerk = daemon.thread.call(lambda: next(iter(daemon.office.clerks)))
    # An answer nobody asked for (a bug in the clerk, not the client's doing): it must
    # not raise into whoever called (a commit callback, another clerk, a timer).
    daemon.thread.call(lambda: clerk._reply(ResponseCode.INMAIL))
    assert daemon.thread.call(lambda: clerk.proto.position.phase) is Phase.ERROR
    assert victim.at_eof()
    daemon.wait_for(lambda: len(daemon.office.clerks) == 0)
    # The daemon goes on serving other connections.
    other = daemon.raw()
    other.exchange(bytes((RequestCode.DISCONNECT,)), bytes((ResponseCode.REQGRANTED,)))
    assert other.at_eof()
    other.close()
    victim.close()
