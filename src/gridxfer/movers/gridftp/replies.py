"""What the client makes of a GridFTP server's replies: MLST facts, the TransferError a
failed command becomes (530: a permission error, whatever the text), whether a name exists
(the destination check that rides in a STOR's flight), and the end of a STOR abandoned for
a final name that turned out to exist."""
from __future__ import annotations

import socket

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.gridftp.control import GsiControl, Reply
from gridxfer.movers.integrity import destination_exists


def found(url: str, reply: Reply) -> bool:
    """An MLST reply: True if ``url`` exists, False if not; any other failure raises."""
    if reply.ok:
        return True
    err = error(url, "MLST", reply, "source")
    if err.error_class is ErrorClass.SOURCE_MISSING:
        return False
    raise err


def abandon(session: GsiControl, data: socket.socket, existing: str) -> TransferError:
    """End a STOR whose final name turned out to exist (overwrite off): the server gets EOF
    after what was sent (at most the first flight) and closes the partial file before its
    last reply is read, so the caller's clean-up (verified_copy) deletes it without racing
    the server. Returns the EXISTS error."""
    data.shutdown(socket.SHUT_WR)
    if session.reply().code in (125, 150):
        session.reply()                     # the STOR's end: 226, or an error
    return destination_exists(existing)


def facts(text: str) -> dict[str, str]:
    """MLST facts ('Type=file;Size=10;... /path') as a lowercase-keyed dict."""
    for line in text.splitlines():
        if "=" in line and ";" in line:
            facts = line.strip().split(" ", 1)[0]
            return {k.lower(): v for k, _, v in (f.partition("=") for f in facts.split(";") if f)}
    return {}


def error(url: str, command: str, reply: Reply, side: str) -> TransferError:
    verb = command.split(" ", 1)[0]
    err = transfer_error(f"{reply.code} {reply.text}", f"{url}: {verb}", side=side)
    if reply.code == 530:
        return TransferError(ErrorClass.PERMISSION, str(err))
    return err
