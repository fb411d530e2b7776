"""The prepare program behind a tape-backed testbed xrootd (EMULATED tape, real XRootD).

xrootd loads its generic prepare plugin (``ofs.preplib libXrdOfsPrepGPI-5.so -admit all
-run <wrapper>``) and runs this program for every ``prepare`` and ``query prepare``
request, with the arguments ``[-a] [-C] [-n fin|rdy] [-p N] [-w] -- <request id>
<request> <path> ...`` (XrdOfsPrepGPI.cc, xrootd 5.5). ``<request>`` is:

- ``query``: print, as EOS-CTA does, ``{"request_id": ..., "responses": [{"path",
  "path_exists", "on_tape", "online", "requested", "error_text"}, ...]}``; false flags and
  empty texts are left out (xrootd 5.5 returns at most ~2 KB of a query's answer: measured,
  a 20-file answer came back as "No information available."; ``-maxresp`` came later);
- ``stage`` / ``prep``: record the request for the emulated drives (testbed/tapestore.py);
- ``evict``: drop the disk copies of files that are on tape;
- ``cancel``: accepted, nothing to undo.

Its answers come from the tape catalogue (``TapeLayout``), the same files the emulated
drives write, so XRootD's own interface reports what the tape did.

    python -m gridxfer.testbed.tapegpi SERVER_DIR [GPI arguments...]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from gridxfer.movers.tape import Residency
from gridxfer.testbed.tapestore import TapeLayout

_FLAGS_WITH_VALUE = ("-n", "-p")


def parse(argv: list[str]) -> tuple[str, str, list[str]]:
    """GPI arguments -> (request id, request name, paths)."""
    i = 0
    while i < len(argv) and argv[i] != "--":
        i += 2 if argv[i] in _FLAGS_WITH_VALUE else 1
    rest = argv[i + 1:]
    if len(rest) < 2:
        raise ValueError("expected: [options] -- <request id> <request> [paths]")
    return rest[0], rest[1], rest[2:]


def answer(layout: TapeLayout, request_id: str, paths: list[str]) -> dict:
    requested = layout.requested()
    responses = []
    for path in paths:
        entry: dict[str, object] = {"path": path}
        rel = layout.relative(path)
        if rel is None:
            entry["error_text"] = "not in the tape-backed namespace"
        else:
            where = layout.residency(rel)
            flags = {"path_exists": where is not Residency.MISSING,
                     "on_tape": where in (Residency.ON_TAPE, Residency.TAPE_ONLY),
                     "online": where in (Residency.ON_TAPE, Residency.DISK_ONLY),
                     "requested": rel in requested}
            entry.update({k: True for k, v in flags.items() if v})
        responses.append(entry)
    return {"request_id": request_id, "responses": responses}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m gridxfer.testbed.tapegpi SERVER_DIR [GPI arguments]",
              file=sys.stderr)
        return 2
    layout = TapeLayout.of(Path(args[0]))
    try:
        request_id, request, paths = parse(args[1:])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rels = [r for r in (layout.relative(p) for p in paths) if r is not None]
    if request == "query":
        print(json.dumps(answer(layout, request_id, paths), separators=(",", ":")))
    elif request in ("stage", "prep"):
        if rels:
            layout.add_request(request_id, rels)
    elif request == "evict":
        for rel in rels:
            layout.evict(rel)
    elif request != "cancel":
        print(f"error: unknown request {request!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
