"""docs/reliability.md's section on the value signals (``benchmarks.reliability`` renders it), from
``signals_berth.json`` and ``signals_kafka.json``, which ``make soak``'s signal-lab campaigns write
(``tests/signals/test_berth_histories.py``, ``tests/signals/test_kafka_histories.py``)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from benchmarks.common import RESULTS

#: How each coordinator kind's campaign is named in the section, and its protocols'.
KINDS = {"berth": "Berth's coordinator", "kafka": "Kafka (kfake)"}
PROTOCOLS = {"classic": "classic", "consumer": "consumer protocol"}
TEXT = (
    "The Events, `status.restarts`, `status.lastScaleDown`, `status.foreignMembers`, `status.group` and the fleet's"
    " metrics are what an SRE reads Berth's value from, so each is checked against what really happened"
    " (`tests/signals`, docs/testing.md). Hypothesis generates histories of a fleet (its settings, and an interleaving"
    " of pod deletes, evictions, crashes short and long, rolls, scale-ups and downs, time passing and operator"
    " passes); the signal lab plays each with the operator's real pass against a real coordinator (Berth's, on its"
    " manual clock; or a Kafka-protocol broker with real Kafka clients as the pods' processes, classic and"
    " consumer-protocol groups); the oracle compares every signal with the coordinator's journal or the broker's"
    " answers and with what the lab did to the pods: a restart is never charged with a rebalance it did not cause, a"
    " fleet's own ordinals are never foreign, `removed` names only what was removed, no Event has a `?`. `make test`"
    " plays a fixed-seed few of each."
)


def _load(kind: str) -> dict[str, Any] | None:
    path = RESULTS / f"signals_{kind}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _row(kind: str, record: dict[str, Any]) -> str:
    protocols = record.get("per_protocol") or {}
    split = ", ".join(f"{n} {PROTOCOLS.get(p, p)}" for p, n in sorted(protocols.items()))
    histories = f"{record['histories']}" + (f" ({split})" if split else "")
    at_once = record.get("concurrent", 1)
    return (
        f"| {KINDS.get(kind, kind)} | {histories} | {record['passes']:,} | {record['events']:,} | "
        f"**{record['wrong']}** | {record['seconds']:,} s ({at_once} at a time) | {record['seed']} |"
    )


def section() -> list[str]:
    lines = [
        "## Value signals checked against ground truth (`make soak`)",
        "",
        *textwrap.wrap(TEXT, 114),
        "",
    ]
    records = [(kind, record) for kind in KINDS if (record := _load(kind))]
    if records:
        lines += [
            "| coordinator | histories | operator passes | Events | wrong signals | wall time | seed |",
            "|---|---|---|---|---|---|---|",
            *(_row(kind, record) for kind, record in records),
            "",
        ]
    return lines
