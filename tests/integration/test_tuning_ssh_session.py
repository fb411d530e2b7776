"""An SSH session the server closes, against a real sshd in a scratch namespace: between two
commands the connection is opened again (nothing ran, nothing is repeated); during a
command it is one clear error, never a traceback and never a made-up exit status."""
from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import pytest

from gridxfer.testbed.procs import tree
from gridxfer.tuning.targets.base import TargetError
from gridxfer.tuning.targets.ssh import SshTarget
from gridxfer.tuning.testing import scratch_netns, sshd_host

pytestmark = [pytest.mark.root, pytest.mark.integration]


@pytest.fixture(scope="module")
def sshd():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with scratch_netns() as ns, sshd_host(ns) as host:
        yield host


def target(sshd) -> SshTarget:
    return SshTarget(sshd.address, user="root", port=sshd.port, key_filename=sshd.key,
                     known_hosts=sshd.known_hosts)


def drop_sessions(sshd) -> None:
    """What an sshd restart or a firewall's idle timeout does: the server side of every
    connection goes away; the listener stays."""
    listener = int(Path(sshd.workdir, "sshd.pid").read_text())
    for proc in tree(listener)[1:]:
        proc.kill()


def wait_inactive(t: SshTarget) -> None:
    transport = t._client.get_transport()
    deadline = time.monotonic() + 30
    while transport.is_active():
        assert time.monotonic() < deadline, "the client never saw the connection close"
        time.sleep(0.02)


def test_a_connection_closed_between_commands_is_opened_again(sshd, caplog):
    with target(sshd) as t:
        assert t.run(["true"]).ok
        first = t._client.get_transport()
        drop_sessions(sshd)
        wait_inactive(t)
        with caplog.at_level(logging.WARNING, logger="gridxfer.tuning.targets.ssh"):
            res = t.run(["echo", "again"])
        assert res.ok and res.stdout == "again\n"
        assert t._client.get_transport() is not first
        ours = [r.getMessage() for r in caplog.records if r.name == "gridxfer.tuning.targets.ssh"]
        assert len(ours) == 1, ours                 # a FIN or a reset, as the kill left it:
        assert re.fullmatch(rf"{re.escape(t.label)}: the SSH connection was closed "
                            r"\((closed by the server|\[Errno 104\] Connection reset by peer)\); "
                            "connecting again", ours[0]), ours


def test_a_session_that_ends_during_a_command_is_one_clear_error(sshd):
    """The command's outcome is unknown: an error naming why, not exit status -1, and the
    command is not sent again."""
    with target(sshd) as t:
        with pytest.raises(TargetError) as err:
            t.run(["sh", "-c", "kill -KILL $PPID; sleep 5"])    # its sshd session process
        msg = str(err.value)
        assert msg.startswith(f"{t.label}: sh: the SSH session ended") and "\n" not in msg
        assert t.run(["true"]).ok                                # and the next one reconnects


def test_a_server_that_stays_away_is_one_clear_error(sshd):
    with target(sshd) as t:
        assert t.run(["true"]).ok
        t.port = 1                                  # the reconnect finds nobody listening
        drop_sessions(sshd)
        wait_inactive(t)
        with pytest.raises(TargetError, match="cannot connect"):
            t.run(["true"])


def test_the_session_interface_is_asked_on_a_live_connection(sshd):
    """`tune apply --iface` asks which interface carries the session before any write: on
    a connection the server closed, that question reconnects too, not a traceback."""
    with target(sshd) as t:
        assert t.session_interfaces() == {sshd.ns.ns_if}
        drop_sessions(sshd)
        wait_inactive(t)
        assert t.session_interfaces() == {sshd.ns.ns_if}
