"""classify(): one mapping from gfal2 / XRootD / subprocess / OSError failures to ErrorClass."""
from __future__ import annotations

import errno
import subprocess

import gfal2
import pytest
from XRootD.client.responses import XRootDStatus

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.classify import classify, one_line, transfer_error

C = ErrorClass


def xrd(code: int, num: int = 0, message: str = "[ERROR] x") -> XRootDStatus:
    return XRootDStatus({"status": 1, "code": code, "errno": num, "message": message,
                         "shellcode": 54, "error": True, "fatal": False, "ok": False})


@pytest.mark.parametrize("code,side,expected", [
    (errno.ENOENT, "source", C.SOURCE_MISSING),
    (errno.ENOENT, "destination", C.OTHER),
    (errno.EEXIST, "destination", C.EXISTS),
    (errno.ENOSPC, "destination", C.NO_SPACE),
    (errno.EDQUOT, "destination", C.NO_SPACE),
    (errno.EACCES, "source", C.PERMISSION),
    (errno.EPERM, "destination", C.PERMISSION),
    (errno.ETIMEDOUT, "source", C.TIMEOUT),
    (errno.ECONNREFUSED, "source", C.CONNECTION),
    (errno.ECONNRESET, "source", C.CONNECTION),
    (errno.EHOSTUNREACH, "source", C.CONNECTION),
    (errno.ECANCELED, "source", C.CANCELLED),
    (errno.ENAMETOOLONG, "destination", C.BAD_NAME),
])
def test_errno_codes(code, side, expected):
    assert classify(code, side=side) is expected
    assert classify(OSError(code, "x"), side=side) is expected
    assert classify(gfal2.GError("some failure", code), side=side) is expected


def test_gfal2_messages_without_useful_errno():
    # gfal2's gridftp plugin reports a refused connection as ECOMM (70) with the text
    refused = gfal2.GError("globus_xio: Unable to connect to 127.0.0.1:1 globus_xio: System error "
                           "in connect: Connection refused", 70)
    assert classify(refused) is C.CONNECTION
    missing = gfal2.GError("550-GridFTP-Errno: 2 550-GridFTP-Error-String: No such file or "
                           "directory", 2)
    assert classify(missing, side="source") is C.SOURCE_MISSING


def test_credential_problems_beat_their_errno():
    # gfal2 reports a missing proxy as ENOENT; it is a permission problem, not a missing source
    no_proxy = gfal2.GError("Could not open the user certificate", errno.ENOENT)
    assert classify(no_proxy, side="source") is C.PERMISSION


@pytest.mark.parametrize("status,side,expected", [
    (xrd(400, 3011, "[ERROR] Server responded with an error: [3011] no such file"), "source",
     C.SOURCE_MISSING),
    (xrd(400, 3018, "file exists"), "destination", C.EXISTS),
    (xrd(400, 3009), "destination", C.NO_SPACE),
    (xrd(400, 3021), "destination", C.NO_SPACE),
    (xrd(400, 3010), "source", C.PERMISSION),
    (xrd(400, 3030), "source", C.PERMISSION),
    (xrd(108, 0, "[FATAL] Connection error"), "source", C.CONNECTION),
    (xrd(103, 0, "[ERROR] Socket timeout"), "source", C.TIMEOUT),
    (xrd(206, 0, "[ERROR] Operation expired"), "source", C.TIMEOUT),
    (xrd(204, 0, "[FATAL] Auth failed"), "source", C.PERMISSION),
    (xrd(305, 0, "[ERROR] Checksum error"), "destination", C.CHECKSUM),
    (xrd(400, 3012, "[ERROR] something odd"), "source", C.OTHER),
])
def test_xrootd_status(status, side, expected):
    assert classify(status, side=side) is expected


@pytest.mark.parametrize("stderr,side,expected", [
    ("error: globus_xio: Unable to connect to 127.0.0.1:32899\nSystem error in connect: "
     "Connection refused", "destination", C.CONNECTION),
    ("500-globus_xio: Unable to open file /d/nope\n500-System error in open: No such file or "
     "directory", "source", C.SOURCE_MISSING),
    ("530 Login incorrect. : globus_gss_assist: Error invoking callout", "source", C.PERMISSION),
    ("error: 451 No space left on device", "destination", C.NO_SPACE),
    ("error: something we have never seen", "source", C.OTHER),
])
def test_globus_url_copy_failures(stderr, side, expected):
    done = subprocess.CompletedProcess(["globus-url-copy"], 1, "", stderr)
    assert classify(done, side=side) is expected


