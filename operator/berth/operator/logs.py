"""Log output: ``--log-format json`` (one JSON object a line, for collectors) or ``text`` (for people).

Rules: both formats go through Kopf's formatters, so a line about a fleet carries its reference (JSON: the
``object`` key; text: a ``[namespace/name]`` prefix). Kopf's per-handler chatter ("Handler ... succeeded", once per
timer tick per fleet) is kept below INFO; its warnings and errors, and everything Berth logs, are shown.
"""

from __future__ import annotations

import logging

import kopf


def configure_logging(log_format: str) -> None:
    if log_format == "json":
        kopf.configure(log_format=kopf.LogFormat.JSON, log_refkey="object")
    else:
        kopf.configure(log_format=kopf.LogFormat.FULL, log_prefix=True)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # aiohttp's access log is not ours to show (Kopf's liveness endpoint would log every probe).
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # kafka-python narrates every connection and metadata refresh at INFO; the Kafka port reports what matters.
    logging.getLogger("kafka").setLevel(logging.WARNING)
