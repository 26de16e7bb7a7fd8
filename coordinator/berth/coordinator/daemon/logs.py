"""Both daemons' log lines: ``--log-format text`` for people, ``json`` for collectors, and ``--log-level``.

Rules:

- One line per record on stderr. ``json``: one object a line, ``{"timestamp", "severity", "logger", "message"}``, with
  ``object`` (``{apiVersion, kind, namespace, name, uid}``) on a line about a Kubernetes object (Kopf's object
  loggers attach it) and ``exception`` (the traceback, as one string) when there is one. ``text``:
  ``TIME LEVEL LOGGER [namespace/name] message``.
- ``severity`` is the level's name in lower case (``debug``, ``info``, ``warning``, ``error``, ``critical``);
  ``timestamp`` is UTC, RFC 3339 with milliseconds.
- :func:`configure_logging` replaces whatever handlers the root logger had, so calling it again (a test, a daemon
  that reconfigures) never doubles lines.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


def add_logging_flags(parser: argparse.ArgumentParser, *, default_level: str = "info") -> None:
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text", help="json (one object a line) for collectors, or text"
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=default_level, help="least severe line logged")


def _object(record: logging.LogRecord) -> dict[str, Any] | None:
    ref = getattr(record, "k8s_ref", None)
    return dict(ref) if isinstance(ref, dict) else None


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "severity": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        found = _object(record)
        if found is not None:
            line["object"] = found
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        found = _object(record)
        if found is not None:
            where = "/".join(str(found[key]) for key in ("namespace", "name") if found.get(key))
            record = logging.makeLogRecord({**record.__dict__, "msg": f"[{where}] {record.getMessage()}", "args": ()})
        return super().format(record)


def configure_logging(log_format: str, log_level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every record at ``log_level`` or above to ``stream`` (stderr) in ``log_format``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, log_level.upper()))
