"""Every value signal checked against Kafka's ground truth (issue 30, "What to build 2"): the histories of
``test_berth_histories`` (``support.signal_histories``), played by the signal lab with the operator's real pass
against a real Kafka-protocol broker, the pods' processes real Kafka clients (``support.signal_kafka_rig``): classic
groups of kafka-python static members on ``kfake``, consumer-protocol (KIP-848) groups of confluent-kafka consumers
(``group.protocol=consumer``) on ``kfake-kip848``. The oracle (``support.signal_oracle``) compares every Event,
``status.restarts``, ``status.lastScaleDown``, ``status.foreignMembers`` and the metrics with what the broker said
(its answers to the operator's removals, its group described every 150 ms) and what the lab did to the pods:
restarts never charged with rebalances they did not cause, a fleet's own ordinals never foreign,
``lastScaleDown.removed`` only what was removed, no ``?`` in any Event.

kfake has no manual clock, so the histories run on the wall clock, ``BATCH`` at a time (8 by default) on the two
brokers (each history a group of its own, the protocols alternating in a batch: half of the histories each).
``make test`` runs a fixed-seed few (``BERTH_KAFKA_SIGNAL_HISTORIES``, 16 by default: the first batch Hypothesis
draws is its simplest); ``make soak`` runs 200 from a seed of its own (``BERTH_KAFKA_SIGNAL_SEED``) and writes the
figures to ``BERTH_KAFKA_SIGNAL_RESULTS``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from support.kafka_broker import HOW_TO_GET, HOW_TO_GET_KIP848, KafkaBroker, find_kfake
from support.kube_fixtures import unavailable
from support.signal_histories import histories
from support.signal_kafka_rig import BROKER_CONFIGS, CLASSIC, CONSUMER, PROTOCOLS, KafkaRig, create_topics
from support.signal_lab import History, Lab, Record
from support.signal_oracle import describe, wrong_signals

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

HISTORIES = int(os.environ.get("BERTH_KAFKA_SIGNAL_HISTORIES", "16"))
BATCH = max(1, int(os.environ.get("BERTH_KAFKA_SIGNAL_BATCH", "8")))
SEED = int(os.environ.get("BERTH_KAFKA_SIGNAL_SEED", "7"))
RESULTS = os.environ.get("BERTH_KAFKA_SIGNAL_RESULTS")
VERBOSE = bool(os.environ.get("BERTH_KAFKA_SIGNAL_VERBOSE"))  # every history's record printed (with -s)


@pytest.fixture(scope="module")
def brokers() -> Iterator[dict[str, str]]:
    """One broker per protocol for every history of the module (each history a group of its own), started here with
    the lowered group bounds the histories need (``signal_kafka_rig.BROKER_CONFIGS``); never ``BERTH_KAFKA_BOOTSTRAP``:
    a real cluster's bounds are not the tests' to lower."""
    classic, kip848 = find_kfake(), find_kfake(kip848=True)
    if classic is None or kip848 is None:
        unavailable(HOW_TO_GET if classic is None else HOW_TO_GET_KIP848)
    assert classic is not None and kip848 is not None
    workdir = Path(tempfile.mkdtemp(prefix="berth-kafka-signals-"))
    started: list[KafkaBroker] = []
    try:
        for protocol, binary in ((CLASSIC, classic), (CONSUMER, kip848)):
            started.append(KafkaBroker(binary, workdir / f"kfake-{protocol}.log", BROKER_CONFIGS[protocol]).start())
        found = {protocol: broker.bootstrap for protocol, broker in zip(PROTOCOLS, started, strict=True)}
        for bootstrap in found.values():
            create_topics(bootstrap)
        yield found
    finally:
        for broker in started:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


class Tally:
    histories: dict[str, int] = dict.fromkeys(PROTOCOLS, 0)
    events = 0
    passes = 0
    fatal: list[str] = []  # fatal client errors (a consumer-protocol process replaced its consumer)
    unsettled: list[str] = []  # histories whose group the broker still showed rebalancing at the end
    wrong: list[str] = []  # each history with a wrong signal: what was wrong, and its record


@pytest.mark.timeout(300 + 30 * HISTORIES)  # about 8 s a history quiet on 2 cores, 8 at a time: room for a busy machine
def test_every_signal_agrees_with_the_broker_over_generated_histories(brokers: dict[str, str]) -> None:
    started = time.monotonic()
    names = iter(range(1, 1 << 20))

    @seed(SEED)
    @settings(
        max_examples=math.ceil(HISTORIES / BATCH),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
        phases=(Phase.explicit, Phase.generate),  # a batch takes a minute: no shrinking; a failure prints it all
    )
    @given(st.lists(histories, min_size=BATCH, max_size=BATCH))
    def batch(drawn: list[History]) -> None:
        plays = [(PROTOCOLS[i % len(PROTOCOLS)], f"k{next(names)}", history) for i, history in enumerate(drawn)]
        played = asyncio.run(play_all(brokers, plays))
        for (protocol, _, _), (record, rig) in zip(plays, played, strict=True):
            Tally.fatal += rig.processes.fatal() if rig.processes is not None else []
            Tally.histories[protocol] += 1
            Tally.events += len(record.said)
            Tally.passes += len(record.statuses)
            if record.unsettled is not None:
                Tally.unsettled.append(f"{record.group} ({protocol}): {record.unsettled}")
            found = wrong_signals(record)
            if VERBOSE:
                print(f"\n{protocol} group {record.group}: {len(found)} wrong\n{describe(record)}\n{record.status}")
            if found:
                Tally.wrong.append(f"{protocol} group {record.group}:\n" + "\n".join(found) + "\n" + describe(record))

    batch()  # every batch played (a campaign counts its wrong histories), then the test fails on any
    elapsed = time.monotonic() - started
    played = sum(Tally.histories.values())
    print(
        f"\nKafka: {played} generated histories ({Tally.histories[CLASSIC]} classic, {Tally.histories[CONSUMER]}"
        f" consumer protocol), {Tally.passes} passes, {Tally.events} Events, {len(Tally.wrong)} histories with wrong"
        f" signals ({elapsed:.0f} s,"
        f" {BATCH} at a time, seed {SEED}); {len(Tally.fatal)} fatal client errors: {Tally.fatal};"
        f" {len(Tally.unsettled)} groups the broker left rebalancing: {Tally.unsettled}"
    )
    if RESULTS:
        figures = {
            "coordinator": "kafka",
            "histories": played,
            "per_protocol": dict(Tally.histories),
            "passes": Tally.passes,
            "events": Tally.events,
            "wrong": len(Tally.wrong),
            "seconds": round(elapsed),
            "concurrent": BATCH,
            "fatal_client_errors": len(Tally.fatal),
            "groups_left_rebalancing": len(Tally.unsettled),
            "seed": SEED,
        }
        Path(RESULTS).write_text(json.dumps(figures, indent=2) + "\n")
    assert not Tally.wrong, "\n\n".join(Tally.wrong)


async def play_all(brokers: dict[str, str], plays: list[tuple[str, str, History]]) -> list[tuple[Record, KafkaRig]]:
    return list(await asyncio.gather(*(play(brokers[protocol], protocol, name, h) for protocol, name, h in plays)))


async def play(bootstrap: str, protocol: str, name: str, history: History) -> tuple[Record, KafkaRig]:
    rig = await KafkaRig(bootstrap, protocol).start(name)
    return await Lab(rig, name, history).run(), rig
