#!/usr/bin/python3 -S
"""adler32 for an XRootD server's ``xrootd.chksum`` program hook: mmap + zlib.

    xrootd.chksum max 4 adler32 /path/xrdcksprog.py LOCALROOT

xrootd runs ``PROGRAM [ARGS...] LFN`` for each checksum query it must compute and sends
the first line of its standard output back as ``adler32 <value>``. This program maps the
file ``LOCALROOT + LFN`` read-only and sums it with zlib, then prints 8 lowercase hex digits.

Why not xrootd's built-in adler32: xrootd 5.5 reads the whole file into a freshly
``malloc``ed buffer of up to 64 MB per query (``strace``: one 64 MB ``pread`` into a new
anonymous mapping), so every query of a 64 MB file page-faults 16,384 pages before it sums
anything: 145 ms of server CPU per file (47 ms user, ~100 ms system), 125-200 ms per query.
Mapping the file instead costs ~30-60 ms per query in all (measured on this project's
2-core VM, ``bench.bulk``'s BENCHMARKS.md "Fifth pass"). ``ofs.cksrdsz`` does not change
that read: the OSS checksum path ignores it, and the mmap path (``ofs.osslib +mmapio``)
needs an OSS plugin library.

Standalone on purpose: standard library only, run by ``/usr/bin/python3 -S`` (no site
import) as the server's own user. The testbed copies it into each server's ``run/``.
Failures print one line on standard error and exit 1; xrootd answers the query with an
error then (the client asks again or reports it).
"""
import mmap
import os
import stat
import sys
import zlib


def adler32_of(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if st.st_size == 0:
            return 1                    # mmap refuses empty files; adler32(b"") == 1
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as data:
            return zlib.adler32(data)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: xrdcksprog.py LOCALROOT LFN\n")
        return 2
    root, lfn = argv[1].rstrip("/"), argv[2]
    if not lfn.startswith("/") or "/../" in lfn + "/" or "\n" in lfn:
        sys.stderr.write(f"refused path {lfn!r}\n")
        return 2
    try:
        value = adler32_of(root + lfn)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"adler32 of {lfn}: {getattr(exc, 'strerror', None) or exc}\n")
        return 1
    # The answer last, in one write: xrootd may stop the program once it has read it.
    os.write(1, b"%08x\n" % value)
    return 0


if __name__ == "__main__":
    os._exit(main(sys.argv))
