"""The text a ``check_gridxfer_*`` plugin prints: one place that makes any text fit.

Monitoring Plugins Development Guidelines (https://www.monitoring-plugins.org/doc/
guidelines.html), and what each rule means for text taken from the user or the data
(an ``-E`` glob, a path, an endpoint or drive name, an exception message):

- "Plugin Output for Nagios" / "Print only one line of text": the status line is one
  line, and everything after its first ``|`` is performance data. :func:`status_text`
  turns every run of whitespace (newlines too) into one space, other unprintable
  characters (terminal escapes, undecodable bytes) into ``?``, and ``|`` into ``¦``
  (nagiosplugin would otherwise drop it and add a "removed illegal characters" line);
- "Performance data": a label may contain anything but ``=`` and ``'``; nagiosplugin
  quotes it when needed. :func:`perf_label` keeps ``[A-Za-z0-9_.:/-]`` only, so a label
  needs no quoting rules at all, and cuts it to 60 characters;
- no credential in any output (``gridxfer.redact``): both redact first.
"""
from __future__ import annotations

import re

from gridxfer.redact import redact

PIPE_SHOWN_AS = "\u00a6"     # broken bar: shows where a '|' was without starting perfdata


def status_text(text: str) -> str:
    """``text`` for the status line (or a verbose line): redacted, one line, no ``|``."""
    text = "".join(c if c.isprintable() or c.isspace() else "?" for c in redact(text))
    return " ".join(text.split()).replace("|", PIPE_SHOWN_AS)


def one_line(exc: BaseException) -> str:
    """An exception as one status-line text (an OSError as ``file: reason``)."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    return status_text(text)[:300]


def perf_label(text: str) -> str:
    """A perfdata label: no quotes or '=' (guidelines), short and stable."""
    return re.sub(r"[^A-Za-z0-9_.:/-]+", "_", redact(text))[:60] or "_"