def test_transfer_error_is_one_line():
    err = transfer_error(gfal2.GError("line one\nline two\n   three", errno.ENOENT), "gsiftp://h/f")
    assert isinstance(err, TransferError) and err.error_class is C.SOURCE_MISSING
    assert "\n" not in str(err) and str(err).startswith("source_missing: gsiftp://h/f: line one")
    assert len(one_line("x" * 1000)) <= 300


def test_a_name_too_long_is_a_permanent_bad_name_and_its_reason_is_kept():
    """A 254-character name once failed as 'other' (retried for minutes) with a message
    cut at 300 characters, before its reason: the long URLs are shortened now, never it."""
    name = "L" * 250 + ".dat"
    src, dst = f"file:///data/src/{name}", f"gsiftp://h:2811/data/dst/.{name}.gxpart-1a2b3c4d"
    text = (f"globus_ftp_client: the server responded with an error 500 Command failed. : "
            f"globus_l_gfs_file_open failed. : System error in open: /data/dst/.{name}"
            f".gxpart-1a2b3c4d: File name too long")
    for failure in (gfal2.GError(text, errno.ENAMETOOLONG), gfal2.GError(text, errno.EIO),
                    subprocess.CompletedProcess(["globus-url-copy"], 1, "", text),
                    OSError(errno.ENAMETOOLONG, "File name too long", f"/data/dst/{name}"),
                    xrd(400, 3002, f"[ERROR] Server responded with an error: [3002] Unable to "
                                   f"create /data/dst/{name}; file name too long")):
        err = transfer_error(failure, f"{src} -> {dst}", side="destination")
        assert err.error_class is C.BAD_NAME and not err.retryable, (failure, err)
        assert str(err).lower().endswith("file name too long") or \
            "[Errno 36] File name too long" in str(err), str(err)
        assert len(str(err)) <= 300 + len("bad_name: ") and "file:///data/src/LLL" in str(err)


@pytest.mark.parametrize("failure", [
    gfal2.GError("Result HTTP 403 : Permission refused  after 1 attempts", errno.EACCES),
    gfal2.GError("HTTP 401 : Authentication Error", errno.EPERM),
    gfal2.GError("DESTINATION OVERWRITE  Result HTTP 403 : Permission refused", errno.ENOENT),
    "failure: Remote side failed with status code 403; error message: forbidden",
    "copy refused: 401 Unauthorized",
])
def test_http_401_and_403_are_auth_and_never_retried(failure):
    """A token missing, refused or short of a scope: its own class (issue 20), not retried."""
    assert classify(failure, side="destination") is C.AUTH
    assert not C.AUTH.retryable


@pytest.mark.parametrize("failure", [
    gfal2.GError("Result HTTP 404 : File not found", errno.ENOENT),
    gfal2.GError("Result HTTP 500 : Internal error, 4031 bytes", errno.EIO),
    "copied 403 files",
])
def test_other_http_statuses_are_not_auth(failure):
    assert classify(failure, side="source") is not C.AUTH


def test_http_423_locked_is_retried_not_exists():
    """XrdHttp answers 423 while a killed upload's file is still open on the server; gfal2
    reports it as EEXIST. A resume right after kill -9 met it and failed 3 files as
    'exists' (tests/integration/test_davs_campaigns.py, upload-hostile, once in CI)."""
    failure = gfal2.GError("TRANSFER ERROR: Copy failed (streamed). Last attempt: HTTP 423 : "
                           "Permission refused", errno.EEXIST)
    got = classify(failure, side="destination")
    assert got is C.LOCKED and got.retryable


def test_xrootd_file_locked_is_locked():
    status = xrd(400, 3003, "[ERROR] Server responded with an error: [3003] file is already "
                            "opened in write mode")
    assert classify(status, side="destination") is C.LOCKED
