"""Log output: ``--log-format json`` (one JSON object a line, for collectors) or ``text`` (for people), at
``--log-level``: the format both daemons share (``berth.coordinator.daemon.logs``).

Rules: a line about a fleet carries its reference (Kopf's object loggers attach it: JSON, the ``object`` key; text,
a ``[namespace/name]`` prefix). Kopf's per-handler chatter ("Handler ... succeeded", once per timer tick per fleet)
is kept below INFO; its warnings and errors, and everything Berth logs, are shown.
"""

from __future__ import annotations

import logging

from berth.coordinator.daemon import logs


def configure_logging(log_format: str, log_level: str = "info") -> None:
    logs.configure_logging(log_format, log_level)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # aiohttp's access log is not ours to show (Kopf's liveness endpoint would log every probe).
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # kafka-python narrates every connection and metadata refresh at INFO; the Kafka port reports what matters.
    logging.getLogger("kafka").setLevel(logging.WARNING)
